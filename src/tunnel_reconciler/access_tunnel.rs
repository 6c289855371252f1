//! The AccessTunnel reconciler: renders the `cloudflared access` Deployment, its Service, PDB
//! and ServiceAccount (`render::access_tunnel`) and applies them with server-side apply; a change of
//! the service token Secret rolls the pods through the pod-template checksum. Deletion is left
//! to the garbage collector (every object carries a controller reference). No Cloudflare call.
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Secret, Service, ServiceAccount};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

use super::apply::ensure_controlled;
use crate::caches::TermCaches;
use crate::term::conditions::{ReadyReason, find_ready, ready_condition, with_ready};
use crate::term::context::Context;
use cftunnel_policy::render::access_tunnel::{render_access, token_checksum};
use cftunnel_types::access_tunnel::AccessTunnel;
use cftunnel_types::names::FIELD_MANAGER;

const RETRY: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct AccessError(String);

/// Runs until the term's scope, which spawned it, is cancelled. Its Deployments and Secrets
/// come from the term's shared caches (`children`; the first entry of each is the watched
/// namespace): the AccessTunnels are the only watch of its own.
pub async fn run(ctx: Arc<Context>, children: TermCaches) {
    let client = ctx.client.clone();
    let tunnels: Api<AccessTunnel> = match ctx.scope.namespace.as_deref() {
        Some(ns) => Api::namespaced(client, ns),
        None => Api::all(client),
    };
    let mut config = watcher::Config::default();
    if let Some(selector) = &ctx.scope.label_selector {
        config = config.labels(selector);
    }
    let controller = Controller::new(tunnels, config);
    let store = controller.store();
    let deployments = children.deployments.first().map(|d| d.changes().boxed());
    let secrets = children.secrets.first().map(|s| s.changes().boxed());
    controller
        .watches_shared_stream(futures::stream::iter(deployments).flatten(), |deployment| {
            let name =
                crate::term::adapters::controller_named(&deployment.metadata, "AccessTunnel")?;
            Some(ObjectRef::new(&name).within(&deployment.namespace()?))
        })
        .watches_shared_stream(futures::stream::iter(secrets).flatten(), move |secret| {
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
    if let Some(message) =
        cftunnel_policy::admission::access_tunnel::validate(&at.spec).denial_message()
    {
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
    // Never apply over an object this AccessTunnel does not control (a Tunnel of the same name
    // owns a Deployment and PDB of that name). Those the Go operator made for this object are
    // controlled by it and taken over in place. The objects are exactly those `cftunnel render`
    // prints for the object.
    let uid = at.uid().unwrap_or_default();
    let owner = format!("AccessTunnel {namespace}/{}", at.name_any());
    for object in rendered.objects() {
        on_kind(
            ctx,
            &namespace,
            object,
            Step::EnsureControlled(&uid, &owner),
        )
        .await?;
    }
    for object in rendered.objects() {
        on_kind(ctx, &namespace, object, Step::Apply).await?;
    }
    let port = rendered.service["spec"]["ports"][0]["port"]
        .as_i64()
        .unwrap_or_default();
    Ok(format!(
        "cloudflared access {} to {} is reachable at Service {}:{port}",
        at.spec.target.protocol(),
        at.spec.target.fqdn,
        rendered.service["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
    ))
}

/// What [`on_kind`] does with one rendered object.
enum Step<'a> {
    /// Fail with `NameConflict` unless the object is absent or controlled by (uid, owner).
    EnsureControlled(&'a str, &'a str),
    /// Server-side apply as cftunnel's field manager.
    Apply,
}

/// Runs `step` on `object` with the typed API of its kind.
async fn on_kind(
    ctx: &Context,
    namespace: &str,
    object: &Value,
    step: Step<'_>,
) -> Result<(), (ReadyReason, String)> {
    match object["kind"].as_str().unwrap_or_default() {
        "ServiceAccount" => on::<ServiceAccount>(ctx, namespace, object, step).await,
        "Deployment" => on::<Deployment>(ctx, namespace, object, step).await,
        "Service" => on::<Service>(ctx, namespace, object, step).await,
        "PodDisruptionBudget" => on::<PodDisruptionBudget>(ctx, namespace, object, step).await,
        other => Err((
            ReadyReason::RenderFailed,
            format!("rendered an object of unexpected kind {other:?}"),
        )),
    }
}

async fn on<K>(
    ctx: &Context,
    namespace: &str,
    object: &Value,
    step: Step<'_>,
) -> Result<(), (ReadyReason, String)>
where
    K: kube::Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned,
{
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    match step {
        Step::EnsureControlled(uid, owner) => {
            ensure_controlled::<K>(ctx, namespace, name, uid, owner)
                .await
                .map_err(|e| (e.reason(), e.to_string()))
        }
        Step::Apply => {
            Api::<K>::namespaced(ctx.client.clone(), namespace)
                .patch(
                    name,
                    &PatchParams::apply(FIELD_MANAGER).force(),
                    &Patch::Apply(object),
                )
                .await
                .map_err(|e| {
                    (
                        ReadyReason::KubernetesError,
                        format!("applying the {}: {e}", K::kind(&())),
                    )
                })?;
            Ok(())
        }
    }
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
    tracing::info!(
        accesstunnel = %format!("{}/{}", at.namespace().unwrap_or_default(), at.name_any()),
        reason = reason.as_str(),
        %message,
        "AccessTunnel Ready changed"
    );
    Ok(())
}
