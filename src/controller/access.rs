//! The AccessTunnel reconciler: renders the `cloudflared access` Deployment, its Service, PDB
//! and ServiceAccount (`render::access`) and applies them with server-side apply; a change of
//! the service token Secret rolls the pods through the pod-template checksum. Deletion is left
//! to the garbage collector (every object carries a controller reference). No Cloudflare call.
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Secret, Service, ServiceAccount};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{PartialObjectMeta, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Api, ResourceExt};
use serde_json::json;

use super::apply::ensure_controlled;
use super::conditions::{ReadyReason, find_ready, ready_condition, with_ready};
use super::context::Context;
use crate::api::access::AccessTunnel;
use crate::api::names::FIELD_MANAGER;
use crate::render::access::{render_access, token_checksum};

const RETRY: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct AccessError(String);

/// Runs until the term's scope, which spawned it, is cancelled.
pub async fn run(ctx: Arc<Context>) {
    let client = ctx.client.clone();
    let (tunnels, deployments, secrets): (
        Api<AccessTunnel>,
        Api<Deployment>,
        Api<PartialObjectMeta<Secret>>,
    ) = match ctx.scope.namespace.as_deref() {
        Some(ns) => (
            Api::namespaced(client.clone(), ns),
            Api::namespaced(client.clone(), ns),
            Api::namespaced(client.clone(), ns),
        ),
        None => (
            Api::all(client.clone()),
            Api::all(client.clone()),
            Api::all(client.clone()),
        ),
    };
    let mut config = watcher::Config::default();
    if let Some(selector) = &ctx.scope.label_selector {
        config = config.labels(selector);
    }
    let controller = Controller::new(tunnels, config);
    let store = controller.store();
    controller
        .owns(
            deployments,
            watcher::Config::default().labels(crate::render::access::LABEL_ACCESS_TUNNEL),
        )
        .watches(secrets, watcher::Config::default(), move |secret| {
            let namespace = secret.namespace();
            let name = secret.name_any();
            store
                .state()
                .iter()
                .filter(|at| {
                    at.namespace() == namespace
                        && at
                            .spec
                            .service_token
                            .as_ref()
                            .is_some_and(|t| t.secret_ref == name)
                })
                .map(|at| ObjectRef::from_obj(at.as_ref()))
                .collect::<Vec<_>>()
        })
        .run(reconcile, error_policy, ctx)
        .for_each(|_| async {})
        .await;
}

fn error_policy(_: Arc<AccessTunnel>, error: &AccessError, _: Arc<Context>) -> Action {
    tracing::warn!(%error, "AccessTunnel not reconciled");
    Action::requeue(RETRY)
}

async fn reconcile(at: Arc<AccessTunnel>, ctx: Arc<Context>) -> Result<Action, AccessError> {
    if at.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    match converge(&at, &ctx).await {
        Ok(message) => {
            set_ready(&at, &ctx, ReadyReason::Ready, &message).await?;
            Ok(Action::await_change())
        }
        Err((reason, message)) => {
            set_ready(&at, &ctx, reason, &message).await?;
            Ok(Action::requeue(RETRY))
        }
    }
}

async fn converge(at: &AccessTunnel, ctx: &Context) -> Result<String, (ReadyReason, String)> {
    let namespace = at.namespace().unwrap_or_default();
    if let Some(message) = crate::admission::access::validate(&at.spec).denial_message() {
        return Err((ReadyReason::InvalidSpec, message));
    }
    let checksum = match &at.spec.service_token {
        None => String::new(),
        Some(token) => {
            let secret = Api::<Secret>::namespaced(ctx.client.clone(), &namespace)
                .get_opt(&token.secret_ref)
                .await
                .map_err(|e| {
                    (
                        ReadyReason::KubernetesError,
                        format!("reading the service token Secret: {e}"),
                    )
                })?
                .ok_or_else(|| {
                    (
                        ReadyReason::SecretNotFound,
                        format!(
                            "Secret {namespace}/{} named by serviceToken.secretRef does not exist",
                            token.secret_ref
                        ),
                    )
                })?;
            let data = secret.data.unwrap_or_default();
            let value = |key: &str| {
                data.get(key).map(|v| v.0.clone()).ok_or_else(|| {
                    (
                        ReadyReason::SecretKeyMissing,
                        format!("Secret {namespace}/{} has no key {key}", token.secret_ref),
                    )
                })
            };
            token_checksum(&value(token.id_key())?, &value(token.secret_key())?)
        }
    };
    let rendered = render_access(at, &ctx.options.cloudflared_image, &checksum)
        .map_err(|e| (ReadyReason::RenderFailed, e.to_string()))?;
    let client = &ctx.client;
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let name = |v: &serde_json::Value| v["metadata"]["name"].as_str().unwrap_or("").to_string();
    // Never apply over an object this AccessTunnel does not control (a Tunnel of the same name
    // owns a Deployment and PDB of that name). Those the Go operator made for this object are
    // controlled by it and taken over in place.
    let uid = at.uid().unwrap_or_default();
    let owner = format!("AccessTunnel {namespace}/{}", at.name_any());
    let conflict = |e: super::core::ReconcileError| (e.reason(), e.to_string());
    ensure_controlled::<ServiceAccount>(
        ctx,
        &namespace,
        &name(&rendered.service_account),
        &uid,
        &owner,
    )
    .await
    .map_err(conflict)?;
    ensure_controlled::<Deployment>(ctx, &namespace, &name(&rendered.deployment), &uid, &owner)
        .await
        .map_err(conflict)?;
    ensure_controlled::<Service>(ctx, &namespace, &name(&rendered.service), &uid, &owner)
        .await
        .map_err(conflict)?;
    ensure_controlled::<PodDisruptionBudget>(ctx, &namespace, &name(&rendered.pdb), &uid, &owner)
        .await
        .map_err(conflict)?;
    let kube_error = |what: &str, e: kube::Error| {
        (
            ReadyReason::KubernetesError,
            format!("applying the {what}: {e}"),
        )
    };
    Api::<ServiceAccount>::namespaced(client.clone(), &namespace)
        .patch(
            &name(&rendered.service_account),
            &params,
            &Patch::Apply(&rendered.service_account),
        )
        .await
        .map_err(|e| kube_error("ServiceAccount", e))?;
    Api::<Deployment>::namespaced(client.clone(), &namespace)
        .patch(
            &name(&rendered.deployment),
            &params,
            &Patch::Apply(&rendered.deployment),
        )
        .await
        .map_err(|e| kube_error("Deployment", e))?;
    Api::<Service>::namespaced(client.clone(), &namespace)
        .patch(
            &name(&rendered.service),
            &params,
            &Patch::Apply(&rendered.service),
        )
        .await
        .map_err(|e| kube_error("Service", e))?;
    Api::<PodDisruptionBudget>::namespaced(client.clone(), &namespace)
        .patch(&name(&rendered.pdb), &params, &Patch::Apply(&rendered.pdb))
        .await
        .map_err(|e| kube_error("PodDisruptionBudget", e))?;
    let port = rendered.service["spec"]["ports"][0]["port"]
        .as_i64()
        .unwrap_or_default();
    Ok(format!(
        "cloudflared access {} to {} is reachable at Service {}:{port}",
        at.spec.target.protocol(),
        at.spec.target.fqdn,
        name(&rendered.service)
    ))
}

async fn set_ready(
    at: &AccessTunnel,
    ctx: &Context,
    reason: ReadyReason,
    message: &str,
) -> Result<(), AccessError> {
    let conditions = at.status.as_ref().and_then(|s| s.conditions.as_ref());
    let previous = find_ready(conditions);
    let generation = at.metadata.generation;
    if previous.is_some_and(|p| p.reason == reason.as_str() && p.message == message)
        && at.status.as_ref().and_then(|s| s.observed_generation) == generation
    {
        return Ok(());
    }
    let now = Time(jiff::Timestamp::now());
    let condition = ready_condition(previous, reason, message, generation, now);
    let status = json!({"status": {
        "observedGeneration": generation,
        "conditions": with_ready(conditions, condition),
    }});
    Api::<AccessTunnel>::namespaced(ctx.client.clone(), &at.namespace().unwrap_or_default())
        .patch_status(
            &at.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&status),
        )
        .await
        .map_err(|e| AccessError(format!("writing the status: {e}")))?;
    Ok(())
}
