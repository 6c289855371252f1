//! Events on the tunnel object for each transition. Notes never carry secret values.
use kube::runtime::events::{Event, EventType};

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
