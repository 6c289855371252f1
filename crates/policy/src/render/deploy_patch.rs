//! `spec.deployPatch` (docs/design.md §3.5): parsed as YAML or JSON, applied last as a strategic merge
//! patch, then hardening and the identity of the workload are put back.
use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::strategic_merge::{PatchError, strategic_merge};
use super::strategic_merge_keys::DEPLOYMENT;
use crate::hardening::CLOUDFLARED_CONTAINER;
use cftunnel_types::names::ANNOTATION_CHECKSUM;

/// A `deployPatch` that cannot be applied: `spec.deployPatch: <path>: <what>; <fix>`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("spec.deployPatch: {0}")]
pub struct DeployPatchError(PatchError);

impl DeployPatchError {
    fn new(path: impl Into<String>, what: impl Into<String>, fix: impl Into<String>) -> Self {
        DeployPatchError(PatchError {
            path: path.into(),
            what: what.into(),
            fix: fix.into(),
        })
    }

    /// The field path inside the patch.
    pub fn path(&self) -> &str {
        &self.0.path
    }
}

impl From<PatchError> for DeployPatchError {
    fn from(e: PatchError) -> Self {
        DeployPatchError(e)
    }
}

/// The patch as JSON; empty text means no patch.
pub(crate) fn parse_deploy_patch(text: &str) -> Result<Value, DeployPatchError> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Ok(json!({}));
    }
    let parsed: Result<Value, String> = if trimmed.starts_with('{') {
        serde_json::from_str(trimmed)
            .or_else(|_| serde_yaml_ng::from_str(trimmed))
            .map_err(|e: serde_yaml_ng::Error| e.to_string())
    } else {
        serde_yaml_ng::from_str(trimmed).map_err(|e| e.to_string())
    };
    match parsed {
        Ok(Value::Null) => Ok(json!({})),
        Ok(value @ Value::Object(_)) => Ok(value),
        Ok(_) => Err(DeployPatchError::new(
            "(root)",
            "is not a map",
            "write a map of Deployment fields, e.g. {\"spec\": {\"replicas\": 3}}",
        )),
        Err(reason) => Err(DeployPatchError::new(
            "(root)",
            format!("is neither valid YAML nor JSON ({reason})"),
            "fix the syntax; e.g. {\"spec\": {\"replicas\": 3}}",
        )),
    }
}

/// Fields a patch may never change, and why.
const FIXED: &[(&str, &str)] = &[
    ("/metadata/name", "metadata.name"),
    ("/metadata/namespace", "metadata.namespace"),
    ("/spec/selector", "spec.selector"),
];

/// Does the pod template still hold a container named `cloudflared`?
fn has_cloudflared(deployment: &Value) -> bool {
    deployment
        .pointer("/spec/template/spec/containers")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c.get("name").and_then(Value::as_str) == Some(CLOUDFLARED_CONTAINER))
        })
}

/// Would `patch` remove the cloudflared container, by any directive (`$patch: delete` on it,
/// `$patch: replace` of the list, the pod spec, the template or the spec, or a `null`)? Judged
/// on the patch's effect, not its shape. A patch that cannot be applied at all is not judged.
pub(crate) fn removes_cloudflared(patch: &Value) -> bool {
    let skeleton =
        json!({"spec": {"template": {"spec": {"containers": [{"name": CLOUDFLARED_CONTAINER}]}}}});
    strategic_merge(&skeleton, patch, DEPLOYMENT).is_ok_and(|merged| !has_cloudflared(&merged))
}

/// Applies `patch` to the rendered `deployment`, re-hardens it with `harden`, and puts back what
/// identifies the workload (the checksum annotation is the reconciler's alone). A patch that
/// tries to change the name, the selector or the selector's pod labels is refused.
pub(crate) fn apply_deploy_patch(
    deployment: &Value,
    patch: &Value,
    selector: &BTreeMap<String, String>,
    harden: fn(&mut Value),
) -> Result<Value, DeployPatchError> {
    let mut patched = strategic_merge(deployment, patch, DEPLOYMENT)?;
    if !has_cloudflared(&patched) {
        return Err(DeployPatchError::new(
            "spec.template.spec.containers",
            "the cloudflared container cannot be removed",
            "patch its fields instead of replacing or deleting it",
        ));
    }
    for (pointer, path) in FIXED {
        if patched.pointer(pointer) != deployment.pointer(pointer) {
            return Err(DeployPatchError::new(
                *path,
                "cannot be changed: it identifies the tunnel's workload",
                format!("remove {path} from the patch"),
            ));
        }
    }
    for (key, value) in selector {
        let got = patched
            .pointer("/spec/template/metadata/labels")
            .and_then(|labels| labels.get(key));
        if got.and_then(Value::as_str) != Some(value.as_str()) {
            return Err(DeployPatchError::new(
                format!("spec.template.metadata.labels[{key}]"),
                format!("must stay {value:?}: the Deployment selector needs it"),
                "remove it from the patch (other labels may be added)",
            ));
        }
    }
    let checksum = deployment
        .pointer("/spec/template/metadata/annotations")
        .and_then(|a| a.get(ANNOTATION_CHECKSUM))
        .cloned();
    if let Some(template_meta) = patched.pointer_mut("/spec/template/metadata")
        && let Some(meta) = template_meta.as_object_mut()
    {
        let annotations = meta.entry("annotations").or_insert_with(|| json!({}));
        if let (Some(map), Some(sum)) = (annotations.as_object_mut(), checksum) {
            map.insert(ANNOTATION_CHECKSUM.to_string(), sum);
        }
    }
    if let Some(pod_spec) = patched.pointer_mut("/spec/template/spec") {
        harden(pod_spec);
    }
    Ok(patched)
}
