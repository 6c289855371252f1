//! From an AdmissionRequest to a decision: picks the rules for the object's kind, applies
//! UPDATE ratcheting, and answers. Pure: the view is a snapshot handed in.
use k8s_openapi::api::core::v1::Service;
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, Operation};
use kube::core::conversion::{ConversionRequest, ConversionResponse};
use kube::core::response::Status;
use serde::Deserialize;
use serde_json::Value;

use super::tunnel::TunnelView;
use super::verdict::Verdict;
use super::view::{AdmissionView, TunnelKind};
use super::{binding, hardening, service, tunnel};
use crate::api::conversion::{self, V1ALPHA2};
use crate::api::names::GROUP;
use crate::api::{TunnelBinding, TunnelSpec, TunnelStatus};

/// The kinds cftunnel judges.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Subject {
    Tunnel,
    TunnelBinding,
    Service,
    /// Deployment or DaemonSet: the pod spec sits at spec.template.spec.
    Workload,
    Pod,
}

fn subject(req: &AdmissionRequest<DynamicObject>) -> Option<Subject> {
    match (req.kind.group.as_str(), req.kind.kind.as_str()) {
        (GROUP, "Tunnel" | "ClusterTunnel") => Some(Subject::Tunnel),
        (GROUP, "TunnelBinding") => Some(Subject::TunnelBinding),
        ("", "Service") => Some(Subject::Service),
        ("apps", "Deployment" | "DaemonSet") => Some(Subject::Workload),
        ("", "Pod") => Some(Subject::Pod),
        _ => None,
    }
}

/// The validating webhook's answer.
pub fn validate(req: &AdmissionRequest<DynamicObject>, view: &AdmissionView) -> AdmissionResponse {
    let response = AdmissionResponse::from(req);
    let Some(subject) = subject(req) else {
        return response;
    };
    let (Some(new), namespace) = (json(&req.object), req.namespace.as_deref().unwrap_or("")) else {
        return response; // DELETE and CONNECT carry no object to judge
    };
    let old = json(&req.old_object);
    if matches!(req.operation, Operation::Update)
        && let Some(old) = &old
        && !needs_judging(&new, old)
    {
        return response;
    }
    let verdict = match old.filter(|_| matches!(req.operation, Operation::Update)) {
        Some(old) => judge_update(subject, &new, &old, namespace, view),
        None => judge(subject, &new, namespace, view),
    };
    answer(response, verdict)
}

/// Deletion, and updates of metadata or status only, are always allowed (SPEC §2, ratcheting):
/// objects stored before cftunnel existed must never get stuck.
fn needs_judging(new: &Value, old: &Value) -> bool {
    if new
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null())
    {
        return false;
    }
    without_metadata_and_status(new) != without_metadata_and_status(old)
}

fn without_metadata_and_status(object: &Value) -> Value {
    let mut object = object.clone();
    if let Some(map) = object.as_object_mut() {
        map.remove("metadata");
        map.remove("status");
        map.remove("apiVersion");
    }
    object
}

fn judge(subject: Subject, object: &Value, namespace: &str, view: &AdmissionView) -> Verdict {
    match subject {
        Subject::Tunnel => with_tunnel(object, tunnel::validate),
        Subject::TunnelBinding => match TunnelBinding::deserialize(object) {
            Ok(b) => binding::validate(&b, namespace, view),
            Err(e) => unreadable("", e),
        },
        Subject::Service => match Service::deserialize(object) {
            Ok(s) => service::validate(&s, namespace, view),
            Err(e) => unreadable("", e),
        },
        Subject::Workload => {
            pod_verdict(object.pointer("/spec/template/spec"), "spec.template.spec")
        }
        Subject::Pod => pod_verdict(object.pointer("/spec"), "spec"),
    }
}

fn judge_update(
    subject: Subject,
    new: &Value,
    old: &Value,
    namespace: &str,
    view: &AdmissionView,
) -> Verdict {
    if subject != Subject::Tunnel {
        return judge(subject, new, namespace, view).ratchet(&judge(subject, old, namespace, view));
    }
    with_tunnel(new, |n| with_tunnel(old, |o| tunnel::validate_update(n, o)))
}

fn pod_verdict(pod: Option<&Value>, path: &str) -> Verdict {
    let mut v = Verdict::default();
    if let Some(pod) = pod {
        v.violations = hardening::pod_weakening(pod, path);
    }
    v
}

/// Reads a Tunnel or ClusterTunnel (either version) as v1alpha2 and runs `rules` on it.
fn with_tunnel(object: &Value, rules: impl FnOnce(TunnelView<'_>) -> Verdict) -> Verdict {
    let object = match conversion::convert(object.clone(), V1ALPHA2) {
        Ok(o) => o,
        Err(e) => return unreadable("", e),
    };
    let spec: TunnelSpec =
        match serde_json::from_value(object.get("spec").cloned().unwrap_or(Value::Null)) {
            Ok(spec) => spec,
            Err(e) => return unreadable("spec", e),
        };
    let status: Option<TunnelStatus> = object
        .get("status")
        .cloned()
        .and_then(|s| serde_json::from_value(s).ok());
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    rules(TunnelView {
        name,
        spec: &spec,
        status: status.as_ref(),
    })
}

fn unreadable(field: &str, e: impl std::fmt::Display) -> Verdict {
    let mut v = Verdict::default();
    let field = if field.is_empty() { "object" } else { field };
    v.deny(
        field,
        format!("cannot be read ({e}); check it against `kubectl explain`"),
    );
    v
}

fn json(object: &Option<DynamicObject>) -> Option<Value> {
    object.as_ref().and_then(|o| serde_json::to_value(o).ok())
}

fn answer(response: AdmissionResponse, verdict: Verdict) -> AdmissionResponse {
    let warnings = (!verdict.warnings.is_empty()).then(|| verdict.warnings.clone());
    let mut response = match verdict.denial_message() {
        Some(message) => response.deny(message),
        None => response,
    };
    response.warnings = warnings;
    response
}

/// The mutating webhook's answer: hardening of cloudflared workloads (SPEC §2.3) and defaulting
/// of our own kinds. The checksum of user-managed workloads is stamped by the checksum watcher,
/// so the admission path never reads ConfigMaps.
pub fn mutate(req: &AdmissionRequest<DynamicObject>) -> AdmissionResponse {
    let response = AdmissionResponse::from(req);
    let Some(object) = json(&req.object) else {
        return response;
    };
    let patch = match subject(req) {
        Some(Subject::TunnelBinding) => binding_defaults(&object),
        Some(Subject::Workload | Subject::Pod) => super::mutate::mutate_workload(&object).ok(),
        _ => None,
    };
    match patch.filter(|p| !p.0.is_empty()) {
        Some(patch) => response.clone().with_patch(patch).unwrap_or(response),
        None => response,
    }
}

/// `tunnelRef.kind` in its canonical case (the Go operator accepted any case).
fn binding_defaults(object: &Value) -> Option<json_patch::Patch> {
    let kind = object.pointer("/tunnelRef/kind").and_then(Value::as_str)?;
    let canonical = TunnelKind::parse(kind)
        .map(TunnelKind::as_str)
        .filter(|c| *c != kind)?;
    serde_json::from_value(
        serde_json::json!([{"op": "replace", "path": "/tunnelRef/kind", "value": canonical}]),
    )
    .ok()
}

/// CRD conversion: every object to the desired version, or a failure naming the object.
pub fn convert(req: &ConversionRequest) -> ConversionResponse {
    let mut converted = Vec::with_capacity(req.objects.len());
    for object in &req.objects {
        match conversion::convert(object.clone(), &req.desired_api_version) {
            Ok(o) => converted.push(o),
            Err(e) => {
                let name = object
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or("?");
                return ConversionResponse::for_request(req.clone())
                    .failure(Status::failure(&format!("{name}: {e}"), "ConversionFailed"));
            }
        }
    }
    ConversionResponse::for_request(req.clone()).success(converted)
}
