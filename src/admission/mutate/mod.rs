//! Mutation of cloudflared workloads (docs/design.md §2.3): hardening filled in where unset and the
//! config checksum of user-managed workloads, returned as a JSON Patch built by diffing raw
//! JSON, so fields newer than our Kubernetes API version survive.
mod affinity;
mod checksum;
mod fill;
mod pod;
mod probes;
mod workload;

#[cfg(test)]
mod annotation_tests;
#[cfg(test)]
mod props;
#[cfg(test)]
mod tests;

use json_patch::Patch;
use serde_json::Value;
use thiserror::Error;

pub use checksum::{ConfigMapContent, config_checksum, mounted_config_maps};
pub use pod::harden_pod_spec;

use crate::api::names::ANNOTATION_CHECKSUM;
use fill::{fill_object, fill_value};
use workload::Workload;

/// Why a workload could not be mutated; the webhook decides whether that refuses the request.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum MutateError {
    #[error("object: not a JSON object; send a Kubernetes object")]
    NotAnObject,
    #[error("{path}: missing or not an object; a cloudflared workload needs a pod spec")]
    MissingPodSpec { path: String },
    #[error("kind: {kind:?} is not mutated; only Deployment, DaemonSet and Pod are")]
    UnsupportedKind { kind: String },
}

impl MutateError {
    /// Short label for metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            MutateError::NotAnObject => "not_an_object",
            MutateError::MissingPodSpec { .. } => "missing_pod_spec",
            MutateError::UnsupportedKind { .. } => "unsupported_kind",
        }
    }
}

/// The hardening patch of a Deployment, DaemonSet or Pod; empty when the object is not
/// labelled `cfargotunnel.com/app=cloudflared` or is already hardened.
pub fn mutate_workload(object: &Value) -> Result<Patch, MutateError> {
    mutate_workload_with_checksum(object, None)
}

/// As [`mutate_workload`], and adds the pod-template checksum annotation when it is missing
/// on a user-managed Deployment or DaemonSet (never on Pods nor Tunnel-controlled workloads).
pub fn mutate_workload_with_checksum(
    object: &Value,
    checksum: Option<&str>,
) -> Result<Patch, MutateError> {
    let Some(workload) = Workload::classify(object)? else {
        return Ok(Patch::default());
    };
    let mut hardened = object.clone();
    let path = workload.kind.pod_spec_pointer();
    match hardened.pointer_mut(path) {
        Some(pod @ Value::Object(_)) => harden_pod_spec(pod),
        _ => {
            return Err(MutateError::MissingPodSpec {
                path: path.trim_start_matches('/').replace('/', "."),
            });
        }
    }
    if let Some(checksum) = checksum.filter(|_| workload.takes_checksum())
        && let Some(template) = hardened
            .pointer_mut("/spec/template")
            .and_then(Value::as_object_mut)
    {
        fill_object(template, "metadata", |metadata| {
            fill_object(metadata, "annotations", |annotations| {
                fill_value(annotations, ANNOTATION_CHECKSUM, checksum.into());
            })
        });
    }
    Ok(json_patch::diff(object, &hardened))
}

/// The patch that sets the checksum annotation of a user-managed Deployment or DaemonSet to
/// `checksum`; None when it already has that value or the object is not such a workload.
pub fn restamp(object: &Value, checksum: &str) -> Option<Patch> {
    let workload = Workload::classify(object).ok()??;
    if !workload.takes_checksum() {
        return None;
    }
    let mut stamped = object.clone();
    let template = stamped
        .pointer_mut("/spec/template")
        .and_then(Value::as_object_mut)?;
    let mut settable = false;
    fill_object(template, "metadata", |metadata| {
        fill_object(metadata, "annotations", |annotations| {
            annotations.insert(ANNOTATION_CHECKSUM.to_string(), checksum.into());
            settable = true;
        })
    });
    let patch = json_patch::diff(object, &stamped);
    (settable && !patch.0.is_empty()).then_some(patch)
}
