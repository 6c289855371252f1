//! Takeover of a Deployment written by the Go operator (docs/design.md §7.3): its selector is immutable
//! and carries spec-dependent labels, and its field manager's values (probes, user id) must not
//! survive, so it is deleted with `propagationPolicy=Orphan` and re-created by the next apply.
use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{DeleteParams, Preconditions, PropagationPolicy};
use kube::runtime::events::{Event, EventType};
use kube::{Api, ResourceExt};
use serde_json::Value;

use crate::term::ReconcileError;
use crate::term::conditions::ReadyReason;
use crate::term::context::Context;

/// Field manager of the Go `cloudflare-operator`.
pub(crate) const GO_FIELD_MANAGER: &str = "cloudflare-operator";

/// Event reason recorded on the tunnel object when its Deployment was taken over.
pub(crate) const REASON_TOOK_OVER: &str = "TookOverDeployment";

/// How long one reconcile waits for the garbage collector to orphan the old ReplicaSets.
const GONE_WAIT: Duration = Duration::from_secs(60);
const GONE_POLL: Duration = Duration::from_millis(250);

/// Why a live Deployment cannot simply receive our apply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum TakeoverCause {
    /// Its selector differs from ours (the API refuses to change it).
    Selector(BTreeMap<String, String>),
    /// Its selector is ours but the Go operator's field manager still owns fields.
    GoManager,
}

/// Decides whether a live Deployment controlled by this tunnel needs a takeover.
pub(crate) fn takeover_cause(live: &Deployment, rendered: &Value) -> Option<TakeoverCause> {
    let wanted: BTreeMap<String, String> = rendered
        .pointer("/spec/selector/matchLabels")
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or_default();
    let selector = &live.spec.selector;
    let labels = selector.match_labels.clone().unwrap_or_default();
    let has_expressions = selector
        .match_expressions
        .as_ref()
        .is_some_and(|e| !e.is_empty());
    if labels != wanted || has_expressions {
        return Some(TakeoverCause::Selector(labels));
    }
    let go_owned = live
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .any(|m| m.manager.as_deref() == Some(GO_FIELD_MANAGER));
    go_owned.then_some(TakeoverCause::GoManager)
}

/// Makes room for our apply of the Deployment `name`; returns the event note when it took over.
///
/// Called only once the Deployment is known to be controlled by this tunnel (or absent).
pub(crate) async fn prepare_deployment(
    ctx: &Context,
    namespace: &str,
    name: &str,
    rendered: &Value,
) -> Result<Option<String>, ReconcileError> {
    let api: Api<Deployment> = Api::namespaced(ctx.client.clone(), namespace);
    let Some(live) = api
        .get_opt(name)
        .await
        .map_err(|e| ReconcileError::kube("reading the Deployment", e))?
    else {
        return Ok(None);
    };
    if live.metadata.deletion_timestamp.is_some() {
        // An earlier takeover (or a user) is deleting it: apply only once it is gone.
        wait_gone(&api, namespace, name).await?;
        return Ok(None);
    }
    let Some(cause) = takeover_cause(&live, rendered) else {
        return Ok(None);
    };
    let params = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Orphan),
        preconditions: Some(Preconditions {
            uid: live.uid(),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match api.delete(name, &params).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 404 => {}
        Err(e) => {
            return Err(ReconcileError::kube(
                "deleting the Deployment to take it over",
                e,
            ));
        }
    }
    wait_gone(&api, namespace, name).await?;
    let why = match cause {
        TakeoverCause::Selector(old) => format!(
            "its immutable selector {} differs from ours",
            old.iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(",")
        ),
        TakeoverCause::GoManager => format!("fields were owned by the {GO_FIELD_MANAGER} manager"),
    };
    Ok(Some(format!(
        "Deployment {namespace}/{name}: {why}; deleted it with propagationPolicy=Orphan (its ReplicaSets and pods keep running) and re-created it"
    )))
}

/// Waits (bounded) until the Deployment is gone; the garbage collector first orphans its
/// ReplicaSets, then removes the `orphan` finalizer.
async fn wait_gone(
    api: &Api<Deployment>,
    namespace: &str,
    name: &str,
) -> Result<(), ReconcileError> {
    let deadline = tokio::time::Instant::now() + GONE_WAIT;
    loop {
        let live = api
            .get_metadata_opt(name)
            .await
            .map_err(|e| ReconcileError::kube("waiting for the old Deployment to go", e))?;
        if live.is_none() {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(ReconcileError::blocked(
                ReadyReason::KubernetesError,
                format!(
                    "Deployment {namespace}/{name} is being deleted (orphaning its ReplicaSets); waiting before re-creating it"
                ),
            ));
        }
        tokio::time::sleep(GONE_POLL).await;
    }
}

/// Records the takeover on the tunnel object named by the rendered controller reference.
pub async fn record(ctx: &Context, namespace: &str, rendered: &Value, note: String) {
    let owner = rendered
        .pointer("/metadata/ownerReferences/0")
        .cloned()
        .unwrap_or_default();
    let field = |key: &str| owner.get(key).and_then(Value::as_str).map(str::to_string);
    let kind = field("kind");
    let reference = ObjectReference {
        api_version: field("apiVersion"),
        // A ClusterTunnel is cluster-scoped; a Tunnel lives beside its Deployment.
        namespace: (kind.as_deref() == Some("Tunnel")).then(|| namespace.to_string()),
        kind,
        name: field("name"),
        uid: field("uid"),
        ..ObjectReference::default()
    };
    let event = Event {
        type_: EventType::Normal,
        reason: REASON_TOOK_OVER.to_string(),
        note: Some(note),
        action: "Reconcile".to_string(),
        secondary: None,
    };
    if let Err(error) = ctx.recorder.publish(&event, &reference).await {
        tracing::warn!(%error, reason = REASON_TOOK_OVER, "event not recorded");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
    use serde_json::json;

    fn live(selector: Value, manager: &str) -> Deployment {
        let mut d: Deployment = serde_json::from_value(json!({
            "metadata": {"name": "web"},
            "spec": {"selector": {"matchLabels": selector}, "template": {}},
        }))
        .unwrap_or_default();
        d.metadata.managed_fields = Some(vec![ManagedFieldsEntry {
            manager: Some(manager.to_string()),
            ..ManagedFieldsEntry::default()
        }]);
        d
    }

    fn rendered() -> Value {
        json!({"spec": {"selector": {"matchLabels": {"a": "1", "b": "2"}}}})
    }

    #[test]
    fn ours_needs_nothing() {
        let d = live(json!({"a": "1", "b": "2"}), "cftunnel");
        assert_eq!(takeover_cause(&d, &rendered()), None);
    }

    #[test]
    fn other_selector_is_taken_over() {
        let d = live(json!({"a": "1", "b": "2", "id": "x"}), "cftunnel");
        let expected = BTreeMap::from([
            ("a".to_string(), "1".to_string()),
            ("b".to_string(), "2".to_string()),
            ("id".to_string(), "x".to_string()),
        ]);
        assert_eq!(
            takeover_cause(&d, &rendered()),
            Some(TakeoverCause::Selector(expected))
        );
    }

    #[test]
    fn go_manager_with_our_selector_is_taken_over() {
        let d = live(json!({"a": "1", "b": "2"}), GO_FIELD_MANAGER);
        assert_eq!(
            takeover_cause(&d, &rendered()),
            Some(TakeoverCause::GoManager)
        );
    }
}
