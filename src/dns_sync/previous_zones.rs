//! `status.previousZones` of a tunnel whose `spec.cloudflare.domain` changed: the tunnel
//! reconciler records the old zone in the same status write that moves `zoneId`, the DNS task
//! removes the tunnel's records there (a sync of that zone wanting nothing of it) and then drops
//! the entry here. Until then the zone stays in status, so a restart or a lost leadership
//! between the two steps still finds it and no record is orphaned.
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use crate::dns_sync::TunnelRecord;
use crate::term::Context;
use cftunnel_types::TunnelKind;
use cftunnel_types::{ClusterTunnel, Tunnel};

/// The JSON patch dropping `cleared` zone ids from `status.previousZones`, applied only if the
/// list is still the one read (a test op), so a zone recorded meanwhile is never lost.
pub(crate) fn release_patch(record: &TunnelRecord, cleared: &[&str]) -> Option<json_patch::Patch> {
    let current = record.status.previous_zones.as_ref()?;
    let left: Vec<_> = current
        .iter()
        .filter(|z| !cleared.contains(&z.zone_id.as_str()))
        .collect();
    if left.len() == current.len() {
        return None;
    }
    let change = if left.is_empty() {
        json!({"op": "remove", "path": "/status/previousZones"})
    } else {
        json!({"op": "replace", "path": "/status/previousZones", "value": left})
    };
    serde_json::from_value(json!([
        {"op": "test", "path": "/status/previousZones", "value": current},
        change,
    ]))
    .ok()
}

/// Drops `cleared` from the tunnel's `status.previousZones`.
pub async fn release(
    ctx: &Context,
    record: &TunnelRecord,
    cleared: &[&str],
) -> Result<(), kube::Error> {
    let Some(patch) = release_patch(record, cleared) else {
        return Ok(());
    };
    let (params, name) = (PatchParams::default(), &record.identity.name);
    let patch = Patch::<()>::Json(patch);
    match record.identity.kind {
        TunnelKind::ClusterTunnel => {
            Api::<ClusterTunnel>::all(ctx.client.clone())
                .patch_status(name, &params, &patch)
                .await?;
        }
        TunnelKind::Tunnel => {
            Api::<Tunnel>::namespaced(ctx.client.clone(), &record.identity.namespace)
                .patch_status(name, &params, &patch)
                .await?;
        }
    }
    tracing::info!(tunnel = %record.identity, zones = ?cleared, "DNS records removed from previous zones");
    Ok(())
}
