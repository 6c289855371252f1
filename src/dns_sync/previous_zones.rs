//! `status.previousZones`: the zones other than its own that may hold a tunnel's records.
//! - A domain change: the tunnel reconciler records the old zone in the same status write that
//!   moves `zoneId`.
//! - Another zone of the account its hostnames are placed in: the DNS task records it here
//!   ([`record`]) before it writes there.
//!
//! The DNS task removes the tunnel's records from a zone it no longer wants anything in (a sync
//! wanting nothing of it there) and then drops the entry ([`release`]). Until then the zone
//! stays in status, so a restart, a lost leadership or a deletion in between still finds it and
//! no record is orphaned (a binding deleted while cftunnel was stopped included).
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use crate::dns_sync::TunnelRecord;
use crate::term::Context;
use cftunnel_policy::dns::AccountZone;
use cftunnel_types::TunnelKind;
use cftunnel_types::{ClusterTunnel, Tunnel, ZoneRef};

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

/// Most zones recorded (the schema's bound).
pub(crate) const MAX_ZONES: usize = 64;

/// The JSON patch adding `zone` to `status.previousZones`, applied only if the list (or, when
/// there is none, `zoneId`) is still the one read, so a domain change meanwhile is never lost.
/// `None` when it is listed already or the list is full.
pub(crate) fn record_patch(record: &TunnelRecord, zone: &AccountZone) -> Option<json_patch::Patch> {
    let entry = ZoneRef {
        zone_id: zone.id.clone(),
        zone_domain: zone.name.clone(),
    };
    let patch = match record.status.previous_zones.as_ref() {
        Some(current) if current.iter().any(|z| z.zone_id == zone.id) => return None,
        Some(current) if current.len() >= MAX_ZONES => return None,
        Some(current) => {
            let mut next = current.clone();
            next.push(entry);
            json!([
                {"op": "test", "path": "/status/previousZones", "value": current},
                {"op": "replace", "path": "/status/previousZones", "value": next},
            ])
        }
        // The API server's JSON patch tests a missing member as null: the list is still absent.
        None => json!([
            {"op": "test", "path": "/status/zoneId", "value": record.status.zone_id},
            {"op": "test", "path": "/status/previousZones", "value": null},
            {"op": "add", "path": "/status/previousZones", "value": [entry]},
        ]),
    };
    serde_json::from_value(patch).ok()
}

/// Records `zone` in the tunnel's `status.previousZones` before records go there.
pub async fn record(
    ctx: &Context,
    record: &TunnelRecord,
    zone: &AccountZone,
) -> Result<(), kube::Error> {
    let Some(patch) = record_patch(record, zone) else {
        return Ok(());
    };
    patch_status(ctx, record, patch).await?;
    tracing::debug!(tunnel = %record.identity, zone = %zone.name, "zone of the tunnel's records recorded in status");
    Ok(())
}

async fn patch_status(
    ctx: &Context,
    record: &TunnelRecord,
    patch: json_patch::Patch,
) -> Result<(), kube::Error> {
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
    Ok(())
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
    patch_status(ctx, record, patch).await?;
    tracing::info!(tunnel = %record.identity, zones = ?cleared, "no DNS record of the tunnel left in these zones");
    Ok(())
}
