//! Status through the status subresource (merge patch of the whole computed status, skipped when
//! nothing changed) and the §1.5 labels on the object.
use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use super::adapters::TunnelKindAdapter;
use super::conditions::{ReadyReason, find_ready, ready_condition, with_ready};
use super::context::Context;
use super::core::ReconcileError;
use super::events;
use super::setup::Resolved;
use crate::api::{RouteStatus, TunnelStatus};
use crate::render::TunnelInput;
use crate::render::labels::{object_labels, selector_labels};
use crate::routes::{RouteEntry, RouteReason};

fn now() -> Time {
    Time(jiff::Timestamp::now())
}

async fn patch_status<K: TunnelKindAdapter>(
    obj: &K,
    ctx: &Context,
    status: &TunnelStatus,
) -> Result<(), ReconcileError> {
    if obj.tunnel_status() == Some(status) {
        return Ok(());
    }
    obj.object_api(&ctx.client)
        .patch_status(
            &obj.name_any(),
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": status })),
        )
        .await
        .map_err(|e| ReconcileError::kube("writing the status", e))?;
    Ok(())
}

/// Sets `Ready` and publishes an Event when its reason changes.
async fn set_ready<K: TunnelKindAdapter>(
    obj: &K,
    ctx: &Context,
    mut next: TunnelStatus,
    reason: ReadyReason,
    message: &str,
) -> Result<(), ReconcileError> {
    let previous = find_ready(obj.tunnel_status().and_then(|s| s.conditions.as_ref()));
    let generation = obj.meta().generation;
    let changed = previous.is_none_or(|p| p.reason != reason.as_str() || p.message != message);
    let condition = ready_condition(previous, reason, message, generation, now());
    let condition = match previous {
        Some(p) if !changed && p.observed_generation == generation => p.clone(),
        _ => condition,
    };
    next.conditions = Some(with_ready(next.conditions.as_ref(), condition));
    next.observed_generation = generation;
    patch_status(obj, ctx, &next).await?;
    if changed {
        if matches!(reason, ReadyReason::Ready | ReadyReason::Deleting) {
            events::normal(ctx, obj, reason.as_str(), message.to_string()).await;
        } else {
            events::warning(ctx, obj, reason.as_str(), message.to_string()).await;
        }
    }
    Ok(())
}

pub async fn report_failure<K: TunnelKindAdapter>(
    obj: &K,
    ctx: &Context,
    error: &ReconcileError,
) -> Result<(), ReconcileError> {
    let current = obj.tunnel_status().cloned().unwrap_or_default();
    set_ready(obj, ctx, current, error.reason(), &error.to_string()).await
}

/// `Ready=False` with `reason` while a step waits (e.g. a deletion for its pods).
pub async fn report_progress<K: TunnelKindAdapter>(
    obj: &K,
    ctx: &Context,
    reason: ReadyReason,
    message: &str,
) -> Result<(), ReconcileError> {
    let current = obj.tunnel_status().cloned().unwrap_or_default();
    set_ready(obj, ctx, current, reason, message).await
}

pub async fn report_ready<K: TunnelKindAdapter>(
    obj: &K,
    ctx: &Context,
    resolved: &Resolved,
    routes: &[RouteEntry],
) -> Result<(), ReconcileError> {
    let mut next = obj.tunnel_status().cloned().unwrap_or_default();
    next.routes = Some(route_statuses(routes));
    next.account_id = Some(resolved.account_id.clone());
    next.tunnel_id = Some(resolved.tunnel_id.clone());
    next.tunnel_name = Some(resolved.tunnel_name.clone());
    next.zone_id = Some(resolved.zone_id.clone());
    next.zone_domain = Some(resolved.zone_domain.clone());
    let mut message = format!(
        "tunnel {} ({}) is configured",
        resolved.tunnel_name, resolved.tunnel_id
    );
    for note in &resolved.notes {
        message.push_str("; ");
        message.push_str(note);
    }
    set_ready(obj, ctx, next, ReadyReason::Ready, &message).await
}

/// `status.routes[]`: every route declared against the tunnel and what became of it.
pub fn route_statuses(entries: &[RouteEntry]) -> Vec<RouteStatus> {
    entries
        .iter()
        .map(|e| RouteStatus {
            hostname: e.hostname.clone(),
            path: e.path.clone(),
            target: e.service.clone(),
            source: e.source.to_string(),
            state: match e.reason {
                RouteReason::Routed | RouteReason::LegacyRoute | RouteReason::UdpPort => "Active",
                RouteReason::ServiceNotFound | RouteReason::PortNotFound => "Pending",
                RouteReason::HostnameConflict => "Conflict",
                _ => "Error",
            }
            .to_string(),
            reason: (e.reason != RouteReason::Routed).then(|| {
                if e.message.is_empty() {
                    e.reason.as_str().to_string()
                } else {
                    format!("{}: {}", e.reason.as_str(), e.message)
                }
            }),
        })
        .collect()
}

/// Writes the ids as soon as the tunnel is known, before anything else can fail.
pub async fn record_ids<K: TunnelKindAdapter>(
    obj: &K,
    ctx: &Context,
    account_id: &str,
    tunnel_id: &str,
    tunnel_name: &str,
) -> Result<(), ReconcileError> {
    obj.object_api(&ctx.client)
        .patch_status(
            &obj.name_any(),
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": {
                "accountId": account_id,
                "tunnelId": tunnel_id,
                "tunnelName": tunnel_name,
            }})),
        )
        .await
        .map_err(|e| ReconcileError::kube("recording the tunnel id", e))?;
    Ok(())
}

/// Adds the §1.5 labels to the object (merge patch, only when one is missing or differs).
pub async fn ensure_labels<K: TunnelKindAdapter>(
    obj: &K,
    ctx: &Context,
    input: &TunnelInput,
) -> Result<(), ReconcileError> {
    let Some(selector) = selector_labels(K::KIND, &obj.name_any()) else {
        return Ok(());
    };
    let wanted = object_labels(
        &selector,
        &input.tunnel_id,
        &input.tunnel_name,
        &input.domain,
    );
    let current = obj.labels();
    let missing: BTreeMap<&String, &String> = wanted
        .iter()
        .filter(|(k, v)| current.get(*k) != Some(*v))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    obj.object_api(&ctx.client)
        .patch(
            &obj.name_any(),
            &PatchParams::default(),
            &Patch::Merge(json!({ "metadata": { "labels": missing } })),
        )
        .await
        .map_err(|e| ReconcileError::kube("labelling the tunnel object", e))?;
    Ok(())
}
