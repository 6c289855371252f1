//! The Gateway API conformance suite's own cases, offline: its manifests (base and per test, as
//! extracted into `tests/data/gateway-conformance` by `scripts/gateway-conformance.sh`) become
//! a route world; each Gateway is rendered, and the real cloudflared's own rule matching must
//! pick the suite's backend (or its 404 or 500) for every request the suite makes. The statuses
//! the suite asserts (Gateway and route `Accepted`, `ResolvedRefs`, the conditions and listener
//! `attachedRoutes` it names) are checked on the model's statuses.
//!
//! The only changes to the suite's manifests: `{GATEWAY_CLASS_NAME}` is `cftunnel`, and every
//! Gateway names a tunnel of its own (`spec.infrastructure.parametersRef`, a Tunnel named after
//! it), since each Gateway has its own address in the suite. Needs `CFTUNNEL_CLOUDFLARED`.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use serde::Deserialize;
use serde_json::{Value, json};

use super::cloudflared_check::{cloudflared, matched_rule};
use super::config::render_config;
use super::tests::{input, spec};
use crate::routes::fixtures::tunnel;
use crate::routes::gateway::status::{GatewayApiStatus, StatusInput, gateway_statuses};
use crate::routes::{RouteWorld, SourceKind, compute_routes};
use cftunnel_types::gateway::{GatewayClass, HTTPRoute, ReferenceGrant};
use cftunnel_types::{TunnelIdentity, TunnelKind};

/// The cases the offline suite runs (all of `cases.json`).
const EXPECTED_CASES: &[&str] = &[
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
struct Case {
    short_name: String,
    manifests: Vec<String>,
    requests: Vec<Request>,
    conditions: Vec<ExpectedCondition>,
    listeners: Vec<ExpectedStatus>,
    parents: Vec<ExpectedStatus>,
    calls: Vec<Call>,
}

#[derive(Deserialize)]
struct Request {
    #[serde(default)]
    host: String,
    #[serde(default)]
    path: String,
    #[serde(default)]
    headers: bool,
    #[serde(default)]
    backend: String,
    #[serde(default)]
    namespace: String,
    #[serde(default)]
    status: u16,
    #[serde(default)]
    gateway: String,
    /// Objects the suite deleted before this request.
    #[serde(default)]
    deleted: Vec<String>,
}

#[derive(Deserialize, Debug)]
struct ExpectedCondition {
    #[serde(rename = "type")]
    type_: String,
    status: String,
    #[serde(default)]
    reason: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ExpectedStatus {
    #[serde(default)]
    name: String,
    attached_routes: Option<i32>,
    conditions: Vec<ExpectedCondition>,
}

#[derive(Deserialize)]
struct Call {
    helper: String,
    args: Vec<String>,
}

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/gateway-conformance")
}

fn documents(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .replace("{GATEWAY_CLASS_NAME}", "cftunnel");
    text.split("\n---")
        .filter_map(|doc| serde_yaml_ng::from_str::<Value>(doc).ok())
        .filter(|v| v.is_object())
        .collect()
}

fn decode<T: serde::de::DeserializeOwned>(doc: &Value) -> Arc<T> {
    Arc::new(serde_json::from_value(doc.clone()).unwrap_or_else(|e| panic!("{e}: {doc}")))
}

fn tunnel_of(gateway: &str) -> TunnelIdentity {
    let (namespace, name) = gateway.split_once('/').unwrap_or(("", gateway));
    TunnelIdentity {
        kind: TunnelKind::Tunnel,
        namespace: namespace.to_string(),
        name: name.to_string(),
    }
}

/// The world of one case: the suite's base manifests and the case's own, without the objects
/// the suite deleted (`Kind namespace/name`).
fn world_of(case: &Case, deleted: &[String]) -> RouteWorld {
    let mut world = RouteWorld::default();
    world.gateway_classes.push(decode::<GatewayClass>(&json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
        "metadata": {"name": "cftunnel"},
        "spec": {"controllerName": cftunnel_types::names::CONTROLLER_NAME},
    })));
    let mut files = vec![data_dir().join("manifests/base/manifests.yaml")];
    files.extend(
        case.manifests
            .iter()
            .map(|m| data_dir().join("manifests").join(m)),
    );
    for file in files {
        for mut doc in documents(&file) {
            let namespace = doc["metadata"]["namespace"]
                .as_str()
                .unwrap_or("")
                .to_string();
            let name = doc["metadata"]["name"].as_str().unwrap_or("").to_string();
            let kind = doc["kind"].as_str().unwrap_or("").to_string();
            if deleted.contains(&format!("{kind} {namespace}/{name}")) {
                continue;
            }
            match kind.as_str() {
                "Namespace" => {
                    let mut labels: BTreeMap<String, String> =
                        serde_json::from_value(doc["metadata"]["labels"].clone())
                            .unwrap_or_default();
                    labels.insert("kubernetes.io/metadata.name".into(), name.clone());
                    world.namespace_labels.insert(name, labels);
                }
                "Service" => world.services.push(decode::<Service>(&doc)),
                "Gateway" => {
                    doc["spec"]["infrastructure"] = json!({"parametersRef": {
                        "group": "networking.cfargotunnel.com", "kind": "Tunnel", "name": name}});
                    world.tunnels.push(tunnel(
                        TunnelKind::Tunnel,
                        &namespace,
                        &name,
                        "example.com",
                    ));
                    world.gateways.push(decode(&doc));
                }
                "HTTPRoute" => world.http_routes.push(decode::<HTTPRoute>(&doc)),
                "ReferenceGrant" => world.reference_grants.push(decode::<ReferenceGrant>(&doc)),
                _ => {}
            }
        }
    }
    world
}

fn has(conditions: &[Condition], expected: &ExpectedCondition) -> bool {
    conditions.iter().any(|c| {
        c.type_ == expected.type_
            && c.status == expected.status
            && (expected.reason.is_empty() || c.reason == expected.reason)
    })
}

fn route_parents<'s>(
    statuses: &'s GatewayApiStatus,
    route: &str,
    gateway: Option<&str>,
) -> Vec<&'s [Condition]> {
    let (ns, name) = route.split_once('/').unwrap_or(("", route));
    statuses
        .routes
        .get(&(SourceKind::HTTPRoute, ns.to_string(), name.to_string()))
        .into_iter()
        .flatten()
        .filter(|p| {
            gateway.is_none_or(|g| {
                let (gns, gname) = g.split_once('/').unwrap_or(("", g));
                p.parent_ref.name == gname && p.parent_ref.namespace.as_deref().unwrap_or(ns) == gns
            })
        })
        .map(|p| p.conditions.as_slice())
        .collect()
}

/// The status assertions of one case that fail.
fn status_problems(case: &Case, statuses: &GatewayApiStatus) -> Vec<String> {
    let mut problems = Vec::new();
    let want = |type_: &str, status: &str| ExpectedCondition {
        type_: type_.into(),
        status: status.into(),
        reason: String::new(),
    };
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
                let (ns, name) = gateway.split_once('/').unwrap_or(("", gateway));
                let conditions = statuses
                    .gateways
                    .get(&(ns.to_string(), name.to_string()))
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
                let expected: Vec<&ExpectedCondition> = if call.helper.ends_with("ConditionsTrue") {
                    Vec::new()
                } else {
                    case.conditions.iter().collect()
                };
                let resolved = want("ResolvedRefs", "True");
                let expected = if expected.is_empty() {
                    vec![&resolved]
                } else {
                    expected
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
                let (ns, name) = gateway.split_once('/').unwrap_or(("", gateway));
                let listeners = statuses
                    .gateways
                    .get(&(ns.to_string(), name.to_string()))
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

#[test]
fn the_conformance_suites_cases_are_served_by_cloudflared_and_reported_as_the_suite_asserts() {
    let bin = cloudflared();
    let text = std::fs::read_to_string(data_dir().join("cases.json"))
        .unwrap_or_else(|e| panic!("cases.json: {e}"));
    let cases: Vec<Case> =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("cases.json: {e}"));
    let mut names: Vec<&str> = cases.iter().map(|c| c.short_name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, EXPECTED_CASES);
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("temp dir: {e}"));
    let mut problems = Vec::new();
    let mut asked = 0;
    for case in &cases {
        let world = world_of(case, &[]);
        let table = compute_routes(&world);
        let ids: BTreeMap<TunnelIdentity, String> = world
            .tunnels
            .iter()
            .map(|t| {
                (
                    t.identity.clone(),
                    "6ff42ae2-765d-4adf-8112-31c55c1551ef".to_string(),
                )
            })
            .collect();
        let statuses = gateway_statuses(
            &world,
            &table,
            &StatusInput {
                tunnel_ids: &ids,
                now: Time(jiff::Timestamp::UNIX_EPOCH),
            },
        );
        problems.extend(
            status_problems(case, &statuses)
                .into_iter()
                .map(|p| format!("{}: {p}", case.short_name)),
        );
        let mut configs: BTreeMap<(String, Vec<String>), (PathBuf, Vec<String>)> = BTreeMap::new();
        for request in case.requests.iter().filter(|r| !r.headers) {
            let tunnel = tunnel_of(&request.gateway);
            let key = (request.gateway.clone(), request.deleted.clone());
            let count = configs.len();
            let (file, services) = configs.entry(key).or_insert_with(|| {
                let routes = if request.deleted.is_empty() {
                    table.routes_of(&tunnel)
                } else {
                    compute_routes(&world_of(case, &request.deleted)).routes_of(&tunnel)
                };
                let text = render_config(&input(TunnelKind::Tunnel, spec(json!({})), routes))
                    .unwrap_or_else(|e| panic!("{}: {e}", case.short_name));
                let file = dir
                    .path()
                    .join(format!("{}-{}-{count}.yaml", case.short_name, tunnel.name));
                std::fs::write(&file, &text).unwrap_or_else(|e| panic!("{e}"));
                let parsed: Value = serde_yaml_ng::from_str(&text).unwrap_or(Value::Null);
                let services = parsed["ingress"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|r| r["service"].as_str().unwrap_or("").to_string())
                    .collect();
                (file, services)
            });
            let host = if request.host.is_empty() {
                "gateway.conformance.test"
            } else {
                &request.host
            };
            let path = if request.path.is_empty() {
                "/"
            } else {
                &request.path
            };
            let url = format!("http://{host}{path}");
            let expected = match request.status {
                404 => "http_status:404".to_string(),
                500 => "http_status:500".to_string(),
                _ => format!("://{}.{}.svc:", request.backend, request.namespace),
            };
            asked += 1;
            match matched_rule(&bin, file, &url) {
                Ok(rule) => {
                    let got = services.get(rule).map(String::as_str).unwrap_or("");
                    if !got.contains(&expected) {
                        problems.push(format!(
                            "{}: {url} on {}: cloudflared picks {got:?}, the suite wants {expected}",
                            case.short_name, request.gateway
                        ));
                    }
                }
                Err(e) => problems.push(format!("{}: {url}: {e}", case.short_name)),
            }
        }
    }
    assert!(asked >= 50, "only {asked} requests asked");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
