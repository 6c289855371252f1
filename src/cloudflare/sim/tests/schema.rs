//! Every body the simulator sends validates against the vendored OpenAPI subset.
use std::collections::BTreeSet;

use http::Method;
use serde_json::{Map, Value, json};

use super::*;
use crate::cloudflare::sim::{Fault, LoggedRequest, Operation};

const OPENAPI: &str = include_str!("../../../../tests/data/cloudflare-openapi-subset.json");

/// Cloudflare's observed rate-limit code 971 is below the schema's `minimum: 1000` for codes;
/// SPEC §5 asks for 971, so that single finding is tolerated on 429 answers.
const RATE_LIMIT_CODE_BELOW_MINIMUM: &str = "971 is less than the minimum of 1000";

/// OpenAPI 3.0 `nullable` becomes JSON Schema's `null` type (or enum member).
fn convert(value: &Value) -> Value {
    match value {
        Value::Array(items) => Value::Array(items.iter().map(convert).collect()),
        Value::Object(map) => {
            let mut out: Map<String, Value> =
                map.iter().map(|(k, v)| (k.clone(), convert(v))).collect();
            if out.remove("nullable") != Some(Value::Bool(true)) {
                return Value::Object(out);
            }
            if let Some(Value::Array(values)) = out.get_mut("enum")
                && !values.contains(&Value::Null)
            {
                values.push(Value::Null);
            }
            match out.get("type").cloned() {
                Some(Value::String(t)) => {
                    out.insert("type".into(), json!([t, "null"]));
                    Value::Object(out)
                }
                _ => json!({ "anyOf": [Value::Object(out), { "type": "null" }] }),
            }
        }
        other => other.clone(),
    }
}

struct Spec {
    doc: Value,
    components: Value,
}

impl Spec {
    fn load() -> Self {
        let doc: Value = serde_json::from_str(OPENAPI).expect("vendored OpenAPI parses");
        let components = convert(&doc["components"]);
        Spec { doc, components }
    }

    fn response_schema(&self, op: Option<Operation>, status: u16) -> Value {
        let op = match op {
            Some(Operation::VerifyAccountToken) => Operation::VerifyToken,
            Some(op) => op,
            None => Operation::ListTunnels,
        };
        let method = op.method().as_str().to_ascii_lowercase();
        let responses = &self.doc["paths"][op.path_template()][method.as_str()]["responses"];
        let schema = if status == 200 {
            &responses["200"]
        } else {
            &responses["4XX"]
        };
        let schema = &schema["content"]["application/json"]["schema"];
        assert!(schema.is_object(), "no schema for {op:?} {status}");
        json!({ "components": self.components, "allOf": [convert(schema)] })
    }

    fn check(&self, entry: &LoggedRequest) {
        let schema = self.response_schema(entry.operation, entry.status);
        let validator = jsonschema::validator_for(&schema).expect("schema compiles");
        let errors: Vec<String> = validator
            .iter_errors(&entry.response_body)
            .map(|e| e.to_string())
            .filter(|e| !(entry.status == 429 && e == RATE_LIMIT_CODE_BELOW_MINIMUM))
            .collect();
        assert!(
            errors.is_empty(),
            "{:?} {} -> {}: {errors:?}\n{}",
            entry.operation,
            entry.path,
            entry.status,
            entry.response_body
        );
    }
}

#[tokio::test]
async fn every_answer_validates_against_the_openapi_subset() {
    let sim = sim();
    let tunnels = tunnels_path(&sim);
    let zone_id = sim.zone_id("example.com").expect("zone");
    let records = records_path(&sim, "example.com");
    let account_verify = format!("/accounts/{}/tokens/verify", sim.account_id());
    call(&sim, Method::GET, "/user/tokens/verify", None).await;
    call(&sim, Method::GET, &account_verify, None).await;
    call(&sim, Method::GET, "/accounts", None).await;
    call(&sim, Method::GET, "/zones?per_page=5", None).await;
    call(&sim, Method::GET, &format!("/zones/{zone_id}"), None).await;
    let id = create_tunnel(&sim, "schema").await;
    let tunnel = format!("{tunnels}/{id}");
    sim.connect_tunnel(&id);
    call(
        &sim,
        Method::GET,
        &format!("{tunnels}?is_deleted=false"),
        None,
    )
    .await;
    call(&sim, Method::GET, &tunnel, None).await;
    call(&sim, Method::GET, &format!("{tunnel}/token"), None).await;
    call(&sim, Method::GET, &format!("{tunnel}/connections"), None).await;
    call(&sim, Method::DELETE, &tunnel, None).await;
    call(&sim, Method::DELETE, &format!("{tunnel}/connections"), None).await;
    call(&sim, Method::GET, &format!("{tunnel}/configurations"), None).await;
    let config = json!({ "config": { "ingress": [{ "service": "http_status:404" }] } });
    call(
        &sim,
        Method::PUT,
        &format!("{tunnel}/configurations"),
        Some(config),
    )
    .await;
    call(&sim, Method::GET, &format!("{tunnel}/configurations"), None).await;
    call(&sim, Method::DELETE, &tunnel, None).await;
    call(&sim, Method::GET, &tunnel, None).await;
    call(&sim, Method::DELETE, &tunnel, None).await;
    let cname = json!({ "type": "CNAME", "name": "app.example.com", "content": format!("{id}.cfargotunnel.com"), "proxied": true, "ttl": 1, "comment": "c" });
    let record = create_record(&sim, "example.com", cname.clone()).await;
    create_record(
        &sim,
        "example.com",
        json!({ "type": "MX", "name": "example.com", "content": "mx.example.com", "priority": 10 }),
    )
    .await;
    create_record(
        &sim,
        "example.com",
        json!({ "type": "TXT", "name": "_t.app.example.com", "content": "\"x\"" }),
    )
    .await;
    call(&sim, Method::POST, &records, Some(cname)).await;
    call(&sim, Method::POST, &records, Some(json!({ "type": "TXT" }))).await;
    call(
        &sim,
        Method::GET,
        &format!("{records}?name=app.example.com&type=CNAME"),
        None,
    )
    .await;
    call(&sim, Method::GET, &format!("{records}/{record}"), None).await;
    call(
        &sim,
        Method::PUT,
        &format!("{records}/{record}"),
        Some(json!({ "type": "CNAME", "name": "app.example.com", "content": "x.example.net" })),
    )
    .await;
    call(
        &sim,
        Method::PATCH,
        &format!("{records}/{record}"),
        Some(json!({ "comment": "d" })),
    )
    .await;
    call(&sim, Method::DELETE, &format!("{records}/{record}"), None).await;
    call(&sim, Method::DELETE, &format!("{records}/{record}"), None).await;
    send_raw(&sim, Method::GET, "/zones", &[], None).await;
    send_raw(
        &sim,
        Method::POST,
        &tunnels,
        &[("authorization", "Bearer x")],
        Some("{".into()),
    )
    .await;
    sim.inject(Operation::ListZones, Fault::rate_limit_next(1, 5));
    sim.inject(Operation::GetZone, Fault::fail_next(1, 503));
    call(&sim, Method::GET, "/zones", None).await;
    call(&sim, Method::GET, &format!("/zones/{zone_id}"), None).await;
    call(&sim, Method::GET, "/nowhere", None).await;

    let spec = Spec::load();
    let log = sim.request_log();
    for entry in &log {
        spec.check(entry);
    }
    let succeeded: BTreeSet<Operation> = log
        .iter()
        .filter(|l| l.status == 200)
        .filter_map(|l| l.operation)
        .collect();
    assert_eq!(
        succeeded,
        Operation::ALL.into_iter().collect(),
        "every operation answered 200 at least once"
    );
    let failed_statuses: BTreeSet<u16> = log
        .iter()
        .filter(|l| l.status != 200)
        .map(|l| l.status)
        .collect();
    assert_eq!(
        failed_statuses,
        [400, 401, 403, 404, 429, 503].into_iter().collect()
    );
}

#[test]
fn operation_ids_match_the_subset() {
    let doc: Value = serde_json::from_str(OPENAPI).expect("parses");
    for op in Operation::ALL {
        let method = op.method().as_str().to_ascii_lowercase();
        let found = doc["paths"][op.path_template()][method.as_str()]["operationId"].as_str();
        assert_eq!(found, op.operation_id(), "{op:?}");
    }
}
