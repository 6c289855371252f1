//! Which objects are cloudflared workloads, where their pod spec lives, and who manages them.
use serde_json::Value;

use super::MutateError;
use cftunnel_types::names::{APP_CLOUDFLARED, GROUP, LABEL_APP, LABEL_TUNNEL};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum WorkloadKind {
    Deployment,
    DaemonSet,
    Pod,
}

impl WorkloadKind {
    /// JSON pointer of the PodSpec inside the object.
    pub(super) fn pod_spec_pointer(self) -> &'static str {
        match self {
            WorkloadKind::Deployment | WorkloadKind::DaemonSet => "/spec/template/spec",
            WorkloadKind::Pod => "/spec",
        }
    }
}

/// A labelled cloudflared workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Workload {
    pub(super) kind: WorkloadKind,
    /// Rendered by the reconciler of a Tunnel/ClusterTunnel, the only writer of its checksum.
    pub(super) tunnel_controlled: bool,
}

impl Workload {
    /// None when the object does not carry `cfargotunnel.com/app=cloudflared` (not ours to touch).
    pub(super) fn classify(object: &Value) -> Result<Option<Workload>, MutateError> {
        let object = object.as_object().ok_or(MutateError::NotAnObject)?;
        let labels = object.get("metadata").and_then(|m| m.get("labels"));
        let label = |key: &str| labels.and_then(|l| l.get(key)).and_then(Value::as_str);
        if label(LABEL_APP) != Some(APP_CLOUDFLARED) {
            return Ok(None);
        }
        let kind = match object.get("kind").and_then(Value::as_str) {
            Some("Deployment") => WorkloadKind::Deployment,
            Some("DaemonSet") => WorkloadKind::DaemonSet,
            Some("Pod") => WorkloadKind::Pod,
            other => {
                return Err(MutateError::UnsupportedKind {
                    kind: other.unwrap_or_default().to_string(),
                });
            }
        };
        let tunnel_controlled = labels.and_then(|l| l.get(LABEL_TUNNEL)).is_some()
            && owned_by_a_tunnel(object.get("metadata"));
        Ok(Some(Workload {
            kind,
            tunnel_controlled,
        }))
    }

    /// Only user-managed Deployments and DaemonSets carry a checksum the webhook maintains.
    pub(super) fn takes_checksum(self) -> bool {
        !self.tunnel_controlled && self.kind != WorkloadKind::Pod
    }
}

fn owned_by_a_tunnel(metadata: Option<&Value>) -> bool {
    let group_prefix = format!("{GROUP}/");
    metadata
        .and_then(|m| m.get("ownerReferences"))
        .and_then(Value::as_array)
        .is_some_and(|refs| {
            refs.iter().any(|r| {
                let kind = r.get("kind").and_then(Value::as_str);
                let api_version = r.get("apiVersion").and_then(Value::as_str);
                matches!(kind, Some("Tunnel" | "ClusterTunnel"))
                    && api_version.is_some_and(|v| v.starts_with(&group_prefix))
            })
        })
}
