//! Test builds only: when `CFTUNNEL_RECORD_CONFIGS` names a directory, every config.yaml the
//! renderer produces, and a config for every tunnel of every route table the route model
//! computes, is written there together with the routes it was made from. The cloudflared check
//! (`cloudflared_check.rs`) runs the render and route tests with it set, so the configs it gives
//! to the real cloudflared are exactly the ones those tests make, from their own fixtures.
use std::path::PathBuf;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::config::render_config;
use super::input::{OwnerIdentity, TunnelCredentials, TunnelInput};
use crate::routes::{RouteTable, RouteWorld};
use cftunnel_types::TunnelKind;

pub const RECORD_ENV: &str = "CFTUNNEL_RECORD_CONFIGS";

fn directory() -> Option<PathBuf> {
    std::env::var_os(RECORD_ENV).map(PathBuf::from)
}

/// Writes `name-<hash of body>.json` (equal records land in one file).
fn write(prefix: &str, body: &Value) {
    let Some(dir) = directory() else { return };
    let text = body.to_string();
    let hash = Sha256::digest(text.as_bytes());
    let name: String = hash.iter().take(8).map(|b| format!("{b:02x}")).collect();
    let path = dir.join(format!("{prefix}-{name}.json"));
    if let Err(e) = std::fs::write(&path, text) {
        panic!("cannot record into {}: {e}", path.display());
    }
}

/// Records a config.yaml and the routes and catch-all it was rendered from.
pub fn record_config(input: &TunnelInput, config: &str) {
    if directory().is_none() {
        return;
    }
    let routes: Vec<Value> = input
        .routes
        .iter()
        .map(|r| json!({"hostname": r.hostname, "path": r.path, "service": r.service}))
        .collect();
    let body = json!({
        "routes": routes,
        "fallback": input.spec.fallback_target,
        "config": config,
    });
    write("config", &body);
}

/// Renders (and so records) the config of every tunnel of `table` that has routes. A table
/// the renderer refuses is recorded as an error: the model must only produce renderable routes.
pub fn record_route_table(world: &RouteWorld, table: &RouteTable) {
    if directory().is_none() {
        return;
    }
    for (identity, routes) in &table.tunnels {
        if routes.routes.is_empty() {
            continue;
        }
        let domain = world
            .tunnels
            .iter()
            .find(|t| &t.identity == identity)
            .map_or("example.com", |t| t.domain.as_str());
        let mut spec = json!({
            "newTunnel": {"name": "edge"},
            "cloudflare": {"domain": domain, "secret": "cf-api",
                           "accountId": "0123456789abcdef0123456789abcdef"},
        });
        if routes
            .routes
            .iter()
            .any(|r| r.origin_request.ca_pool.is_some())
        {
            spec["originCaPool"] = json!("origin-ca");
        }
        let input = TunnelInput {
            identity: OwnerIdentity {
                kind: TunnelKind::Tunnel,
                namespace: identity.namespace.clone(),
                name: identity.name.clone(),
                uid: "uid".into(),
            },
            spec: match serde_json::from_value(spec) {
                Ok(spec) => spec,
                Err(e) => panic!("recorded tunnel spec: {e}"),
            },
            tunnel_id: "6ff42ae2-765d-4adf-8112-31c55c1551ef".into(),
            account_tag: "0123456789abcdef0123456789abcdef".into(),
            tunnel_name: identity.name.clone(),
            domain: domain.into(),
            credentials: TunnelCredentials {
                account_tag: "0123456789abcdef0123456789abcdef".into(),
                secret_b64: String::new(),
                tunnel_id: "6ff42ae2-765d-4adf-8112-31c55c1551ef".into(),
            },
            origin_ca_pem: None,
            routes: routes.routes.clone(),
        };
        if let Err(e) = render_config(&input) {
            write(
                "error",
                &json!({"tunnel": identity.to_string(), "error": e.to_string()}),
            );
        }
    }
}
