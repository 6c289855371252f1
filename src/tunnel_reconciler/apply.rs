//! Server-side apply of the managed objects under the `cftunnel` field manager, never over an
//! object this tunnel does not control (docs/design.md §3.1 step 5). An unchanged render is a no-op apply,
//! which the API server does not persist, so no resourceVersion moves.
use std::fmt::Debug;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, ServiceAccount};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Patch, PatchParams};
use kube::core::PartialObjectMeta;
use kube::{Api, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::PENDING_SECRET_KEY;
use super::takeover;
use crate::term::ReconcileError;
use crate::term::conditions::ReadyReason;
use crate::term::context::Context;
use cftunnel_policy::render::labels::selector_labels;
use cftunnel_policy::render::objects::owner_reference;
use cftunnel_policy::render::{ObjectNames, OwnerIdentity, RenderError, Rendered};
use cftunnel_types::names::FIELD_MANAGER;

/// A namespaced kind whose objects cftunnel applies and reads back.
pub(crate) trait ManagedKind:
    Resource<DynamicType = (), Scope = NamespaceResourceScope> + Clone + Debug + DeserializeOwned
{
}

impl<K> ManagedKind for K where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + Debug
        + DeserializeOwned
{
}

/// Fails with `NameConflict` when `name` exists and is not controlled by the object `uid`.
pub(crate) async fn ensure_controlled<K>(
    ctx: &Context,
    namespace: &str,
    name: &str,
    uid: &str,
    owner: &str,
) -> Result<(), ReconcileError>
where
    K: ManagedKind,
{
    let api: Api<K> = Api::namespaced(ctx.client.clone(), namespace);
    let live: Option<PartialObjectMeta<K>> = api
        .get_metadata_opt(name)
        .await
        .map_err(|e| ReconcileError::kube("reading a managed object", e))?;
    let Some(live) = live else {
        return Ok(());
    };
    if controlled_by(&live.metadata, uid) {
        return Ok(());
    }
    Err(ReconcileError::blocked(
        ReadyReason::NameConflict,
        format!(
            "{} {namespace}/{name} already exists and is not controlled by {owner}; rename or remove it",
            K::kind(&())
        ),
    ))
}

async fn apply<K>(
    ctx: &Context,
    namespace: &str,
    name: &str,
    object: &Value,
) -> Result<(), ReconcileError>
where
    K: ManagedKind,
{
    let api: Api<K> = Api::namespaced(ctx.client.clone(), namespace);
    api.patch(
        name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(object),
    )
    .await
    .map_err(|e| ReconcileError::kube("applying a managed object", e))?;
    Ok(())
}

/// Deletes `name` when the object `uid` controls it; another's, or none, is left alone.
async fn delete_if_controlled<K>(
    ctx: &Context,
    namespace: &str,
    name: &str,
    uid: &str,
) -> Result<(), ReconcileError>
where
    K: ManagedKind,
{
    let api: Api<K> = Api::namespaced(ctx.client.clone(), namespace);
    let live = api
        .get_metadata_opt(name)
        .await
        .map_err(|e| ReconcileError::kube("reading a managed object", e))?;
    if live.is_some_and(|l| controlled_by(&l.metadata, uid)) {
        match api.delete(name, &Default::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.is_not_found() => {}
            Err(e) => return Err(ReconcileError::kube("deleting a managed object", e)),
        }
    }
    Ok(())
}

fn to_json<T: Serialize>(object: &T) -> Result<Value, ReconcileError> {
    serde_json::to_value(object).map_err(|e| RenderError::Encode(e.to_string()).into())
}

/// Checks every name first, then applies in order: Secret and ConfigMap before the Deployment.
pub(crate) async fn apply_all(
    ctx: &Context,
    namespace: &str,
    uid: &str,
    owner: &str,
    rendered: &Rendered,
) -> Result<(), ReconcileError> {
    let name = |value: &Value| {
        value
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let sa = to_json(&rendered.service_account)?;
    let secret = to_json(&rendered.secret)?;
    let cm = rendered.config_map.as_ref().map(to_json).transpose()?;
    let pdb = to_json(&rendered.pdb)?;
    let deployment = &rendered.deployment;
    ensure_controlled::<ServiceAccount>(ctx, namespace, &name(&sa), uid, owner).await?;
    ensure_controlled::<Secret>(ctx, namespace, &name(&secret), uid, owner).await?;
    if let Some(cm) = &cm {
        ensure_controlled::<ConfigMap>(ctx, namespace, &name(cm), uid, owner).await?;
    }
    ensure_controlled::<Deployment>(ctx, namespace, &name(deployment), uid, owner).await?;
    ensure_controlled::<PodDisruptionBudget>(ctx, namespace, &name(&pdb), uid, owner).await?;
    apply::<ServiceAccount>(ctx, namespace, &name(&sa), &sa).await?;
    apply::<Secret>(ctx, namespace, &name(&secret), &secret).await?;
    if let Some(cm) = &cm {
        apply::<ConfigMap>(ctx, namespace, &name(cm), cm).await?;
    }
    let took_over =
        takeover::prepare_deployment(ctx, namespace, &name(deployment), deployment).await?;
    apply::<Deployment>(ctx, namespace, &name(deployment), deployment).await?;
    if cm.is_none() {
        // Switched to `configSource: Cloudflare`: no pod reads a config.yaml any more.
        delete_if_controlled::<ConfigMap>(ctx, namespace, &name(deployment), uid).await?;
    }
    if let Some(note) = took_over {
        takeover::record(ctx, namespace, deployment, note).await;
    }
    apply::<PodDisruptionBudget>(ctx, namespace, &name(&pdb), &pdb).await?;
    Ok(())
}

/// The managed Secret holding only the pending tunnel secret (before the tunnel exists).
pub(crate) async fn apply_pending_secret(
    ctx: &Context,
    identity: &OwnerIdentity,
    secret_b64: &str,
) -> Result<(), ReconcileError> {
    let names = ObjectNames::for_owner(identity);
    let labels = selector_labels(identity.kind, &identity.name)
        .ok_or_else(|| RenderError::InvalidName(identity.name.clone()))?;
    let object = json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": names.workload,
            "namespace": identity.namespace,
            "labels": labels,
            "ownerReferences": [owner_reference(identity)],
        },
        "type": "Opaque",
        "data": { PENDING_SECRET_KEY: STANDARD.encode(secret_b64) },
    });
    apply::<Secret>(ctx, &identity.namespace, &names.workload, &object).await
}

pub use cftunnel_policy::render::objects::controlled_by;
