//! Warnings on a target object whose hostname cannot be protected because of someone else's
//! Access application: the route's owner sees it on the object they wrote (`kubectl describe`),
//! besides the policy's status. Published when the reason is new, not at every pass.
use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType};

use crate::term::Context;
use crate::term::events::bounded;
use cftunnel_policy::access::{PolicyKey, TargetKey};

/// The API version events name a target by.
fn api_version(target: &TargetKey) -> String {
    match (target.group.as_str(), target.kind.as_str()) {
        ("", _) => "v1".to_string(),
        (_, "TunnelBinding") => format!("{}/v1alpha1", target.group),
        (group, _) => format!("{group}/v1"),
    }
}

/// A Warning `reason` with `note` on `target` of `policy`'s namespace.
pub(crate) async fn warn_target(
    ctx: &Context,
    policy: &PolicyKey,
    target: &TargetKey,
    reason: &str,
    note: String,
) {
    let event = Event {
        type_: EventType::Warning,
        reason: reason.to_string(),
        note: Some(bounded(format!("AccessPolicy {policy}: {note}"))),
        action: "ProtectRoute".to_string(),
        secondary: None,
    };
    let reference = ObjectReference {
        api_version: Some(api_version(target)),
        kind: Some(target.kind.clone()),
        namespace: Some(policy.namespace.clone()),
        name: Some(target.name.clone()),
        ..ObjectReference::default()
    };
    if let Err(error) = ctx.recorder.publish(&event, &reference).await {
        tracing::warn!(%error, reason, "event not recorded");
    }
}
