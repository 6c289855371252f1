//! Mutation of cloudflared workloads (docs/design.md §2.3): hardening filled in where unset and the
//! config checksum of user-managed workloads, returned as a JSON Patch built by diffing raw
//! JSON, so fields newer than our Kubernetes API version survive. Only a sparse copy of the
//! parts hardened is diffed (`sparse.rs`), never a clone of the whole object.
mod affinity;
mod checksum;
mod fill;
mod pod;
mod probes;
mod sparse;
mod workload;

#[cfg(test)]
mod annotation_tests;
#[cfg(test)]
mod props;
#[cfg(test)]
mod tests;

use json_patch::Patch;
use kube::core::DynamicObject;
use serde_json::{Map, Value, json};
use thiserror::Error;

pub use checksum::{ConfigMapContent, config_checksum, mounted_config_maps};
pub use pod::harden_pod_spec;

use cftunnel_types::names::ANNOTATION_CHECKSUM;
use fill::{fill_object, fill_value};
use pod::harden_pod_spec_with;
use probes::metrics_port;
use sparse::{POD_SPEC, TEMPLATE_METADATA, sparse};
use workload::{Workload, WorkloadKind};

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
    workload_patch(object, object, checksum)
}

/// [`mutate_workload`] of an object as the webhook decodes it: kind and metadata typed, the
/// rest (`spec`) as raw JSON. Nothing of the object is copied but the parts the hardening
/// touches (see `sparse.rs`), so the cost does not grow with env lists or volumes.
pub(crate) fn mutate_object(object: &DynamicObject) -> Result<Patch, MutateError> {
    let kind = object
        .types
        .as_ref()
        .map(|t| Value::from(t.kind.as_str()))
        .or_else(|| object.data.get("kind").cloned())
        .unwrap_or(Value::Null);
    let head = serde_json::json!({
        "kind": kind,
        "metadata": {
            "labels": &object.metadata.labels,
            "ownerReferences": &object.metadata.owner_references,
        },
    });
    workload_patch(&head, &object.data, None)
}

/// The hardening patch of the workload whose kind and metadata are read from `head` and whose
/// `spec` is read from `body` (the same value, or the parts of a decoded object).
///
/// The hardening runs on a sparse copy of `body` and the patch is the diff of that copy before
/// and after: the same operations, in the same order, as diffing a hardened clone of the whole
/// object (checked by `props.rs`), at a cost that depends only on the parts hardened.
fn workload_patch(
    head: &Value,
    body: &Value,
    checksum: Option<&str>,
) -> Result<Patch, MutateError> {
    let Some(workload) = Workload::classify(head)? else {
        return Ok(Patch::default());
    };
    let path = workload.kind.pod_spec_pointer();
    let Some(pod @ Value::Object(_)) = body.pointer(path) else {
        return Err(MutateError::MissingPodSpec {
            path: path.trim_start_matches('/').replace('/', "."),
        });
    };
    let pod_copy = sparse(pod, &POD_SPEC);
    let stamp = checksum.filter(|_| workload.takes_checksum());
    let before = match workload.kind {
        WorkloadKind::Pod => json!({ "spec": pod_copy }),
        WorkloadKind::Deployment | WorkloadKind::DaemonSet => {
            let mut template = Map::new();
            if let Some(metadata) = stamp.and_then(|_| body.pointer("/spec/template/metadata")) {
                template.insert("metadata".to_string(), sparse(metadata, &TEMPLATE_METADATA));
            }
            template.insert("spec".to_string(), pod_copy);
            json!({ "spec": { "template": template } })
        }
    };
    let mut hardened = before.clone();
    let containers = pod.get("containers").and_then(Value::as_array);
    let port_of = |index: usize, _: &Map<String, Value>| {
        containers
            .and_then(|c| c.get(index))
            .and_then(Value::as_object)
            .and_then(metrics_port)
    };
    if let Some(pod) = hardened.pointer_mut(path) {
        harden_pod_spec_with(pod, port_of);
    }
    if let Some(checksum) = stamp
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
    Ok(json_patch::diff(&before, &hardened))
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
