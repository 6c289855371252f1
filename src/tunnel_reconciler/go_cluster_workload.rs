//! The Go operator's workload of a ClusterTunnel (docs/design.md §7.3). The Go operator named a
//! ClusterTunnel's Deployment after the ClusterTunnel itself; cftunnel names it
//! `clustertunnel-<name>` (see [`ObjectNames::for_owner`]), so a Go Deployment cannot be re-created
//! in place the way a Tunnel's is ([`super::takeover`]). Instead it is retired: deleted once
//! cftunnel's own Deployment has an available replica, so the tunnel keeps a connector
//! throughout. The Go operator's same-named ConfigMap and Secret are left to the garbage
//! collector (they are owned by the ClusterTunnel): deleting them would need `delete` on every
//! Secret of the namespace, more than cftunnel otherwise needs. The check costs one GET of the
//! Go-named Deployment per ClusterTunnel reconcile (no Cloudflare call): the children watch that
//! triggers reconciles keeps no store to read it from.
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{DeleteParams, Preconditions, PropagationPolicy};
use kube::runtime::controller::Action;
use kube::{Api, ResourceExt};

use super::apply::controlled_by;
use crate::term::ReconcileError;
use crate::term::adapters::TunnelKindAdapter;
use crate::term::context::Context;
use crate::term::events;
use cftunnel_policy::render::{ObjectNames, OwnerIdentity};
use cftunnel_types::TunnelKind;

/// Event reasons on the ClusterTunnel.
pub(crate) const REASON_WAITING: &str = "WaitingToRetireGoDeployment";
pub(crate) const REASON_RETIRED: &str = "RetiredGoDeployment";

/// Fallback re-check while waiting for our replica (our Deployment's status changes also
/// trigger a reconcile through the children watch).
const WAIT_RECHECK: Duration = Duration::from_secs(30);

/// The Go operator's Deployment name for this owner; `None` for a Tunnel, whose Deployment has
/// the same name under both operators.
pub(crate) fn go_deployment_name(identity: &OwnerIdentity) -> Option<&str> {
    (identity.kind == TunnelKind::ClusterTunnel).then_some(identity.name.as_str())
}

/// What to do with a Go Deployment found under the Go name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Retirement {
    /// Absent, already being deleted, or not controlled by this ClusterTunnel (then it belongs
    /// to someone else, e.g. a same-named Tunnel in the cluster-resource namespace).
    Nothing,
    /// Ours has no available replica yet.
    Wait,
    /// Delete it (its uid, as a precondition).
    Delete(String),
}

/// Decides from the live Go-named Deployment and cftunnel's own.
pub fn decide(go: Option<&Deployment>, ours: Option<&Deployment>, owner_uid: &str) -> Retirement {
    let Some(go) = go else {
        return Retirement::Nothing;
    };
    if !controlled_by(&go.metadata, owner_uid) || go.metadata.deletion_timestamp.is_some() {
        return Retirement::Nothing;
    }
    let serving = ours.is_some_and(|d| {
        let scaled_to_zero = d.spec.replicas == Some(0);
        let available = d
            .status
            .as_ref()
            .and_then(|s| s.available_replicas)
            .unwrap_or(0);
        scaled_to_zero || available > 0
    });
    match (serving, go.uid()) {
        (true, Some(uid)) => Retirement::Delete(uid),
        _ => Retirement::Wait,
    }
}

/// After our objects are applied: retires the Go Deployment once ours serves. `Some(action)`
/// while waiting.
pub(crate) async fn retire<K: TunnelKindAdapter>(
    obj: &K,
    ctx: &Context,
    identity: &OwnerIdentity,
) -> Result<Option<Action>, ReconcileError> {
    let Some(go_name) = go_deployment_name(identity) else {
        return Ok(None);
    };
    let api: Api<Deployment> = Api::namespaced(ctx.client.clone(), &identity.namespace);
    let go = read(&api, go_name).await?;
    if go.is_none() {
        return Ok(None);
    }
    let ours_name = ObjectNames::for_owner(identity).workload;
    let ours = read(&api, &ours_name).await?;
    let namespace = &identity.namespace;
    match decide(go.as_ref(), ours.as_ref(), &identity.uid) {
        Retirement::Nothing => Ok(None),
        Retirement::Wait => {
            events::normal(
                ctx,
                obj,
                REASON_WAITING,
                format!(
                    "the Go operator's Deployment {namespace}/{go_name} keeps running until Deployment {namespace}/{ours_name} has an available replica"
                ),
            )
            .await;
            Ok(Some(Action::requeue(WAIT_RECHECK)))
        }
        Retirement::Delete(uid) => {
            delete(&api, go_name, uid, PropagationPolicy::Background).await?;
            events::normal(
                ctx,
                obj,
                REASON_RETIRED,
                format!(
                    "deleted the Go operator's Deployment {namespace}/{go_name}: Deployment {namespace}/{ours_name} serves this tunnel now; the Go operator's ConfigMap and Secret {namespace}/{go_name} go with this ClusterTunnel, or may be deleted now"
                ),
            )
            .await;
            Ok(None)
        }
    }
}

/// On deletion: the Go Deployment's pods must be gone before the tunnel is deleted too. `true`
/// while it still exists (deleted in the foreground, so it goes only after its pods).
pub(crate) async fn remove_for_deletion(
    ctx: &Context,
    identity: &OwnerIdentity,
) -> Result<bool, ReconcileError> {
    let Some(go_name) = go_deployment_name(identity) else {
        return Ok(false);
    };
    let api: Api<Deployment> = Api::namespaced(ctx.client.clone(), &identity.namespace);
    let Some(go) = read(&api, go_name).await? else {
        return Ok(false);
    };
    if !controlled_by(&go.metadata, &identity.uid) {
        return Ok(false);
    }
    if go.metadata.deletion_timestamp.is_none()
        && let Some(uid) = go.uid()
    {
        delete(&api, go_name, uid, PropagationPolicy::Foreground).await?;
    }
    Ok(true)
}

async fn read(api: &Api<Deployment>, name: &str) -> Result<Option<Deployment>, ReconcileError> {
    api.get_opt(name)
        .await
        .map_err(|e| ReconcileError::kube("reading the Go operator's Deployment", e))
}

async fn delete(
    api: &Api<Deployment>,
    name: &str,
    uid: String,
    policy: PropagationPolicy,
) -> Result<(), ReconcileError> {
    let params = DeleteParams {
        propagation_policy: Some(policy),
        preconditions: Some(Preconditions {
            uid: Some(uid),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match api.delete(name, &params).await {
        Ok(_) => Ok(()),
        // Gone already, or replaced by another object (the uid precondition failed).
        Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => Ok(()),
        Err(e) => Err(ReconcileError::kube(
            "deleting the Go operator's Deployment",
            e,
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const OWNER: &str = "5a0f-owner";

    fn deployment(owner: &str, replicas: i32, available: i32) -> Deployment {
        serde_json::from_value(json!({
            "metadata": {"name": "edge", "uid": "go-uid", "ownerReferences": [{
                "apiVersion": "networking.cfargotunnel.com/v1alpha2", "kind": "ClusterTunnel",
                "name": "edge", "uid": owner, "controller": true}]},
            "spec": {"replicas": replicas, "selector": {}, "template": {}},
            "status": {"availableReplicas": available},
        }))
        .unwrap_or_default()
    }

    #[test]
    fn only_a_clustertunnel_has_a_go_name_apart_from_ours() {
        let mut identity = OwnerIdentity {
            kind: TunnelKind::ClusterTunnel,
            namespace: "cftunnel-tunnels".into(),
            name: "edge".into(),
            uid: OWNER.into(),
        };
        assert_eq!(go_deployment_name(&identity), Some("edge"));
        identity.kind = TunnelKind::Tunnel;
        assert_eq!(go_deployment_name(&identity), None);
    }

    #[test]
    fn waits_until_ours_has_an_available_replica() {
        let go = deployment(OWNER, 1, 1);
        assert_eq!(decide(Some(&go), None, OWNER), Retirement::Wait);
        let starting = deployment(OWNER, 2, 0);
        assert_eq!(decide(Some(&go), Some(&starting), OWNER), Retirement::Wait);
        let serving = deployment(OWNER, 2, 1);
        assert_eq!(
            decide(Some(&go), Some(&serving), OWNER),
            Retirement::Delete("go-uid".into())
        );
    }

    #[test]
    fn ours_scaled_to_zero_does_not_wait_forever() {
        let go = deployment(OWNER, 1, 1);
        let zero = deployment(OWNER, 0, 0);
        assert_eq!(
            decide(Some(&go), Some(&zero), OWNER),
            Retirement::Delete("go-uid".into())
        );
    }

    #[test]
    fn another_owners_or_a_deleting_deployment_is_left_alone() {
        let serving = deployment(OWNER, 2, 1);
        let foreign = deployment("someone-else", 1, 1);
        assert_eq!(
            decide(Some(&foreign), Some(&serving), OWNER),
            Retirement::Nothing
        );
        let mut deleting = deployment(OWNER, 1, 1);
        deleting.metadata.deletion_timestamp =
            serde_json::from_value(json!("2026-01-01T00:00:00Z")).ok();
        assert_eq!(
            decide(Some(&deleting), Some(&serving), OWNER),
            Retirement::Nothing
        );
        assert_eq!(decide(None, Some(&serving), OWNER), Retirement::Nothing);
    }
}
