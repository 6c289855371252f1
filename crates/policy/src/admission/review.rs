//! From an AdmissionRequest to a decision: picks the rules for the object's kind, applies
//! UPDATE ratcheting, and answers. Pure: the view is a snapshot handed in.
use k8s_openapi::api::core::v1::Service;
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, Operation};
use kube::core::conversion::{ConversionRequest, ConversionResponse};
use kube::core::response::Status;
use serde::Deserialize;
use serde_json::Value;

use super::tunnel;
use super::tunnel::TunnelView;
use crate::hardening;
use crate::rules::Verdict;
use crate::rules::view::AdmissionView;
use crate::rules::{binding, service};
use cftunnel_types::TunnelKind;
use cftunnel_types::access_policy::AccessPolicySpec;
use cftunnel_types::access_tunnel::AccessTunnelFields;
use cftunnel_types::binding::TunnelBindingFields;
use cftunnel_types::conversion::{self, V1ALPHA2};
use cftunnel_types::names::GROUP;
use cftunnel_types::{
    NetworkRouteSpec, TunnelBinding, TunnelSpec, TunnelStatus, VirtualNetworkSpec,
};

/// The kinds cftunnel judges.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Subject {
    Tunnel,
    TunnelBinding,
    AccessTunnel,
    AccessPolicy,
    NetworkRoute,
    VirtualNetwork,
    Service,
    Ingress,
    /// Deployment or DaemonSet: the pod spec sits at spec.template.spec.
    Workload,
    Pod,
}

fn subject(req: &AdmissionRequest<DynamicObject>) -> Option<Subject> {
    match (req.kind.group.as_str(), req.kind.kind.as_str()) {
        (GROUP, "Tunnel" | "ClusterTunnel") => Some(Subject::Tunnel),
        (GROUP, "TunnelBinding") => Some(Subject::TunnelBinding),
        (GROUP, "AccessTunnel") => Some(Subject::AccessTunnel),
        (GROUP, "AccessPolicy") => Some(Subject::AccessPolicy),
        (GROUP, "NetworkRoute") => Some(Subject::NetworkRoute),
        (GROUP, "VirtualNetwork") => Some(Subject::VirtualNetwork),
        ("", "Service") => Some(Subject::Service),
        ("networking.k8s.io", "Ingress") => Some(Subject::Ingress),
        ("apps", "Deployment" | "DaemonSet") => Some(Subject::Workload),
        ("", "Pod") => Some(Subject::Pod),
        _ => None,
    }
}

/// The validating webhook's answer. Objects are read where they lie in the request (typed
/// parts deserialized by reference): this is the hot path of every apply.
pub fn validate(req: &AdmissionRequest<DynamicObject>, view: &AdmissionView) -> AdmissionResponse {
    validate_with(req, || view)
}

/// [`validate`] with the view built only for a request that is judged: a kind cftunnel does
/// not judge, a deletion or an update of metadata or status alone never needs one.
pub fn validate_with<'v, V: std::ops::Deref<Target = AdmissionView> + 'v>(
    req: &AdmissionRequest<DynamicObject>,
    view: impl FnOnce() -> V,
) -> AdmissionResponse {
    let response = AdmissionResponse::from(req);
    let Some(subject) = subject(req) else {
        return response; // kinds cftunnel does not judge
    };
    let Some(new) = req.object.as_ref() else {
        return missing_object(req, response); // DELETE and CONNECT carry no object to judge
    };
    let namespace = req.namespace.as_deref().unwrap_or("");
    let old = req
        .old_object
        .as_ref()
        .filter(|_| matches!(req.operation, Operation::Update));
    let verdict = match old {
        Some(old) if !needs_judging(new, old) => return response,
        Some(old) => judge_update(subject, new, old, namespace, &view()),
        None => judge(subject, new, namespace, &view()),
    };
    answer(response, verdict)
}

/// Deletion, and updates of metadata or status only, are always allowed (docs/design.md §2, ratcheting):
/// objects stored before cftunnel existed must never get stuck.
fn needs_judging(new: &DynamicObject, old: &DynamicObject) -> bool {
    new.metadata.deletion_timestamp.is_none() && !same_except_status(&new.data, &old.data)
}

fn same_except_status(a: &Value, b: &Value) -> bool {
    match (a.as_object(), b.as_object()) {
        (Some(a), Some(b)) => {
            let relevant =
                |m: &'_ serde_json::Map<String, Value>| m.keys().filter(|k| *k != "status").count();
            relevant(a) == relevant(b)
                && a.iter()
                    .filter(|(k, _)| *k != "status")
                    .all(|(k, v)| b.get(k) == Some(v))
        }
        _ => a == b,
    }
}

fn judge(
    subject: Subject,
    object: &DynamicObject,
    namespace: &str,
    view: &AdmissionView,
) -> Verdict {
    match subject {
        Subject::Tunnel => with_tunnel(object, tunnel::validate),
        Subject::TunnelBinding => match TunnelBindingFields::deserialize(&object.data) {
            Ok(spec) => {
                let binding = TunnelBinding {
                    metadata: object.metadata.clone(),
                    spec,
                    status: None,
                };
                binding::validate(&binding, namespace, view)
            }
            Err(e) => unreadable("", e),
        },
        Subject::AccessTunnel => match AccessTunnelFields::deserialize(&object.data) {
            Ok(fields) => super::access_tunnel::validate(&fields),
            Err(e) => unreadable("", e),
        },
        Subject::AccessPolicy => {
            match AccessPolicySpec::deserialize(object.data.get("spec").unwrap_or(&Value::Null)) {
                Ok(spec) => {
                    let mut verdict = crate::rules::access_policy::validate(&spec, namespace);
                    crate::rules::access_policy::warn_targets_named_elsewhere(
                        &spec,
                        namespace,
                        object.metadata.name.as_deref().unwrap_or_default(),
                        view.access_policies.iter().map(std::sync::Arc::as_ref),
                        &mut verdict,
                    );
                    verdict
                }
                Err(e) => unreadable("spec", e),
            }
        }
        Subject::NetworkRoute => match NetworkRouteSpec::deserialize(spec_of(object)) {
            Ok(spec) => super::network_route::validate(&spec, namespace, name_of(object), view),
            Err(e) => unreadable("spec", e),
        },
        Subject::VirtualNetwork => match VirtualNetworkSpec::deserialize(spec_of(object)) {
            Ok(spec) => super::virtual_network::validate(&spec, name_of(object), view),
            Err(e) => unreadable("spec", e),
        },
        // The rules of a labelled Service read only its labels and annotations.
        Subject::Service => {
            let service = Service {
                metadata: object.metadata.clone(),
                ..Default::default()
            };
            service::validate(&service, namespace, view)
        }
        Subject::Ingress => {
            use k8s_openapi::api::networking::v1::{Ingress, IngressSpec};
            match object
                .data
                .get("spec")
                .map(IngressSpec::deserialize)
                .transpose()
            {
                Ok(spec) => {
                    let ingress = Ingress {
                        metadata: object.metadata.clone(),
                        spec,
                        status: None,
                    };
                    super::ingress::validate(&ingress, namespace, view)
                }
                Err(e) => unreadable("spec", e),
            }
        }
        Subject::Workload => pod_verdict(
            object.data.pointer("/spec/template/spec"),
            "spec.template.spec",
        ),
        Subject::Pod => pod_verdict(object.data.pointer("/spec"), "spec"),
    }
}

fn spec_of(object: &DynamicObject) -> &Value {
    object.data.get("spec").unwrap_or(&Value::Null)
}

fn name_of(object: &DynamicObject) -> &str {
    object.metadata.name.as_deref().unwrap_or_default()
}

fn judge_update(
    subject: Subject,
    new: &DynamicObject,
    old: &DynamicObject,
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

/// Reads a Tunnel or ClusterTunnel as v1alpha2 (converting a v1alpha1 one first) and runs
/// `rules` on it.
fn with_tunnel(object: &DynamicObject, rules: impl FnOnce(TunnelView<'_>) -> Verdict) -> Verdict {
    let name = object.metadata.name.as_deref().unwrap_or("");
    let is_current = object
        .types
        .as_ref()
        .is_none_or(|t| t.api_version == V1ALPHA2);
    let converted;
    let data = if is_current {
        &object.data
    } else {
        let whole = match serde_json::to_value(object) {
            Ok(v) => v,
            Err(e) => return unreadable("", e),
        };
        converted = match conversion::convert(whole, V1ALPHA2) {
            Ok(o) => o,
            Err(e) => return unreadable("", e),
        };
        &converted
    };
    let spec = match TunnelSpec::deserialize(data.get("spec").unwrap_or(&Value::Null)) {
        Ok(spec) => spec,
        Err(e) => return unreadable("spec", e),
    };
    let status = data
        .get("status")
        .and_then(|s| TunnelStatus::deserialize(s).ok());
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

/// A CREATE or UPDATE without its object cannot be judged: only a malformed review (never the
/// API server) sends one, and allowing it would approve what was never seen.
fn missing_object(
    req: &AdmissionRequest<DynamicObject>,
    response: AdmissionResponse,
) -> AdmissionResponse {
    match req.operation {
        Operation::Create | Operation::Update => response.deny(format!(
            "request.object: missing; a {} review must carry the object to judge",
            if matches!(req.operation, Operation::Create) {
                "CREATE"
            } else {
                "UPDATE"
            }
        )),
        Operation::Delete | Operation::Connect => response,
    }
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

/// The mutating webhook's answer: hardening of cloudflared workloads (docs/design.md §2.3) and defaulting
/// of our own kinds. The checksum of user-managed workloads is stamped by the checksum watcher,
/// so the admission path never reads ConfigMaps.
pub fn mutate(req: &AdmissionRequest<DynamicObject>) -> AdmissionResponse {
    let response = AdmissionResponse::from(req);
    if subject(req).is_none() {
        return response;
    }
    let Some(object) = req.object.as_ref() else {
        return missing_object(req, response);
    };
    let patch = match subject(req) {
        Some(Subject::TunnelBinding) => binding_defaults(object),
        Some(Subject::Workload | Subject::Pod) => {
            crate::hardening::mutate::mutate_object(object).ok()
        }
        _ => None,
    };
    match patch.filter(|p| !p.0.is_empty()) {
        Some(patch) => response.clone().with_patch(patch).unwrap_or(response),
        None => response,
    }
}

/// `tunnelRef.kind` in its canonical case (the Go operator accepted any case), and the labels
/// the Go operator put on bindings (`render::labels::binding_labels`): a name label that can no
/// longer name the tunnel is removed.
///
/// Only the labels and `tunnelRef.kind` are copied and diffed: the subjects, which make up
/// nearly all of a large binding, are never cloned.
fn binding_defaults(object: &DynamicObject) -> Option<json_patch::Patch> {
    let mut before = serde_json::Map::new();
    let mut metadata = serde_json::Map::new();
    if let Some(labels) = &object.metadata.labels {
        metadata.insert("labels".to_owned(), serde_json::to_value(labels).ok()?);
    }
    before.insert("metadata".to_owned(), Value::Object(metadata));
    let kind = object
        .data
        .pointer("/tunnelRef/kind")
        .and_then(Value::as_str);
    if let Some(kind) = kind {
        before.insert("tunnelRef".to_owned(), serde_json::json!({ "kind": kind }));
    }
    let before = Value::Object(before);
    let mut wanted = before.clone();
    if let Some(canonical) = kind.and_then(TunnelKind::parse).map(TunnelKind::as_str)
        && let Some(slot) = wanted.pointer_mut("/tunnelRef/kind")
    {
        *slot = Value::from(canonical);
    }
    let tunnel_name = object
        .data
        .pointer("/tunnelRef/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let metadata = wanted.get_mut("metadata")?.as_object_mut()?;
    let labels = metadata
        .entry("labels")
        .or_insert_with(|| Value::Object(serde_json::Map::new()));
    if !labels.is_object() {
        *labels = Value::Object(serde_json::Map::new());
    }
    let labels = labels.as_object_mut()?;
    for (key, value) in crate::render::labels::binding_labels(tunnel_name) {
        match value {
            Some(value) => labels.insert(key.to_string(), Value::from(value)),
            None => labels.remove(key),
        };
    }
    Some(json_patch::diff(&before, &wanted))
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn request(kind: Value, operation: &str, object: Value) -> AdmissionRequest<DynamicObject> {
        let review = json!({
            "uid": "u1", "kind": kind, "resource": {"group": "", "version": "v1", "resource": "x"},
            "name": "x", "namespace": "apps", "operation": operation,
            "userInfo": {"username": "admin"}, "object": object, "dryRun": false
        });
        serde_json::from_value(review).unwrap_or_else(|e| panic!("request: {e}"))
    }

    fn daemonset() -> Value {
        json!({"group": "apps", "version": "v1", "kind": "DaemonSet"})
    }

    #[test]
    fn a_create_without_its_object_is_denied_by_both_webhooks() {
        let view = AdmissionView::default();
        for kind in [
            daemonset(),
            json!({"group": GROUP, "version": "v1alpha1", "kind": "TunnelBinding"}),
        ] {
            let req = request(kind, "CREATE", Value::Null);
            for response in [validate(&req, &view), mutate(&req)] {
                assert!(!response.allowed);
                assert_eq!(response.patch, None);
                assert_eq!(
                    response.result.message,
                    "request.object: missing; a CREATE review must carry the object to judge"
                );
            }
        }
    }

    fn binding_kind() -> Value {
        json!({"group": GROUP, "version": "v1alpha1", "kind": "TunnelBinding"})
    }

    fn patched(object: &Value, review_object: Value) -> Value {
        let response = mutate(&request(binding_kind(), "CREATE", review_object));
        assert!(response.allowed);
        let mut out = object.clone();
        if let Some(bytes) = response.patch {
            let patch: json_patch::Patch =
                serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("patch: {e}"));
            json_patch::patch(&mut out, &patch).unwrap_or_else(|e| panic!("apply: {e}"));
        }
        out
    }

    #[test]
    fn a_binding_gets_the_go_operator_labels_and_a_canonical_tunnel_kind() {
        let binding = json!({
            "apiVersion": "networking.cfargotunnel.com/v1alpha1", "kind": "TunnelBinding",
            "metadata": {"name": "web", "namespace": "apps", "labels": {"team": "shop", "cfargotunnel.com/kind": "x"}},
            "subjects": [{"name": "web"}],
            "tunnelRef": {"kind": "clustertunnel", "name": "edge"},
        });
        let out = patched(&binding, binding.clone());
        assert_eq!(
            out["metadata"]["labels"],
            json!({"team": "shop", "cfargotunnel.com/name": "edge", "cfargotunnel.com/kind": "TunnelBinding"})
        );
        assert_eq!(out["tunnelRef"]["kind"], "ClusterTunnel");
        let unlabelled = json!({
            "apiVersion": "networking.cfargotunnel.com/v1alpha1", "kind": "TunnelBinding",
            "metadata": {"name": "web", "namespace": "apps"},
            "subjects": [{"name": "web"}],
            "tunnelRef": {"kind": "Tunnel", "name": "edge"},
        });
        let out = patched(&unlabelled, unlabelled.clone());
        assert_eq!(
            out["metadata"]["labels"],
            json!({"cfargotunnel.com/name": "edge", "cfargotunnel.com/kind": "TunnelBinding"})
        );
        let labelled = out.clone();
        let response = mutate(&request(binding_kind(), "UPDATE", labelled));
        assert_eq!(
            response.patch, None,
            "nothing to change on a labelled binding"
        );
    }

    #[test]
    fn a_delete_without_an_object_and_other_kinds_are_allowed() {
        let view = AdmissionView::default();
        let delete = request(daemonset(), "DELETE", Value::Null);
        assert!(validate(&delete, &view).allowed);
        assert!(mutate(&delete).allowed);
        let config_map = request(
            json!({"group": "", "version": "v1", "kind": "ConfigMap"}),
            "CREATE",
            Value::Null,
        );
        assert!(validate(&config_map, &view).allowed);
    }

    fn access_policy_kind() -> Value {
        json!({"group": GROUP, "version": "v1alpha2", "kind": "AccessPolicy"})
    }

    fn access_policy(target_namespace: Option<&str>, kind: &str) -> Value {
        let mut target =
            json!({"group": "gateway.networking.k8s.io", "kind": kind, "name": "shop"});
        if let Some(ns) = target_namespace {
            target["namespace"] = json!(ns);
        }
        json!({
            "apiVersion": "networking.cfargotunnel.com/v1alpha2", "kind": "AccessPolicy",
            "metadata": {"name": "staff", "namespace": "apps"},
            "spec": {"targetRefs": [target], "allow": {"emails": ["alice@example.com"]}},
        })
    }

    #[test]
    fn access_policies_are_judged_with_their_namespace_and_warned_for_grpc() {
        let view = AdmissionView::default();
        let refused = validate(
            &request(
                access_policy_kind(),
                "CREATE",
                access_policy(Some("web"), "HTTPRoute"),
            ),
            &view,
        );
        assert!(!refused.allowed);
        assert_eq!(
            refused.result.message,
            "spec.targetRefs[0].namespace: an AccessPolicy protects objects of its own namespace only; create the AccessPolicy in namespace web"
        );
        let own = validate(
            &request(
                access_policy_kind(),
                "CREATE",
                access_policy(Some("apps"), "HTTPRoute"),
            ),
            &view,
        );
        assert!(own.allowed, "{}", own.result.message);
        let grpc = validate(
            &request(
                access_policy_kind(),
                "CREATE",
                access_policy(None, "GRPCRoute"),
            ),
            &view,
        );
        assert!(grpc.allowed, "admitted with a warning");
        let warnings = grpc.warnings.unwrap_or_default();
        assert_eq!(warnings.len(), 1);
        assert!(
            warnings[0].starts_with("spec.targetRefs[0]: Cloudflare Access does not apply to gRPC")
        );
        let mut unreadable = access_policy(None, "HTTPRoute");
        unreadable["spec"]["targetRefs"] = json!("web");
        let response = validate(&request(access_policy_kind(), "CREATE", unreadable), &view);
        assert!(!response.allowed);
        assert!(
            response.result.message.starts_with("spec: cannot be read"),
            "{}",
            response.result.message
        );
    }

    #[test]
    fn an_access_policy_naming_a_target_another_policy_names_is_admitted_with_a_warning() {
        let stored = |name: &str, namespace: &str| {
            let mut object = access_policy(None, "HTTPRoute");
            object["metadata"] = json!({"name": name, "namespace": namespace});
            std::sync::Arc::new(
                serde_json::from_value::<cftunnel_types::access_policy::AccessPolicy>(object)
                    .unwrap_or_else(|e| panic!("policy: {e}")),
            )
        };
        let mut view = AdmissionView::default();
        // Itself (an update) and a policy of another namespace are not warned of.
        view.access_policies = vec![stored("staff", "apps"), stored("older", "web")];
        let review = request(
            access_policy_kind(),
            "CREATE",
            access_policy(None, "HTTPRoute"),
        );
        let alone = validate(&review, &view);
        assert!(alone.allowed);
        assert_eq!(alone.warnings, None);
        view.access_policies.push(stored("older", "apps"));
        let shared = validate(&review, &view);
        assert!(shared.allowed, "a warning, not a refusal");
        assert_eq!(
            shared.warnings.unwrap_or_default(),
            [
                "spec.targetRefs[0]: HTTPRoute apps/shop is also named by AccessPolicy apps/older: a target is protected by one policy only, the older, and the newer is refused for it (TargetConflict); name it in one policy"
            ]
        );
    }
}
