//! The tunnel finalizer: added before any Cloudflare side effect of a newTunnel, removed once
//! the tunnel is deleted. JSON patches with a test op, so another finalizer is never dropped.
use kube::ResourceExt;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use super::adapters::TunnelKindAdapter;
use super::context::Context;
use super::core::ReconcileError;
use crate::api::names::FINALIZER;

pub async fn add<K: TunnelKindAdapter>(obj: &K, ctx: &Context) -> Result<(), ReconcileError> {
    let finalizers = obj.finalizers();
    if finalizers.iter().any(|f| f == FINALIZER) {
        return Ok(());
    }
    let patch = if finalizers.is_empty() {
        json!([
            {"op": "test", "path": "/metadata/finalizers", "value": null},
            {"op": "add", "path": "/metadata/finalizers", "value": [FINALIZER]},
        ])
    } else {
        json!([{"op": "add", "path": "/metadata/finalizers/-", "value": FINALIZER}])
    };
    send(obj, ctx, patch, "adding the finalizer").await
}

pub async fn remove<K: TunnelKindAdapter>(obj: &K, ctx: &Context) -> Result<(), ReconcileError> {
    let Some(index) = obj.finalizers().iter().position(|f| f == FINALIZER) else {
        return Ok(());
    };
    let path = format!("/metadata/finalizers/{index}");
    let patch = json!([
        {"op": "test", "path": path, "value": FINALIZER},
        {"op": "remove", "path": path},
    ]);
    send(obj, ctx, patch, "removing the finalizer").await
}

async fn send<K: TunnelKindAdapter>(
    obj: &K,
    ctx: &Context,
    patch: serde_json::Value,
    action: &'static str,
) -> Result<(), ReconcileError> {
    let patch: json_patch::Patch = serde_json::from_value(patch)
        .map_err(|e| crate::render::RenderError::Encode(e.to_string()))?;
    let name = obj.meta().name.clone().unwrap_or_default();
    obj.object_api(&ctx.client)
        .patch(&name, &PatchParams::default(), &Patch::<()>::Json(patch))
        .await
        .map_err(|e| ReconcileError::kube(action, e))?;
    Ok(())
}
