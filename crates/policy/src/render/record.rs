//! Test builds only: when `CFTUNNEL_RECORD_CONFIGS` names a directory (see
//! `routes/record.rs`), every config.yaml the renderer produces is written there together with
//! the routes it was made from. The cloudflared check (`cloudflared_check.rs`) renders the route
//! tables the model recorded too, and gives them all to the real cloudflared.
use std::path::Path;

use serde_json::json;

use super::input::TunnelInput;
use crate::routes::record::{directory, write_in};

/// Records a config.yaml and the routes and catch-all it was rendered from.
pub(crate) fn record_config(input: &TunnelInput, config: &str) {
    if let Some(dir) = directory() {
        record_config_in(&dir, input, config);
    }
}

pub(super) fn record_config_in(dir: &Path, input: &TunnelInput, config: &str) {
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
