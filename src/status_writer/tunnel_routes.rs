//! A tunnel's `status.routes`: every route declared against it in the newest route table, served
//! or not (`Active`, `Pending`, `Conflict`, `Error`, with the reason). `Ready`, written by the
//! tunnel reconciler, says whether config.yaml carries them. Only `status.routes` is written here
//! (a merge patch of that one field), so the tunnel reconciler's fields are never written back
//! from a stale copy, nor this one by it.
use std::sync::Arc;

use kube::ResourceExt;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use super::{Latest, bounded};
use crate::caches::ProcessCaches;
use crate::term::Context;
use crate::term::adapters::TunnelKindAdapter;
use cftunnel_policy::plan::statuses::route_statuses;
use cftunnel_policy::routes::RouteTable;

/// Writes the route list of every live tunnel the newest table knows whose list differs;
/// returns how many writes failed.
pub(super) async fn write_tunnel_routes(
    ctx: &Context,
    caches: &ProcessCaches,
    latest: &Latest,
) -> usize {
    let mut failed = 0;
    for tunnel in caches.tunnels.store().state() {
        let Some(plan) = latest.plan() else {
            return failed;
        };
        failed += write_routes(ctx, &tunnel, &plan.table, "Tunnel").await;
    }
    for tunnel in caches.cluster_tunnels.store().state() {
        let Some(plan) = latest.plan() else {
            return failed;
        };
        failed += write_routes(ctx, &tunnel, &plan.table, "ClusterTunnel").await;
    }
    failed
}

/// Writes `tunnel`'s route list when it differs from the table's; 1 when the write failed.
async fn write_routes<K: TunnelKindAdapter>(
    ctx: &Context,
    tunnel: &Arc<K>,
    table: &RouteTable,
    kind: &'static str,
) -> usize {
    if tunnel.meta().deletion_timestamp.is_some() {
        // Its deletion removes its records by the list it has.
        return 0;
    }
    let Some(routes) = table.tunnels.get(&tunnel.route_identity()) else {
        // Computed before the tunnel existed: the next table knows it.
        return 0;
    };
    let wanted = route_statuses(&routes.entries);
    if tunnel.tunnel_status().and_then(|s| s.routes.as_ref()) == Some(&wanted) {
        return 0;
    }
    let patch = Patch::Merge(json!({"status": {"routes": wanted}}));
    let (api, name, params) = (
        tunnel.object_api(&ctx.client),
        tunnel.name_any(),
        PatchParams::default(),
    );
    match bounded(ctx, kind, api.patch_status(&name, &params, &patch)).await {
        Ok(_) => 0,
        // Deleted meanwhile.
        Err(super::WriteError::Kube(kube::Error::Api(e))) if e.code == 404 => 0,
        Err(error) => {
            tracing::warn!(tunnel = %tunnel.display(), %error, "tunnel route list not written");
            1
        }
    }
}
