//! The API Secret guard (SPEC §3.1 step 6): while a tunnel holding the finalizer references an
//! API Secret, the Secret carries `cfargotunnel.com/secret-in-use`, applied by SSA under its own
//! field manager touching only `metadata.finalizers`, so deleting a namespace cannot remove the
//! credentials a tunnel's cleanup needs.
use k8s_openapi::api::core::v1::Secret;
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use super::context::Context;
use super::core::ReconcileError;
use super::credentials::ApiSecret;
use crate::api::names::{FIELD_MANAGER_SECRET_GUARD, FINALIZER, FINALIZER_SECRET_IN_USE};
use crate::api::{ClusterTunnel, Tunnel};

/// The applied object; `resourceVersion` makes it a conditional update that never creates.
fn guard_object(
    namespace: &str,
    name: &str,
    resource_version: &str,
    hold: bool,
) -> serde_json::Value {
    let mut metadata = json!({
        "name": name,
        "namespace": namespace,
        "resourceVersion": resource_version,
    });
    if hold {
        metadata["finalizers"] = json!([FINALIZER_SECRET_IN_USE]);
    }
    json!({ "apiVersion": "v1", "kind": "Secret", "metadata": metadata })
}

async fn apply(
    ctx: &Context,
    namespace: &str,
    name: &str,
    rv: &str,
    hold: bool,
) -> Result<(), ReconcileError> {
    Api::<Secret>::namespaced(ctx.client.clone(), namespace)
        .patch(
            name,
            &PatchParams::apply(FIELD_MANAGER_SECRET_GUARD).force(),
            &Patch::Apply(guard_object(namespace, name, rv, hold)),
        )
        .await
        .map_err(|e| ReconcileError::kube("updating the API Secret guard", e))?;
    Ok(())
}

/// Puts the guard on the API Secret if it is not there yet.
pub async fn ensure(
    ctx: &Context,
    namespace: &str,
    name: &str,
    secret: &ApiSecret,
) -> Result<(), ReconcileError> {
    if secret
        .finalizers
        .iter()
        .any(|f| f == FINALIZER_SECRET_IN_USE)
    {
        return Ok(());
    }
    let rv = secret.resource_version.clone().unwrap_or_default();
    apply(ctx, namespace, name, &rv, true).await
}

/// Releases the guard when no tunnel holding the finalizer references the Secret any more.
/// Called after the caller's own finalizer is gone, from a fresh list (not a cache): of two
/// tunnels finishing together, the later one always sees the other gone and releases.
pub async fn release_if_unused(
    ctx: &Context,
    namespace: &str,
    name: &str,
) -> Result<(), ReconcileError> {
    let holds = |finalizers: &[String]| finalizers.iter().any(|f| f == FINALIZER);
    let tunnels = Api::<Tunnel>::namespaced(ctx.client.clone(), namespace)
        .list(&ListParams::default())
        .await
        .map_err(|e| ReconcileError::kube("listing Tunnels for the Secret guard", e))?;
    let mut in_use = tunnels
        .items
        .iter()
        .any(|t| holds(t.finalizers()) && t.spec.cloudflare.secret == name);
    if !in_use && namespace == ctx.options.cluster_resource_namespace {
        let cluster = Api::<ClusterTunnel>::all(ctx.client.clone())
            .list(&ListParams::default())
            .await
            .map_err(|e| ReconcileError::kube("listing ClusterTunnels for the Secret guard", e))?;
        in_use = cluster
            .items
            .iter()
            .any(|t| holds(t.finalizers()) && t.spec.cloudflare.secret == name);
    }
    if in_use {
        return Ok(());
    }
    let api = Api::<Secret>::namespaced(ctx.client.clone(), namespace);
    let Some(secret) = api
        .get_metadata_opt(name)
        .await
        .map_err(|e| ReconcileError::kube("reading the API Secret", e))?
    else {
        return Ok(());
    };
    if !secret
        .finalizers()
        .iter()
        .any(|f| f == FINALIZER_SECRET_IN_USE)
    {
        return Ok(());
    }
    let rv = secret.resource_version().unwrap_or_default();
    apply(ctx, namespace, name, &rv, false).await
}
