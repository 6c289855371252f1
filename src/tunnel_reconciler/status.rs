//! Status through the status subresource (merge patch of the whole computed status, skipped when
//! nothing changed) and the §1.5 labels on the object.
use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use super::context::TunnelContext;
use super::resolved::Resolved;
use crate::term::ReconcileError;
use crate::term::adapters::TunnelKindAdapter;
use crate::term::conditions::{ReadyReason, find_ready, ready_condition, with_ready};
use crate::term::context::Context;
use crate::term::events;
use crate::term::shared::{SHARED_TUNNEL, shared_message, with_shared};
use cftunnel_policy::render::TunnelInput;
use cftunnel_policy::render::labels::{object_labels, selector_labels};
use cftunnel_types::{TunnelStatus, ZoneRef};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

fn now() -> Time {
    Time(jiff::Timestamp::now())
}

/// Writes the fields of `status` that differ from the object's (a field removed is sent as
/// null), so a reconcile working from a stale copy never writes back fields it did not change.
/// A write that moves the zone carries the object's `resourceVersion` as precondition: the
/// previous zone it records must be the one the object really had.
async fn patch_status<K: TunnelKindAdapter>(
    obj: &K,
    ctx: &Context,
    status: &TunnelStatus,
) -> Result<(), ReconcileError> {
    let Some(changed) = changed_fields(obj.tunnel_status(), status) else {
        return Ok(());
    };
    let moves_zone = changed.contains_key("previousZones");
    let mut patch = json!({ "status": changed });
    if moves_zone && let Some(version) = obj.resource_version() {
        patch["metadata"] = json!({ "resourceVersion": version });
    }
    obj.object_api(&ctx.client)
        .patch_status(
            &obj.name_any(),
            &PatchParams::default(),
            &Patch::Merge(patch),
        )
        .await
        .map_err(|e| ReconcileError::kube("writing the status", e))?;
    Ok(())
}

/// The top-level status fields of `next` that differ from `current`; `None` when none does.
fn changed_fields(
    current: Option<&TunnelStatus>,
    next: &TunnelStatus,
) -> Option<serde_json::Map<String, serde_json::Value>> {
    let as_map = |status: Option<&TunnelStatus>| match status.map(serde_json::to_value) {
        Some(Ok(serde_json::Value::Object(map))) => map,
        _ => serde_json::Map::new(),
    };
    let (current, next) = (as_map(current), as_map(Some(next)));
    let mut changed = serde_json::Map::new();
    for (key, value) in &next {
        if current.get(key) != Some(value) {
            changed.insert(key.clone(), value.clone());
        }
    }
    for key in current.keys().filter(|k| !next.contains_key(*k)) {
        changed.insert(key.clone(), serde_json::Value::Null);
    }
    (!changed.is_empty()).then_some(changed)
}

/// `previous` after the zone moved from `from` to `to`: `from` recorded (its records are
/// removed by the DNS task, which then drops it), `to` no longer listed, oldest dropped first
/// past the bound.
pub(crate) fn previous_zones_after_move(
    previous: Option<&Vec<ZoneRef>>,
    from: Option<ZoneRef>,
    to: &str,
) -> Option<Vec<ZoneRef>> {
    let mut zones: Vec<ZoneRef> = previous.cloned().unwrap_or_default();
    if let Some(from) = from.filter(|z| !z.zone_id.is_empty() && z.zone_id != to)
        && !zones.iter().any(|z| z.zone_id == from.zone_id)
    {
        zones.push(from);
    }
    zones.retain(|z| z.zone_id != to);
    let excess = zones.len().saturating_sub(MAX_PREVIOUS_ZONES);
    zones.drain(..excess);
    (!zones.is_empty()).then_some(zones)
}

/// Most zones kept in `status.previousZones` (the CRD bounds the list to this).
pub(crate) const MAX_PREVIOUS_ZONES: usize = crate::dns_sync::MAX_RECORDED_ZONES;

/// Whether a `Ready` change is announced with an Event.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Announce {
    /// Whenever the reason or the message changes.
    Changes,
    /// Only when the reason changes: a later failure of a streak already announced (retries
    /// under a 5xx storm change the message, and must not make an Event each).
    ReasonChanges,
}

/// Sets `Ready` and publishes an Event when it changes as `announce` says.
async fn set_ready<K: TunnelKindAdapter>(
    obj: &K,
    ctx: &Context,
    mut next: TunnelStatus,
    reason: ReadyReason,
    message: &str,
    announce: Announce,
) -> Result<(), ReconcileError> {
    let previous = find_ready(obj.tunnel_status().and_then(|s| s.conditions.as_ref()));
    let generation = obj.meta().generation;
    let changed = previous.is_none_or(|p| p.reason != reason.as_str() || p.message != message);
    let announced = match announce {
        Announce::Changes => changed,
        Announce::ReasonChanges => previous.is_none_or(|p| p.reason != reason.as_str()),
    };
    let condition = ready_condition(previous, reason, message, generation, now());
    let condition = match previous {
        Some(p) if !changed && p.observed_generation == generation => p.clone(),
        _ => condition,
    };
    next.conditions = Some(with_ready(next.conditions.as_ref(), condition));
    next.observed_generation = generation;
    patch_status(obj, ctx, &next).await?;
    if announced {
        if matches!(reason, ReadyReason::Ready | ReadyReason::Deleting) {
            events::normal(ctx, obj, reason.as_str(), message.to_string()).await;
        } else {
            events::warning(ctx, obj, reason.as_str(), message.to_string()).await;
        }
    }
    Ok(())
}

/// `Ready=False` for `error`. One Warning Event per failure streak: `in_streak` (the object's
/// previous reconcile failed too) publishes one only if the reason changed.
pub(crate) async fn report_failure<K: TunnelKindAdapter>(
    obj: &K,
    ctx: &Context,
    error: &ReconcileError,
    in_streak: bool,
) -> Result<(), ReconcileError> {
    let current = obj.tunnel_status().cloned().unwrap_or_default();
    let announce = match in_streak {
        true => Announce::ReasonChanges,
        false => Announce::Changes,
    };
    set_ready(
        obj,
        ctx,
        current,
        error.reason(),
        &error.to_string(),
        announce,
    )
    .await
}

/// `Ready=False` with `reason` while a step waits (e.g. a deletion for its pods).
pub(crate) async fn report_progress<K: TunnelKindAdapter>(
    obj: &K,
    ctx: &Context,
    reason: ReadyReason,
    message: &str,
) -> Result<(), ReconcileError> {
    let current = obj.tunnel_status().cloned().unwrap_or_default();
    set_ready(obj, ctx, current, reason, message, Announce::Changes).await
}

pub(crate) async fn report_ready<K: TunnelKindAdapter>(
    obj: &K,
    ctx: &TunnelContext,
    resolved: &Resolved,
    access_unknown: Option<&(String, Vec<String>)>,
) -> Result<(), ReconcileError> {
    let mut next = obj.tunnel_status().cloned().unwrap_or_default();
    next.account_id = Some(resolved.account_id.clone());
    next.tunnel_id = Some(resolved.tunnel_id.clone());
    next.tunnel_name = Some(resolved.tunnel_name.clone());
    let from = next.zone_id.clone().map(|zone_id| ZoneRef {
        zone_id,
        zone_domain: next.zone_domain.clone().unwrap_or_default(),
    });
    next.previous_zones =
        previous_zones_after_move(next.previous_zones.as_ref(), from, &resolved.zone_id);
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
    let shared = ctx.shared_tunnels.of(&obj.route_identity());
    let catch_all = &obj.tunnel_spec().fallback_target;
    let was = shared_condition(obj.tunnel_status()).map(|c| c.message.clone());
    next.conditions = Some(with_shared(
        next.conditions.take().unwrap_or_default(),
        &shared,
        catch_all,
        obj.meta().generation,
        now(),
    ));
    let is = (!shared.is_empty()).then(|| shared_message(&shared, catch_all));
    if is.is_some() && is != was {
        tracing::warn!(object = %obj.display(), hostnames = shared.len(), "other clusters route other hostnames through this tunnel");
        events::warning(ctx, obj, SHARED_TUNNEL, is.clone().unwrap_or_default()).await;
    }
    let reason = match access_unknown {
        Some((why, hostnames)) => {
            message = format!(
                "{} closed (503) because the AccessPolicies cannot be known: {why}; {message}",
                bounded_list(hostnames)
            );
            ReadyReason::AccessPoliciesUnknown
        }
        None => ReadyReason::Ready,
    };
    set_ready(obj, ctx, next, reason, &message, Announce::Changes).await
}

/// The tunnel's `SharedTunnel` condition, if it has one.
fn shared_condition(status: Option<&TunnelStatus>) -> Option<&Condition> {
    status?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == SHARED_TUNNEL)
}

/// Writes the ids as soon as the tunnel is known, before anything else can fail.
pub(crate) async fn record_ids<K: TunnelKindAdapter>(
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
pub(crate) async fn ensure_labels<K: TunnelKindAdapter>(
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

/// Up to five hostnames, and how many more.
fn bounded_list(hostnames: &[String]) -> String {
    let shown: Vec<&str> = hostnames.iter().take(5).map(String::as_str).collect();
    match hostnames.len().saturating_sub(shown.len()) {
        0 => shown.join(", "),
        more => format!("{} and {more} more", shown.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zone(id: &str) -> ZoneRef {
        ZoneRef {
            zone_id: id.into(),
            zone_domain: format!("{id}.test"),
        }
    }

    #[test]
    fn a_zone_move_records_the_old_zone_once_and_forgets_the_new_one() {
        assert_eq!(previous_zones_after_move(None, None, "a"), None);
        assert_eq!(previous_zones_after_move(None, Some(zone("a")), "a"), None);
        let moved = previous_zones_after_move(None, Some(zone("a")), "b");
        assert_eq!(moved, Some(vec![zone("a")]));
        let again = previous_zones_after_move(moved.as_ref(), Some(zone("a")), "b");
        assert_eq!(again, Some(vec![zone("a")]), "not recorded twice");
        let third = previous_zones_after_move(again.as_ref(), Some(zone("b")), "c");
        assert_eq!(third, Some(vec![zone("a"), zone("b")]));
        let back = previous_zones_after_move(third.as_ref(), Some(zone("c")), "a");
        assert_eq!(
            back,
            Some(vec![zone("b"), zone("c")]),
            "the zone moved back to is current"
        );
        let many: Vec<ZoneRef> = (0..MAX_PREVIOUS_ZONES)
            .map(|i| zone(&format!("z{i}")))
            .collect();
        let bounded =
            previous_zones_after_move(Some(&many), Some(zone("new")), "cur").unwrap_or_default();
        assert_eq!(bounded.len(), MAX_PREVIOUS_ZONES);
        assert_eq!(bounded.last(), Some(&zone("new")));
    }

    #[test]
    fn only_changed_fields_are_written_and_removed_ones_are_nulled() {
        let current = TunnelStatus {
            tunnel_id: Some("t".into()),
            zone_id: Some("a".into()),
            ..TunnelStatus::default()
        };
        assert_eq!(changed_fields(Some(&current), &current), None);
        let next = TunnelStatus {
            tunnel_id: Some("t".into()),
            zone_id: Some("b".into()),
            previous_zones: Some(vec![zone("a")]),
            ..TunnelStatus::default()
        };
        let changed = changed_fields(Some(&current), &next).unwrap_or_default();
        assert_eq!(
            serde_json::Value::Object(changed),
            json!({"zoneId": "b", "previousZones": [{"zoneId": "a", "zoneDomain": "a.test"}]})
        );
        let cleared = TunnelStatus::default();
        let changed = changed_fields(Some(&current), &cleared).unwrap_or_default();
        assert_eq!(
            serde_json::Value::Object(changed),
            json!({"tunnelId": null, "zoneId": null})
        );
    }
}
