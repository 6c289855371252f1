//! The tunnel finalizer: added before any Cloudflare side effect of a newTunnel, removed once
//! the tunnel is deleted. JSON patches with a test op, so another finalizer is never dropped.
use kube::ResourceExt;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use super::adapters::TunnelKindAdapter;
use super::context::Context;
use crate::term::ReconcileError;
use cftunnel_types::names::FINALIZER;

/// The JSON patch adding `finalizer`; `None` when it is already there.
pub(crate) fn add_patch(finalizers: &[String], finalizer: &str) -> Option<json_patch::Patch> {
    if finalizers.iter().any(|f| f == finalizer) {
        return None;
    }
    let patch = if finalizers.is_empty() {
        json!([
            {"op": "test", "path": "/metadata/finalizers", "value": null},
            {"op": "add", "path": "/metadata/finalizers", "value": [finalizer]},
        ])
    } else {
        json!([{"op": "add", "path": "/metadata/finalizers/-", "value": finalizer}])
    };
    serde_json::from_value(patch).ok()
}

/// The JSON patch removing `finalizer` (only if still at the index seen); `None` when absent.
pub(crate) fn remove_patch(finalizers: &[String], finalizer: &str) -> Option<json_patch::Patch> {
    let index = finalizers.iter().position(|f| f == finalizer)?;
    let path = format!("/metadata/finalizers/{index}");
    serde_json::from_value(json!([
        {"op": "test", "path": path, "value": finalizer},
        {"op": "remove", "path": path},
    ]))
    .ok()
}

pub async fn add<K: TunnelKindAdapter>(obj: &K, ctx: &Context) -> Result<(), ReconcileError> {
    match add_patch(obj.finalizers(), FINALIZER) {
        Some(patch) => send(obj, ctx, patch, "adding the finalizer").await,
        None => Ok(()),
    }
}

pub async fn remove<K: TunnelKindAdapter>(obj: &K, ctx: &Context) -> Result<(), ReconcileError> {
    match remove_patch(obj.finalizers(), FINALIZER) {
        Some(patch) => send(obj, ctx, patch, "removing the finalizer").await,
        None => Ok(()),
    }
}

async fn send<K: TunnelKindAdapter>(
    obj: &K,
    ctx: &Context,
    patch: json_patch::Patch,
    action: &'static str,
) -> Result<(), ReconcileError> {
    let name = obj.meta().name.clone().unwrap_or_default();
    obj.object_api(&ctx.client)
        .patch(&name, &PatchParams::default(), &Patch::<()>::Json(patch))
        .await
        .map_err(|e| ReconcileError::kube(action, e))?;
    Ok(())
}
