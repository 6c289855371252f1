//! Test builds only: when `CFTUNNEL_RECORD_CONFIGS` names a directory, every route table the
//! model computes is written there, one file per tunnel with routes. The cloudflared check
//! (`render/cloudflared_check.rs`) runs the render and route tests with it set and renders each
//! recorded table into a config.yaml, so the configs it gives to the real cloudflared are made
//! from exactly the tables those tests' own fixtures produce.
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::{Route, RouteTable, RouteWorld};

pub(crate) const RECORD_ENV: &str = "CFTUNNEL_RECORD_CONFIGS";

pub(crate) fn directory() -> Option<PathBuf> {
    std::env::var_os(RECORD_ENV).map(PathBuf::from)
}

/// Writes `<prefix>-<hash of body>.json` into `dir` (equal records land in one file).
pub(crate) fn write_in(dir: &Path, prefix: &str, body: &Value) {
    let text = body.to_string();
    let hash = Sha256::digest(text.as_bytes());
    let name: String = hash.iter().take(8).map(|b| format!("{b:02x}")).collect();
    let path = dir.join(format!("{prefix}-{name}.json"));
    if let Err(e) = std::fs::write(&path, text) {
        panic!("cannot record into {}: {e}", path.display());
    }
}

/// One tunnel of a computed route table, as recorded.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct RecordedTable {
    /// `Tunnel ns/name` or `ClusterTunnel name`.
    pub tunnel: String,
    pub namespace: String,
    pub name: String,
    pub domain: String,
    /// Some route names a CA pool (the tunnel then needs `originCaPool`).
    pub ca_pool: bool,
    pub routes: Vec<Route>,
}

/// Records every tunnel of `table` that has routes.
pub(crate) fn record_route_table(world: &RouteWorld, table: &RouteTable) {
    let Some(dir) = directory() else { return };
    for (identity, routes) in &table.tunnels {
        if routes.routes.is_empty() {
            continue;
        }
        let domain = world
            .tunnels
            .iter()
            .find(|t| &t.identity == identity)
            .map_or("example.com", |t| t.domain.as_str());
        let recorded = RecordedTable {
            tunnel: identity.to_string(),
            namespace: identity.namespace.clone(),
            name: identity.name.clone(),
            domain: domain.to_string(),
            ca_pool: routes
                .routes
                .iter()
                .any(|r| r.origin_request.ca_pool.is_some()),
            routes: routes.routes.clone(),
        };
        match serde_json::to_value(&recorded) {
            Ok(body) => write_in(&dir, "table", &body),
            Err(e) => panic!("recording a route table: {e}"),
        }
    }
}
