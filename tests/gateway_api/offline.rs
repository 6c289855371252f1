//! The conformance cases offline: each case's manifests (and the suite's base manifests) are a
//! route world; each Gateway's tunnel is rendered exactly as the reconciler renders it, and the
//! real cloudflared's own rule matching (`cloudflared tunnel --config F ingress rule URL`) must
//! pick the suite's backend, or its 404 or 500, for every request the suite makes. The statuses
//! the route model gives must pass the suite's assertions. Needs `CFTUNNEL_CLOUDFLARED`.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use cftunnel_policy::render::input::{OwnerIdentity, TunnelCredentials, TunnelInput};
use cftunnel_policy::render::{RenderOptions, render_all};
use cftunnel_policy::routes::gateway::status::{StatusInput, gateway_statuses};
use cftunnel_policy::routes::{Route, RouteWorld, compute_routes};
use cftunnel_policy::rules::facts::tunnel_facts;
use cftunnel_types::TunnelSpec;
use cftunnel_types::{TunnelIdentity, TunnelKind};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::{Value, json};

use crate::cases::{CLASS, Case, asserted, cases, documents, object_key, status_problems};

const TUNNEL_ID: &str = "6ff42ae2-765d-4adf-8112-31c55c1551ef";

fn cloudflared() -> PathBuf {
    match std::env::var_os("CFTUNNEL_CLOUDFLARED") {
        Some(path) if Path::new(&path).is_file() => PathBuf::from(path),
        other => panic!("CFTUNNEL_CLOUDFLARED must name a cloudflared binary; it is {other:?}"),
    }
}

fn decode<T: serde::de::DeserializeOwned>(doc: &Value) -> Arc<T> {
    Arc::new(serde_json::from_value(doc.clone()).unwrap_or_else(|e| panic!("{e}: {doc}")))
}

fn tunnel_spec() -> TunnelSpec {
    serde_json::from_value(json!({
        "newTunnel": {"name": "edge"},
        "cloudflare": {"domain": "example.com", "secret": "cf", "accountId": "0123456789abcdef0123456789abcdef"},
    }))
    .unwrap_or_else(|e| panic!("{e}"))
}

/// The world of one case without the objects the suite deleted (`Kind namespace/name`).
fn world_of(case: &Case, deleted: &[String]) -> RouteWorld {
    let mut world = RouteWorld::default();
    world.gateway_classes.push(decode(&json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
        "metadata": {"name": CLASS},
        "spec": {"controllerName": cftunnel_types::names::CONTROLLER_NAME},
    })));
    let mut files = vec!["base/manifests.yaml".to_string()];
    files.extend(case.manifests.iter().cloned());
    for file in &files {
        for doc in documents(file) {
            if deleted.contains(&object_key(&doc)) {
                continue;
            }
            let namespace = doc["metadata"]["namespace"].as_str().unwrap_or("");
            let name = doc["metadata"]["name"].as_str().unwrap_or("");
            match doc["kind"].as_str().unwrap_or("") {
                "Namespace" => {
                    let mut labels: BTreeMap<String, String> =
                        serde_json::from_value(doc["metadata"]["labels"].clone())
                            .unwrap_or_default();
                    labels.insert("kubernetes.io/metadata.name".into(), name.to_string());
                    world.namespace_labels.insert(name.to_string(), labels);
                }
                "Service" => world.services.push(decode(&doc)),
                "Gateway" => {
                    world.tunnels.push(tunnel_facts(
                        TunnelKind::Tunnel,
                        namespace,
                        name,
                        &tunnel_spec(),
                    ));
                    world.gateways.push(decode(&doc));
                }
                "HTTPRoute" => world.http_routes.push(decode(&doc)),
                "ReferenceGrant" => world.reference_grants.push(decode(&doc)),
                _ => {}
            }
        }
    }
    world
}

fn tunnel_of(gateway: &str) -> TunnelIdentity {
    let (namespace, name) = gateway.split_once('/').unwrap_or(("", gateway));
    TunnelIdentity {
        kind: TunnelKind::Tunnel,
        namespace: namespace.to_string(),
        name: name.to_string(),
    }
}

/// config.yaml of `tunnel` with `routes`, as the reconciler renders it.
fn config(tunnel: &TunnelIdentity, routes: Vec<Route>) -> String {
    let input = TunnelInput {
        identity: OwnerIdentity {
            kind: tunnel.kind,
            namespace: tunnel.namespace.clone(),
            name: tunnel.name.clone(),
            uid: "uid".into(),
        },
        spec: tunnel_spec(),
        tunnel_id: TUNNEL_ID.into(),
        account_tag: "0123456789abcdef0123456789abcdef".into(),
        tunnel_name: tunnel.name.clone(),
        domain: "example.com".into(),
        credentials: TunnelCredentials {
            account_tag: "0123456789abcdef0123456789abcdef".into(),
            secret_b64: String::new(),
            tunnel_id: TUNNEL_ID.into(),
        },
        origin_ca_pem: None,
        routes,
    };
    let options = RenderOptions {
        cloudflared_image: "cloudflare/cloudflared:2026.11.0".into(),
    };
    let rendered = render_all(&input, &options).unwrap_or_else(|e| panic!("{tunnel}: {e}"));
    rendered
        .config_map
        .and_then(|c| c.data)
        .and_then(|d| d.get("config.yaml").cloned())
        .unwrap_or_default()
}

/// The index of the rule cloudflared picks for `url`.
fn matched_rule(bin: &Path, config: &Path, url: &str) -> Result<usize, String> {
    let out = Command::new(bin)
        .arg("tunnel")
        .arg("--config")
        .arg(config)
        .args(["ingress", "rule", url])
        .output()
        .map_err(|e| format!("cannot run cloudflared: {e}"))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    text.lines()
        .find_map(|line| line.trim().strip_prefix("Matched rule #"))
        .and_then(|n| n.trim().parse().ok())
        .ok_or_else(|| format!("no `Matched rule #N` in cloudflared's answer: {text}"))
}

#[test]
fn the_conformance_cases_are_served_by_cloudflared_and_reported_as_the_suite_asserts() {
    let bin = cloudflared();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("temp dir: {e}"));
    let mut problems = Vec::new();
    let (mut asked, mut assertions) = (0, 0);
    for case in &cases() {
        let world = world_of(case, &[]);
        let table = compute_routes(&world);
        let ids: BTreeMap<TunnelIdentity, String> = world
            .tunnels
            .iter()
            .map(|t| (t.identity.clone(), TUNNEL_ID.to_string()))
            .collect();
        let statuses = gateway_statuses(
            &world,
            &table,
            &StatusInput {
                tunnel_ids: &ids,
                dns: &BTreeMap::new(),
                now: Time(jiff::Timestamp::UNIX_EPOCH),
                changed_routes_only: false,
            },
        );
        assertions += asserted(case);
        for problem in status_problems(case, &statuses) {
            problems.push(format!("{}: {problem}", case.short_name));
        }
        // One config per Gateway and set of deleted objects.
        let mut configs: BTreeMap<(String, Vec<String>), (PathBuf, Vec<String>)> = BTreeMap::new();
        for request in case.requests.iter().filter(|r| !r.headers) {
            let tunnel = tunnel_of(&request.gateway);
            let count = configs.len();
            let key = (request.gateway.clone(), request.deleted.clone());
            let (file, services) = configs.entry(key).or_insert_with(|| {
                let routes = if request.deleted.is_empty() {
                    table.routes_of(&tunnel)
                } else {
                    compute_routes(&world_of(case, &request.deleted)).routes_of(&tunnel)
                };
                let text = config(&tunnel, routes);
                let file = dir.path().join(format!("{}-{count}.yaml", case.short_name));
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
            asked += 1;
            let (url, expected) = (request.url(), request.expected_service());
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
    assert!(
        asked >= 50 && assertions >= 20,
        "only {asked} requests and {assertions} status assertions"
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
