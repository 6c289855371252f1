//! The API Secret guard (docs/design.md §3.1 step 6): while a tunnel holding the finalizer references an
//! API Secret, the Secret carries `cfargotunnel.com/secret-in-use`, applied by SSA under its own
//! field manager touching only `metadata.finalizers`, so deleting a namespace cannot remove the
//! credentials a tunnel's cleanup needs. Server-side apply removes only what its own manager
//! set: a release never strips a `secret-in-use` finalizer written by anyone else.
//!
//! A release runs after the tunnel's own finalizer is gone, so the tunnel cannot be requeued if it
//! fails: [`release_later`] retries it with backoff in the background, and [`sweep`] releases, at
//! start-up, guards left behind by a process that stopped between the two steps. A guard released
//! by mistake (a race with a tunnel adding its finalizer) comes back at once: the Secret's change
//! re-runs the tunnels that name it, and their reconcile puts the guard back.
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use crate::term::ReconcileError;
use crate::term::context::Context;
use crate::term::credentials::ApiSecret;
use cftunnel_types::names::{FIELD_MANAGER_SECRET_GUARD, FINALIZER, FINALIZER_SECRET_IN_USE};
use cftunnel_types::{ClusterTunnel, Tunnel};

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
) -> Result<(), kube::Error> {
    Api::<Secret>::namespaced(ctx.client.clone(), namespace)
        .patch(
            name,
            &PatchParams::apply(FIELD_MANAGER_SECRET_GUARD).force(),
            &Patch::Apply(guard_object(namespace, name, rv, hold)),
        )
        .await?;
    Ok(())
}

/// Reads of the Secret after a conflicting guard write, before the reconcile gives up and is
/// requeued. The tunnels of a namespace usually share one API Secret: on a first sync they all
/// find it unguarded and race to put the same guard on, and all but one meet a conflict.
const GUARD_CONFLICT_REREADS: usize = 3;

fn guarded(finalizers: &[String]) -> bool {
    finalizers.iter().any(|f| f == FINALIZER_SECRET_IN_USE)
}

/// Puts the guard on the API Secret if it is not there yet. A conflict (the Secret changed
/// since it was read, most often because another tunnel just guarded it) is answered by
/// reading it again: already guarded is done, otherwise the write is retried on the new
/// version, up to [`GUARD_CONFLICT_REREADS`] times.
pub(crate) async fn ensure(
    ctx: &Context,
    namespace: &str,
    name: &str,
    secret: &ApiSecret,
) -> Result<(), ReconcileError> {
    if guarded(&secret.finalizers) {
        return Ok(());
    }
    let mut rv = secret.resource_version.clone().unwrap_or_default();
    let mut rereads = 0;
    loop {
        match apply(ctx, namespace, name, &rv, true).await {
            Err(kube::Error::Api(status))
                if status.is_conflict() && rereads < GUARD_CONFLICT_REREADS =>
            {
                rereads += 1;
                let api = Api::<Secret>::namespaced(ctx.client.clone(), namespace);
                let now = api
                    .get_metadata_opt(name)
                    .await
                    .map_err(|e| ReconcileError::kube("reading the API Secret", e))?;
                match now {
                    Some(now) if guarded(now.finalizers()) => return Ok(()),
                    Some(now) => rv = now.resource_version().unwrap_or_default(),
                    // Gone meanwhile: the next read of the credentials says so.
                    None => return Ok(()),
                }
            }
            result => {
                return result
                    .map_err(|e| ReconcileError::kube("updating the API Secret guard", e));
            }
        }
    }
}

/// Releases the guard when no tunnel holding the finalizer references the Secret any more.
/// Called after the caller's own finalizer is gone, from a fresh list (not a cache): of two
/// tunnels finishing together, the later one always sees the other gone and releases.
pub(crate) async fn release_if_unused(
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
    if !guarded(secret.finalizers()) {
        return Ok(());
    }
    let rv = secret.resource_version().unwrap_or_default();
    apply(ctx, namespace, name, &rv, false)
        .await
        .map_err(|e| ReconcileError::kube("updating the API Secret guard", e))
}

/// Releases the guard of every guarded Secret of `namespace` but `keep` that no tunnel holding
/// the finalizer names any more: an object's API Secret was renamed (or a release was lost).
/// Reads Secret metadata only.
pub(crate) async fn release_others(
    ctx: &Context,
    namespace: &str,
    keep: &str,
) -> Result<(), ReconcileError> {
    let secrets = Api::<Secret>::namespaced(ctx.client.clone(), namespace)
        .list_metadata(&ListParams::default())
        .await
        .map_err(|e| ReconcileError::kube("listing Secrets for the guard", e))?;
    for secret in secrets.items {
        let name = secret.name_any();
        let guarded = secret
            .finalizers()
            .iter()
            .any(|f| f == FINALIZER_SECRET_IN_USE);
        if guarded && name != keep {
            release_if_unused(ctx, namespace, &name).await?;
        }
    }
    Ok(())
}

/// First and largest wait of [`release_later`].
const RETRY_FIRST: Duration = Duration::from_secs(1);
const RETRY_MAX: Duration = Duration::from_secs(300);

/// The wait before retry `attempt` (0-based): doubling from one second, at most five minutes.
fn retry_delay(attempt: u32) -> Duration {
    RETRY_FIRST
        .saturating_mul(2u32.saturating_pow(attempt.min(16)))
        .min(RETRY_MAX)
}

/// Retries a failed release in the background until it succeeds.
pub(crate) fn release_later(ctx: Arc<Context>, namespace: String, name: String) {
    let term = ctx.term.clone();
    term.spawn("secret-guard-release", async move {
        let mut attempt = 0;
        loop {
            tokio::time::sleep(retry_delay(attempt)).await;
            match release_if_unused(&ctx, &namespace, &name).await {
                Ok(()) => {
                    tracing::info!(secret = %format!("{namespace}/{name}"), "API Secret guard released after a retry");
                    return;
                }
                Err(error) => {
                    tracing::warn!(secret = %format!("{namespace}/{name}"), %error, attempt, "API Secret guard release failed; retrying");
                    attempt = attempt.saturating_add(1);
                }
            }
        }
    });
}

/// At start-up: every guarded Secret of `namespace` (`None`: all namespaces) that no tunnel
/// holding the finalizer names any more is released. Reads metadata only.
pub async fn sweep(ctx: Arc<Context>, namespace: Option<String>) {
    let api: Api<Secret> = match &namespace {
        Some(ns) => Api::namespaced(ctx.client.clone(), ns),
        None => Api::all(ctx.client.clone()),
    };
    let secrets = match api.list_metadata(&ListParams::default()).await {
        Ok(list) => list.items,
        Err(error) => {
            tracing::warn!(%error, "listing Secrets for the guard sweep failed; guards are released as tunnels go");
            return;
        }
    };
    for secret in secrets {
        if !guarded(secret.finalizers()) {
            continue;
        }
        let (ns, name) = (secret.namespace().unwrap_or_default(), secret.name_any());
        if let Err(error) = release_if_unused(&ctx, &ns, &name).await {
            tracing::warn!(secret = %format!("{ns}/{name}"), %error, "API Secret guard sweep failed; retrying");
            release_later(ctx.clone(), ns, name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_double_from_one_second_up_to_five_minutes() {
        let waits: Vec<u64> = (0..12).map(|a| retry_delay(a).as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300]);
        assert_eq!(retry_delay(u32::MAX), RETRY_MAX);
    }

    #[test]
    fn the_guard_object_holds_or_clears_only_the_finalizer() {
        let held = guard_object("ns", "api", "7", true);
        assert_eq!(
            held["metadata"]["finalizers"],
            json!([FINALIZER_SECRET_IN_USE])
        );
        assert_eq!(held["metadata"]["resourceVersion"], "7");
        let released = guard_object("ns", "api", "8", false);
        assert!(released["metadata"].get("finalizers").is_none());
        assert!(released.get("data").is_none());
    }
}
