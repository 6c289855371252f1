//! Events on the tunnel object for each transition. Notes never carry secret values.
use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType};

use cftunnel_types::TunnelIdentity;
use cftunnel_types::conversion;
use cftunnel_types::names::GROUP;

use super::adapters::TunnelKindAdapter;
use super::context::Context;

/// Event notes are bounded by the API (1 kB).
const MAX_NOTE: usize = 1000;

/// `note` cut to the API's limit on a character boundary.
pub fn bounded(mut note: String) -> String {
    if note.len() > MAX_NOTE {
        let mut cut = MAX_NOTE;
        while !note.is_char_boundary(cut) {
            cut -= 1;
        }
        note.truncate(cut);
    }
    note
}

async fn publish<K: TunnelKindAdapter>(
    ctx: &Context,
    obj: &K,
    type_: EventType,
    reason: &str,
    note: String,
) {
    let event = Event {
        type_,
        reason: reason.to_string(),
        note: Some(bounded(note)),
        action: "Reconcile".to_string(),
        secondary: None,
    };
    let reference = obj.object_ref(&());
    if let Err(error) = ctx.recorder.publish(&event, &reference).await {
        tracing::warn!(%error, reason, "event not recorded");
    }
}

pub async fn normal<K: TunnelKindAdapter>(ctx: &Context, obj: &K, reason: &str, note: String) {
    publish(ctx, obj, EventType::Normal, reason, note).await;
}

pub async fn warning<K: TunnelKindAdapter>(ctx: &Context, obj: &K, reason: &str, note: String) {
    publish(ctx, obj, EventType::Warning, reason, note).await;
}

/// A warning on the tunnel object `identity` names (for tasks that hold no copy of it).
pub async fn warning_on(ctx: &Context, identity: &TunnelIdentity, reason: &str, note: String) {
    let event = Event {
        type_: EventType::Warning,
        reason: reason.to_string(),
        note: Some(bounded(note)),
        action: "SyncDNS".to_string(),
        secondary: None,
    };
    let reference = ObjectReference {
        api_version: Some(format!("{GROUP}/{}", conversion::V1ALPHA2)),
        kind: Some(identity.kind.as_str().to_string()),
        namespace: (!identity.namespace.is_empty()).then(|| identity.namespace.clone()),
        name: Some(identity.name.clone()),
        ..ObjectReference::default()
    };
    if let Err(error) = ctx.recorder.publish(&event, &reference).await {
        tracing::warn!(%error, reason, "event not recorded");
    }
}
