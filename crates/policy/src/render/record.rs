//! Test builds only: when `CFTUNNEL_RECORD_CONFIGS` names a directory (see
//! `routes/record.rs`), every config.yaml the renderer produces is written there together with
//! the routes it was made from; [`render_recorded_table`] renders the route tables the model
//! recorded. The cloudflared check (`cloudflared_check.rs`) gives them all to the real
//! cloudflared.
use std::path::Path;

use serde_json::json;

use super::config::render_config;
use super::input::{OwnerIdentity, TunnelCredentials, TunnelInput};
use crate::routes::record::{RecordedTable, directory, write_in};
use cftunnel_types::TunnelKind;

/// Records a config.yaml and the routes and catch-all it was rendered from.
pub(crate) fn record_config(input: &TunnelInput, config: &str) {
    if let Some(dir) = directory() {
        record_config_in(&dir, input, config);
    }
}

fn record_config_in(dir: &Path, input: &TunnelInput, config: &str) {
    let routes: Vec<serde_json::Value> = input
        .routes
        .iter()
        .map(|r| json!({"hostname": r.hostname, "path": r.path, "pathKind": r.path_kind, "service": r.service}))
        .collect();
    // A route for every host and path replaces `fallbackTarget` as the catch-all.
    let fallback = input
        .routes
        .iter()
        .find(|r| r.matches_everything())
        .map_or(&input.spec.fallback_target, |r| &r.service);
    let body = json!({
        "routes": routes,
        "fallback": fallback,
        "config": config,
    });
    write_in(dir, "config", &body);
}

/// Renders (and records in `dir`) the config of one recorded route table. A table the renderer
/// refuses is recorded as an error: the model must only produce renderable routes.
pub(crate) fn render_recorded_table(dir: &Path, table: &RecordedTable) {
    let mut spec = json!({
        "newTunnel": {"name": "edge"},
        "cloudflare": {"domain": table.domain, "secret": "cf-api",
                       "accountId": "0123456789abcdef0123456789abcdef"},
    });
    if table.ca_pool {
        spec["originCaPool"] = json!("origin-ca");
    }
    let input = TunnelInput {
        identity: OwnerIdentity {
            kind: TunnelKind::Tunnel,
            namespace: table.namespace.clone(),
            name: table.name.clone(),
            uid: "uid".into(),
        },
        spec: match serde_json::from_value(spec) {
            Ok(spec) => spec,
            Err(e) => panic!("recorded tunnel spec: {e}"),
        },
        tunnel_id: "6ff42ae2-765d-4adf-8112-31c55c1551ef".into(),
        account_tag: "0123456789abcdef0123456789abcdef".into(),
        tunnel_name: table.name.clone(),
        domain: table.domain.clone(),
        credentials: TunnelCredentials {
            account_tag: "0123456789abcdef0123456789abcdef".into(),
            secret_b64: String::new(),
            tunnel_id: "6ff42ae2-765d-4adf-8112-31c55c1551ef".into(),
        },
        origin_ca_pem: None,
        routes: table.routes.clone(),
    };
    match render_config(&input) {
        Ok(config) => record_config_in(dir, &input, &config),
        Err(e) => write_in(
            dir,
            "error",
            &json!({"tunnel": table.tunnel, "error": e.to_string()}),
        ),
    }
}
