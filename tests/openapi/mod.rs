//! Checks request and response bodies against Cloudflare's OpenAPI 3.0 subset
//! (`tests/data/cloudflare-openapi-subset.json`), plus the DNS batch call, which is newer than the
//! subset and written down from Cloudflare's generated SDK types in
//! `tests/data/cloudflare-dns-batch.json` (its `x-source` says which). The Zero Trust Access
//! operations are a second subset of the same upstream document
//! (`tests/data/cloudflare-openapi-access-subset.json`), loaded by [`OpenApi::load_access`];
//! the edge certificate operations are a third
//! (`tests/data/cloudflare-openapi-certificates-subset.json`), loaded by
//! [`OpenApi::load_certificates`]; the virtual network and IP route operations are a fourth
//! (`tests/data/cloudflare-openapi-networks-subset.json`), loaded by [`OpenApi::load_networks`],
//! and the hostname route operations, newer than the subsets, are written down from
//! Cloudflare's generated SDKs in `tests/data/cloudflare-openapi-hostname-routes.json`, loaded
//! by [`OpenApi::load_hostname_routes`].
//!
//! OpenAPI 3.0 schemas are close to JSON Schema draft 4 (boolean `exclusiveMinimum`, `$ref`
//! siblings ignored), except for `nullable`, which is rewritten into `anyOf [..., {type: null}]`
//! before the draft-4 validator compiles them.
use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

const SPEC: &str = include_str!("../data/cloudflare-openapi-subset.json");
const BATCH: &str = include_str!("../data/cloudflare-dns-batch.json");
const ACCESS_SPEC: &str = include_str!("../data/cloudflare-openapi-access-subset.json");
const CERTIFICATES_SPEC: &str = include_str!("../data/cloudflare-openapi-certificates-subset.json");
const NETWORKS_SPEC: &str = include_str!("../data/cloudflare-openapi-networks-subset.json");
const HOSTNAME_ROUTES_SPEC: &str = include_str!("../data/cloudflare-openapi-hostname-routes.json");

/// Query parameters the client sends that the 2024 subset does not declare yet but the current
/// API documents (see the drift notes): DNS name filters with operators.
const DOCUMENTED_DRIFT_PARAMS: &[&str] = &[
    "name.exact",
    "name.startswith",
    "name.endswith",
    "name.contains",
];

/// Query parameters the client sends to the Access lists that the 2024 Access subset does not
/// declare: the current API and its SDKs page both lists with them.
const ACCESS_DRIFT_PARAMS: &[&str] = &["page", "per_page"];

/// Query parameters the client sends to the certificate pack list that the 2024 certificates
/// subset does not declare: the current API pages it with them (`per_page` 5..50, default 20;
/// see the drift notes of the edge certificates).
const CERTIFICATES_DRIFT_PARAMS: &[&str] = &["page", "per_page"];

pub struct OpenApi {
    components: Value,
    operations: BTreeMap<String, Value>,
    drift_params: &'static [&'static str],
}

impl OpenApi {
    pub fn load() -> Self {
        let mut spec: Value =
            serde_json::from_str(SPEC).expect("the vendored OpenAPI subset is valid JSON");
        let batch: Value = serde_json::from_str(BATCH).expect("the batch schema is valid JSON");
        for (name, schema) in batch["components"]["schemas"].as_object().expect("schemas") {
            spec["components"]["schemas"][name] = schema.clone();
        }
        for (path, item) in batch["paths"].as_object().expect("paths") {
            spec["paths"][path] = item.clone();
        }
        Self::from_spec(&spec, DOCUMENTED_DRIFT_PARAMS)
    }

    /// The Zero Trust Access subset.
    pub fn load_access() -> Self {
        let spec: Value =
            serde_json::from_str(ACCESS_SPEC).expect("the vendored Access subset is valid JSON");
        Self::from_spec(&spec, ACCESS_DRIFT_PARAMS)
    }

    /// The edge certificates subset.
    pub fn load_certificates() -> Self {
        let spec: Value = serde_json::from_str(CERTIFICATES_SPEC)
            .expect("the vendored certificates subset is valid JSON");
        Self::from_spec(&spec, CERTIFICATES_DRIFT_PARAMS)
    }

    /// The private networks subset: virtual networks and IP routes. Every query parameter the
    /// client sends is declared.
    pub fn load_networks() -> Self {
        let spec: Value = serde_json::from_str(NETWORKS_SPEC)
            .expect("the vendored networks subset is valid JSON");
        Self::from_spec(&spec, &[])
    }

    /// The hostname routes document. Every query parameter the client sends is declared.
    pub fn load_hostname_routes() -> Self {
        let spec: Value = serde_json::from_str(HOSTNAME_ROUTES_SPEC)
            .expect("the vendored hostname routes document is valid JSON");
        Self::from_spec(&spec, &[])
    }

    fn from_spec(spec: &Value, drift_params: &'static [&'static str]) -> Self {
        let mut operations = BTreeMap::new();
        for (_path, item) in spec["paths"].as_object().expect("paths") {
            for (method, op) in item.as_object().expect("path item") {
                if let Some(id) = op.get("operationId").and_then(Value::as_str) {
                    let mut op = op.clone();
                    op["x-method"] = json!(method.to_uppercase());
                    operations.insert(id.to_string(), op);
                }
            }
        }
        let mut components = spec["components"].clone();
        rewrite_nullable(&mut components);
        OpenApi {
            components,
            operations,
            drift_params,
        }
    }

    pub fn has_operation(&self, operation_id: &str) -> bool {
        self.operations.contains_key(operation_id)
    }

    /// Validates a request body. DELETEs must carry none: the subset declares required JSON
    /// bodies for them, a quirk the real API and its SDKs do not follow.
    pub fn validate_request(&self, operation_id: &str, body: Option<&Value>) -> Result<(), String> {
        let op = self.operation(operation_id)?;
        let method = op["x-method"].as_str().unwrap_or_default();
        if method == "DELETE" || method == "GET" {
            return match body {
                None => Ok(()),
                Some(b) => Err(format!(
                    "{operation_id}: a {method} must carry no body, got {b}"
                )),
            };
        }
        let schema = &op["requestBody"]["content"]["application/json"]["schema"];
        match body {
            None if op["requestBody"]["required"] == json!(true) => {
                Err(format!("{operation_id}: request body required"))
            }
            None => Ok(()),
            Some(b) if schema.is_null() => {
                Err(format!("{operation_id}: no body declared, got {b}"))
            }
            Some(b) => self
                .check(schema, b)
                .map_err(|e| format!("{operation_id} request: {e}")),
        }
    }

    /// Validates a response body against the schema declared for its status (`200`, `4XX`, …).
    /// The subset declares no 5XX; Cloudflare sends the same failure envelope there, so a 5xx
    /// is checked against the `4XX` schema.
    /// Fails with the logged request and answer unless the answer validates. Cloudflare
    /// answers rate limiting with code 971, below the subsets' `minimum: 1000` for error codes;
    /// that single finding is tolerated on 429 answers.
    pub fn check_response(&self, operation_id: &str, entry: &cftunnel_sim::LoggedRequest) {
        match self.validate_response(operation_id, entry.status, &entry.response_body) {
            Ok(()) => {}
            Err(e) if entry.status == 429 && e.contains("971") && !e.contains("; ") => {}
            Err(e) => panic!(
                "{} {} -> {}: {e}\n{}",
                entry.method, entry.path, entry.status, entry.response_body
            ),
        }
    }

    pub fn validate_response(
        &self,
        operation_id: &str,
        status: u16,
        body: &Value,
    ) -> Result<(), String> {
        let op = self.operation(operation_id)?;
        let responses = &op["responses"];
        let class = format!("{}XX", if status >= 500 { 4 } else { status / 100 });
        let response = [status.to_string(), class, "default".to_string()]
            .iter()
            .map(|k| &responses[k.as_str()])
            .find(|r| !r.is_null())
            .ok_or_else(|| format!("{operation_id}: status {status} is not declared"))?;
        let schema = &response["content"]["application/json"]["schema"];
        if schema.is_null() {
            return Err(format!(
                "{operation_id}: status {status} declares no JSON body"
            ));
        }
        self.check(schema, body)
            .map_err(|e| format!("{operation_id} response {status}: {e}"))
    }

    /// Every query parameter must be declared by the operation (or be a documented newer one).
    pub fn validate_query(&self, operation_id: &str, query: &str) -> Result<(), String> {
        let op = self.operation(operation_id)?;
        let declared: Vec<&str> = op["parameters"]
            .as_array()
            .map(|ps| {
                ps.iter()
                    .filter(|p| p["in"] == "query")
                    .filter_map(|p| p["name"].as_str())
                    .collect()
            })
            .unwrap_or_default();
        let unknown: Vec<String> = url::form_urlencoded::parse(query.as_bytes())
            .map(|(k, _)| k.into_owned())
            .filter(|k| !declared.contains(&k.as_str()) && !self.drift_params.contains(&k.as_str()))
            .collect();
        if unknown.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "{operation_id}: undeclared query parameters {unknown:?}"
            ))
        }
    }

    fn operation(&self, operation_id: &str) -> Result<&Value, String> {
        self.operations
            .get(operation_id)
            .ok_or_else(|| format!("operation {operation_id} is not in the subset"))
    }

    /// Validates `instance` against `schema`, whose `$ref`s point into the components (e.g.
    /// `{"$ref": "#/components/schemas/x/anyOf/0"}` for one branch of a loose `anyOf`).
    pub fn check(&self, schema: &Value, instance: &Value) -> Result<(), String> {
        let mut schema = schema.clone();
        rewrite_nullable(&mut schema);
        let mut root = Map::new();
        root.insert("components".into(), self.components.clone());
        root.insert("allOf".into(), json!([schema]));
        let validator =
            jsonschema::draft4::new(&Value::Object(root)).map_err(|e| format!("schema: {e}"))?;
        let errors: Vec<String> = validator
            .iter_errors(instance)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors.join("; "))
        }
    }
}

/// `nullable: true` (OpenAPI 3.0) → `anyOf: [<schema>, {type: null}]` (JSON Schema).
fn rewrite_nullable(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for child in map.values_mut() {
                rewrite_nullable(child);
            }
            if map.remove("nullable") == Some(Value::Bool(true)) {
                let inner = Value::Object(std::mem::take(map));
                map.insert("anyOf".into(), json!([inner, {"type": "null"}]));
            }
        }
        Value::Array(items) => items.iter_mut().for_each(rewrite_nullable),
        _ => {}
    }
}

#[cfg(test)]
mod self_tests {
    use super::*;

    #[test]
    fn validator_rejects_what_the_schema_forbids() {
        let api = OpenApi::load();
        let op = "dns-records-for-a-zone-create-dns-record";
        let good = json!({"type": "CNAME", "name": "a.example.com", "content": "x.cfargotunnel.com", "ttl": 1, "proxied": true});
        assert_eq!(api.validate_request(op, Some(&good)), Ok(()));
        let bad_ttl = json!({"type": "CNAME", "name": "a.example.com", "content": "x.cfargotunnel.com", "ttl": 5});
        assert!(api.validate_request(op, Some(&bad_ttl)).is_err());
        let no_type = json!({"name": "a.example.com", "content": "x"});
        assert!(api.validate_request(op, Some(&no_type)).is_err());
        assert!(
            api.validate_request(
                "cloudflare-tunnel-delete-a-cloudflare-tunnel",
                Some(&json!({}))
            )
            .is_err()
        );
        assert_eq!(
            api.validate_request("cloudflare-tunnel-delete-a-cloudflare-tunnel", None),
            Ok(())
        );
        let failure = json!({"success": false, "errors": [{"code": 1013, "message": "dup"}], "messages": [], "result": null});
        assert_eq!(
            api.validate_response(
                "cloudflare-tunnel-create-a-cloudflare-tunnel",
                409,
                &failure
            ),
            Ok(())
        );
        let not_envelope = json!({"result": 1});
        assert!(
            api.validate_response(
                "cloudflare-tunnel-create-a-cloudflare-tunnel",
                409,
                &not_envelope
            )
            .is_err()
        );
        assert!(
            api.validate_query(
                "cloudflare-tunnel-list-cloudflare-tunnels",
                "name=a&is_deleted=false"
            )
            .is_ok()
        );
        assert!(
            api.validate_query("cloudflare-tunnel-list-cloudflare-tunnels", "bogus=1")
                .is_err()
        );
    }

    #[test]
    fn nullable_becomes_any_of_null() {
        let mut s = json!({"type": "string", "nullable": true});
        rewrite_nullable(&mut s);
        assert_eq!(s, json!({"anyOf": [{"type": "string"}, {"type": "null"}]}));
    }
}
