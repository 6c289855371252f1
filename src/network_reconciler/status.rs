//! A NetworkRoute's status from a pass (`Accepted`, `Programmed`, one entry per route) and its
//! finalizer. A status is written only when it differs from the one the object holds (a
//! condition's `lastTransitionTime` moves only when its status flips), with the object's
//! resourceVersion, so a pass that changes nothing writes nothing.
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::api::{Patch, PatchParams};
use kube::runtime::events::{Event, EventType};
use kube::{Api, ResourceExt};
use serde_json::json;

use super::sync::EntryOutcome;
use crate::term::Context;
use crate::term::events::bounded;
use crate::term::finalizer::{add_patch, remove_patch};
use cftunnel_policy::private::{Entry, EntryKind, Owner, OwnerKind};
use cftunnel_types::names::FINALIZER;
use cftunnel_types::network::{
    CONDITION_ACCEPTED, CONDITION_PROGRAMMED, NetworkRoute, NetworkRouteStatus, PrivateRouteStatus,
};

pub(crate) const REASON_ACCEPTED: &str = "Accepted";
pub(crate) const REASON_PROGRAMMED: &str = "Programmed";
pub(crate) const REASON_PENDING: &str = "Pending";
pub(crate) const REASON_CONFLICT: &str = "Conflict";
pub(crate) const REASON_INVALID: &str = "Invalid";
pub(crate) const REASON_CLOUDFLARE_ERROR: &str = "CloudflareError";
/// Event: a deleted NetworkRoute let go with routes cftunnel could not reach any more.
pub(crate) const EVENT_CLEANUP_INCOMPLETE: &str = "CleanupIncomplete";

/// What a pass found of one NetworkRoute.
pub(crate) enum Verdict<'a> {
    /// Not accepted: the reason and message.
    Refused(&'static str, &'a str),
    /// Accepted; its entries' outcomes (`None`: its account was not synced this pass).
    Accepted(Option<&'a BTreeMap<Entry, EntryOutcome>>),
}

fn condition(
    previous: Option<&NetworkRouteStatus>,
    type_: &str,
    status: bool,
    reason: &str,
    message: String,
    generation: Option<i64>,
) -> Condition {
    let status = if status { "True" } else { "False" };
    let before = previous
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == type_));
    let last_transition_time = match before {
        Some(b) if b.status == status => b.last_transition_time.clone(),
        _ => Time(jiff::Timestamp::now()),
    };
    Condition {
        type_: type_.to_string(),
        status: status.to_string(),
        reason: reason.to_string(),
        message,
        observed_generation: generation,
        last_transition_time,
    }
}

/// The entries of `route`: what became of each route it asked for (CIDRs, then Services'
/// addresses, then hostnames), or, before its account was synced, each entry of its spec as
/// pending.
fn entries(
    route: &NetworkRoute,
    outcomes: &BTreeMap<Entry, EntryOutcome>,
) -> Vec<PrivateRouteStatus> {
    let status = |entry: &Entry, outcome: Option<&EntryOutcome>| PrivateRouteStatus {
        kind: entry.kind.as_str().to_string(),
        route: entry.route.clone(),
        service: entry.service.clone(),
        id: outcome.and_then(|o| o.id.clone()),
        state: outcome.map_or("Pending", |o| o.state).to_string(),
        message: outcome.and_then(|o| o.message.clone()),
    };
    if !outcomes.is_empty() {
        return outcomes
            .iter()
            .map(|(entry, outcome)| status(entry, Some(outcome)))
            .collect();
    }
    let spec = &route.spec;
    let cidrs = spec.cidrs.iter().map(|c| Entry {
        kind: EntryKind::Cidr,
        route: c.trim().to_string(),
        service: None,
    });
    let services = spec.services.iter().map(|s| Entry {
        kind: EntryKind::Service,
        route: String::new(),
        service: Some(s.name.clone()),
    });
    let hostnames = spec.hostnames.iter().map(|h| Entry {
        kind: EntryKind::Hostname,
        route: cftunnel_policy::private::normalize_hostname(h),
        service: None,
    });
    cidrs
        .chain(services)
        .chain(hostnames)
        .map(|entry| status(&entry, None))
        .collect()
}

/// The status `verdict` makes of `route`.
pub(crate) fn status_of(route: &NetworkRoute, verdict: &Verdict<'_>) -> NetworkRouteStatus {
    let previous = route.status.as_ref();
    let generation = route.metadata.generation;
    let (accepted, programmed, routes) = match verdict {
        Verdict::Refused(reason, message) => (
            condition(
                previous,
                CONDITION_ACCEPTED,
                false,
                reason,
                message.to_string(),
                generation,
            ),
            condition(
                previous,
                CONDITION_PROGRAMMED,
                false,
                REASON_PENDING,
                "not accepted: see Accepted".into(),
                generation,
            ),
            None,
        ),
        Verdict::Accepted(outcomes) => {
            let empty = BTreeMap::new();
            let outcomes = outcomes.unwrap_or(&empty);
            let routes = entries(route, outcomes);
            let worst = ["Error", "Conflict", "Pending"]
                .into_iter()
                .find_map(|state| routes.iter().find(|r| r.state == state));
            let programmed = match worst {
                None => condition(
                    previous,
                    CONDITION_PROGRAMMED,
                    true,
                    REASON_PROGRAMMED,
                    format!("{} route(s) in place at Cloudflare", routes.len()),
                    generation,
                ),
                Some(r) => {
                    let reason = match r.state.as_str() {
                        "Conflict" => REASON_CONFLICT,
                        "Error" if r.message.as_deref().is_some_and(|m| m.contains("spec.")) => {
                            REASON_INVALID
                        }
                        "Error" => REASON_CLOUDFLARE_ERROR,
                        _ => REASON_PENDING,
                    };
                    let what = if r.route.is_empty() {
                        r.service.clone().unwrap_or_default()
                    } else {
                        r.route.clone()
                    };
                    let message = match &r.message {
                        Some(m) => format!("{what}: {m}"),
                        None => format!("{what}: not at Cloudflare yet"),
                    };
                    condition(
                        previous,
                        CONDITION_PROGRAMMED,
                        false,
                        reason,
                        message,
                        generation,
                    )
                }
            };
            (
                condition(
                    previous,
                    CONDITION_ACCEPTED,
                    true,
                    REASON_ACCEPTED,
                    "the tunnel and virtual network are resolved".into(),
                    generation,
                ),
                programmed,
                Some(routes),
            )
        }
    };
    NetworkRouteStatus {
        conditions: Some(vec![accepted, programmed]),
        routes,
    }
}

/// Writes `status` when it differs from what `route` holds; false when the write failed (the
/// next pass, soon, writes it: a status write of its own wakes nothing).
pub(crate) async fn write(ctx: &Context, route: &NetworkRoute, status: NetworkRouteStatus) -> bool {
    if route.status.as_ref() == Some(&status) {
        return true;
    }
    let api: Api<NetworkRoute> =
        Api::namespaced(ctx.client.clone(), &route.namespace().unwrap_or_default());
    let patch = json!({
        "metadata": {"resourceVersion": route.resource_version()},
        "status": status,
    });
    match api
        .patch_status(
            &route.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
    {
        Ok(_) => true,
        Err(error) => {
            tracing::debug!(route = %route.name_any(), %error, "NetworkRoute status not written; the next pass writes it");
            false
        }
    }
}

/// Adds cftunnel's finalizer before any route of `route` is made: the object as it is then
/// (`None` when the patch failed).
pub(crate) async fn add_finalizer(ctx: &Context, route: &NetworkRoute) -> Option<NetworkRoute> {
    let Some(patch) = add_patch(route.finalizers(), FINALIZER) else {
        return Some(route.clone());
    };
    send(ctx, route, patch).await
}

/// Removes the finalizer once none of `route`'s routes is left.
pub(crate) async fn remove_finalizer(ctx: &Context, route: &NetworkRoute) -> bool {
    let Some(patch) = remove_patch(route.finalizers(), FINALIZER) else {
        return true;
    };
    send(ctx, route, patch).await.is_some()
}

async fn send(
    ctx: &Context,
    route: &NetworkRoute,
    patch: json_patch::Patch,
) -> Option<NetworkRoute> {
    let api: Api<NetworkRoute> =
        Api::namespaced(ctx.client.clone(), &route.namespace().unwrap_or_default());
    match api
        .patch(
            &route.name_any(),
            &PatchParams::default(),
            &Patch::<()>::Json(patch),
        )
        .await
    {
        Ok(updated) => Some(updated),
        Err(error) => {
            tracing::debug!(route = %route.name_any(), %error, "NetworkRoute finalizer not changed; the next pass tries again");
            None
        }
    }
}

/// The owner a NetworkRoute's routes are marked with.
pub(crate) fn owner(route: &NetworkRoute) -> Owner {
    Owner::new(
        OwnerKind::NetworkRoute,
        &route.namespace().unwrap_or_default(),
        &route.name_any(),
    )
}

/// A Warning on a NetworkRoute let go before its routes could be deleted: its tunnel and the
/// credentials of its account are gone.
pub(crate) async fn cleanup_incomplete(ctx: &Context, route: &NetworkRoute, why: Option<&str>) {
    let event = Event {
        type_: EventType::Warning,
        reason: EVENT_CLEANUP_INCOMPLETE.to_string(),
        note: Some(bounded(format!(
            "deleted while its tunnel and its account's API Secret are gone ({}): a tunnel deleted at Cloudflare took its routes with it; routes through a tunnel kept at Cloudflare may remain, marked with this cluster's id: delete them in Zero Trust (Networks, Routes)",
            why.unwrap_or("unreachable")
        ))),
        action: "DeleteRoutes".to_string(),
        secondary: None,
    };
    let reference = ObjectReference {
        api_version: Some("networking.cfargotunnel.com/v1alpha2".to_string()),
        kind: Some("NetworkRoute".to_string()),
        namespace: route.namespace(),
        name: Some(route.name_any()),
        uid: route.uid(),
        ..ObjectReference::default()
    };
    if let Err(error) = ctx.recorder.publish(&event, &reference).await {
        tracing::warn!(%error, "event not recorded");
    }
}
