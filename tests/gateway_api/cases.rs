//! The Gateway API conformance suite's cases as `tests/data/gateway-conformance` holds them
//! (extracted from the suite's sources by `scripts/gateway-conformance.sh`): their manifests,
//! the requests they make and the statuses they assert, and the one reading of those
//! assertions both the offline and the live runs use.
//!
//! The only changes to the suite's manifests: `{GATEWAY_CLASS_NAME}` is [`CLASS`], and every
//! Gateway names a tunnel of its own (`spec.infrastructure.parametersRef`, a Tunnel named after
//! it in its namespace), since each Gateway has its own address in the suite.
use std::path::{Path, PathBuf};

use cftunnel_policy::routes::SourceKind;
use cftunnel_policy::routes::gateway::status::GatewayApiStatus;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use serde::Deserialize;
use serde_json::{Value, json};

/// The GatewayClass the suite's Gateways are given.
pub const CLASS: &str = "cftunnel-conformance";

/// Every case `cases.json` holds.
pub const EXPECTED_CASES: &[&str] = &[
    "HTTPRouteCrossNamespace",
    "HTTPRouteExactPathMatching",
    "HTTPRouteHostnameIntersection",
    "HTTPRouteInvalidCrossNamespaceBackendRef",
    "HTTPRouteInvalidNonExistentBackendRef",
    "HTTPRouteListenerHostnameMatching",
    "HTTPRoutePathMatchOrder",
    "HTTPRouteReferenceGrant",
    "HTTPRouteSimpleSameNamespace",
];

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Case {
    pub short_name: String,
    pub manifests: Vec<String>,
    pub requests: Vec<Request>,
    pub conditions: Vec<ExpectedCondition>,
    pub listeners: Vec<ExpectedStatus>,
    pub parents: Vec<ExpectedStatus>,
    pub calls: Vec<Call>,
}

#[derive(Deserialize)]
pub struct Request {
    #[serde(default)]
    pub host: String,
    #[serde(default)]
    pub path: String,
    #[serde(default)]
    pub headers: bool,
    #[serde(default)]
    pub backend: String,
    #[serde(default)]
    pub namespace: String,
    #[serde(default)]
    pub status: u16,
    #[serde(default)]
    pub gateway: String,
    /// Objects (`Kind namespace/name`) the suite deleted before this request.
    #[serde(default)]
    pub deleted: Vec<String>,
}

impl Request {
    /// The URL cloudflared is asked about: the suite's host (none: any) and path.
    pub fn url(&self) -> String {
        let host = if self.host.is_empty() {
            "gateway.conformance.test"
        } else {
            &self.host
        };
        let path = if self.path.is_empty() {
            "/"
        } else {
            &self.path
        };
        format!("http://{host}{path}")
    }

    /// What the matched rule's service must hold: the status, or the backend's address.
    pub fn expected_service(&self) -> String {
        match self.status {
            404 => "http_status:404".to_string(),
            500 => "http_status:500".to_string(),
            _ => format!("://{}.{}.svc:", self.backend, self.namespace),
        }
    }
}

#[derive(Deserialize, Debug)]
pub struct ExpectedCondition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    #[serde(default)]
    pub reason: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExpectedStatus {
    #[serde(default)]
    pub name: String,
    pub attached_routes: Option<i32>,
    pub conditions: Vec<ExpectedCondition>,
}

#[derive(Deserialize)]
pub struct Call {
    pub helper: String,
    pub args: Vec<String>,
}

pub fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/gateway-conformance")
}

pub fn cases() -> Vec<Case> {
    let text = std::fs::read_to_string(data_dir().join("cases.json"))
        .unwrap_or_else(|e| panic!("cases.json: {e}"));
    let cases: Vec<Case> =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("cases.json: {e}"));
    let mut names: Vec<&str> = cases.iter().map(|c| c.short_name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, EXPECTED_CASES);
    cases
}

/// The documents of one manifest file (relative to the data's `manifests/`), with the class
/// name filled in and each Gateway given a tunnel of its own.
pub fn documents(relative: &str) -> Vec<Value> {
    let path = data_dir().join("manifests").join(relative);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .replace("{GATEWAY_CLASS_NAME}", CLASS);
    text.split("\n---")
        .filter_map(|doc| serde_yaml_ng::from_str::<Value>(doc).ok())
        .filter(|v| v.is_object())
        .map(|mut doc| {
            if doc["kind"] == "Gateway" {
                let name = doc["metadata"]["name"].clone();
                doc["spec"]["infrastructure"] = json!({"parametersRef": {
                    "group": "networking.cfargotunnel.com", "kind": "Tunnel", "name": name}});
            }
            doc
        })
        .collect()
}

/// `Kind namespace/name` of a document.
pub fn object_key(doc: &Value) -> String {
    format!(
        "{} {}/{}",
        doc["kind"].as_str().unwrap_or(""),
        doc["metadata"]["namespace"].as_str().unwrap_or(""),
        doc["metadata"]["name"].as_str().unwrap_or("")
    )
}

fn has(conditions: &[Condition], expected: &ExpectedCondition) -> bool {
    conditions.iter().any(|c| {
        c.type_ == expected.type_
            && c.status == expected.status
            && (expected.reason.is_empty() || c.reason == expected.reason)
    })
}

fn split(object: &str) -> (String, String) {
    let (ns, name) = object.split_once('/').unwrap_or(("", object));
    (ns.to_string(), name.to_string())
}

fn route_parents<'s>(
    statuses: &'s GatewayApiStatus,
    route: &str,
    gateway: Option<&str>,
) -> Vec<&'s [Condition]> {
    let (ns, name) = split(route);
    statuses
        .routes
        .get(&(SourceKind::HTTPRoute, ns.clone(), name))
        .into_iter()
        .flatten()
        .filter(|p| {
            gateway.is_none_or(|g| {
                let (gns, gname) = split(g);
                p.parent_ref.name == gname
                    && p.parent_ref.namespace.as_deref().unwrap_or(&ns) == gns
            })
        })
        .map(|p| p.conditions.as_slice())
        .collect()
}

fn want(type_: &str, status: &str) -> ExpectedCondition {
    ExpectedCondition {
        type_: type_.into(),
        status: status.into(),
        reason: String::new(),
    }
}

/// The status assertions of `case` that `statuses` fails, read the way the suite's helpers
/// assert them: Gateways and routes Accepted (Gateways Programmed), ResolvedRefs, the
/// conditions and parents it lists, listeners' conditions and `attachedRoutes`.
pub fn status_problems(case: &Case, statuses: &GatewayApiStatus) -> Vec<String> {
    let mut problems = Vec::new();
    let is_object = |a: &String| a.contains('/') && !a.contains('(') && !a.contains('<');
    for call in &case.calls {
        let objects: Vec<&String> = call.args.iter().filter(|a| is_object(a)).collect();
        match call.helper.as_str() {
            "GatewayAndHTTPRoutesMustBeAccepted" => {
                let Some(gateway) = call
                    .args
                    .iter()
                    .find_map(|a| a.strip_prefix("NewGatewayRef("))
                    .and_then(|a| a.split([',', ')']).next())
                else {
                    continue;
                };
                let conditions = statuses
                    .gateways
                    .get(&split(gateway))
                    .map(|g| g.conditions.clone())
                    .unwrap_or_default();
                for expected in [want("Accepted", "True"), want("Programmed", "True")] {
                    if !has(&conditions, &expected) {
                        problems.push(format!(
                            "Gateway {gateway}: no {expected:?} in {conditions:?}"
                        ));
                    }
                }
                for route in objects {
                    let parents = route_parents(statuses, route, Some(gateway));
                    if parents.is_empty()
                        || !parents.iter().all(|c| has(c, &want("Accepted", "True")))
                    {
                        problems.push(format!(
                            "HTTPRoute {route} on {gateway}: not Accepted: {parents:?}"
                        ));
                    }
                }
            }
            "HTTPRouteMustHaveResolvedRefsConditionsTrue" | "HTTPRouteMustHaveCondition" => {
                let (Some(route), Some(gateway)) = (objects.first(), objects.get(1)) else {
                    continue;
                };
                let resolved = want("ResolvedRefs", "True");
                let expected: Vec<&ExpectedCondition> =
                    if call.helper.ends_with("ConditionsTrue") || case.conditions.is_empty() {
                        vec![&resolved]
                    } else {
                        case.conditions.iter().collect()
                    };
                let parents = route_parents(statuses, route, Some(gateway));
                for e in expected {
                    if parents.is_empty() || !parents.iter().all(|c| has(c, e)) {
                        problems.push(format!("HTTPRoute {route}: no {e:?} in {parents:?}"));
                    }
                }
            }
            "HTTPRouteMustHaveParents" => {
                let Some(route) = objects.first() else {
                    continue;
                };
                let parents = route_parents(statuses, route, None);
                for e in case.parents.iter().flat_map(|p| &p.conditions) {
                    if parents.is_empty() || !parents.iter().all(|c| has(c, e)) {
                        problems.push(format!("HTTPRoute {route}: no {e:?} in {parents:?}"));
                    }
                }
            }
            "GatewayStatusMustHaveListeners" => {
                let Some(gateway) = objects.first() else {
                    continue;
                };
                let listeners = statuses
                    .gateways
                    .get(&split(gateway))
                    .map(|g| g.listeners.clone())
                    .unwrap_or_default();
                for expected in &case.listeners {
                    let Some(got) = listeners.iter().find(|l| l.name == expected.name) else {
                        problems.push(format!("Gateway {gateway}: no listener {}", expected.name));
                        continue;
                    };
                    if let Some(n) = expected.attached_routes
                        && got.attached_routes != n
                    {
                        problems.push(format!(
                            "Gateway {gateway} listener {}: attachedRoutes {}, not {n}",
                            expected.name, got.attached_routes
                        ));
                    }
                    for e in &expected.conditions {
                        if !has(&got.conditions, e) {
                            problems.push(format!(
                                "Gateway {gateway} listener {}: no {e:?}",
                                expected.name
                            ));
                        }
                    }
                }
            }
            _ => {}
        }
    }
    problems
}

/// The status assertions a case makes at all (a case asserting none proves nothing here).
pub fn asserted(case: &Case) -> usize {
    case.calls
        .iter()
        .filter(|c| {
            matches!(
                c.helper.as_str(),
                "GatewayAndHTTPRoutesMustBeAccepted"
                    | "HTTPRouteMustHaveResolvedRefsConditionsTrue"
                    | "HTTPRouteMustHaveCondition"
                    | "HTTPRouteMustHaveParents"
                    | "GatewayStatusMustHaveListeners"
            )
        })
        .count()
}
