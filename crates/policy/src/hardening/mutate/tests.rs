//! Exact outcomes of workload mutation: fields filled, fields left alone, patch shape.
use serde_json::{Value, json};

use super::*;

pub(super) fn labels() -> Value {
    json!({"cfargotunnel.com/app": "cloudflared"})
}

pub(super) fn workload(kind: &str, pod: Value) -> Value {
    match kind {
        "Pod" => json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "cf", "labels": labels()}, "spec": pod}),
        _ => json!({"apiVersion": "apps/v1", "kind": kind,
            "metadata": {"name": "cf", "namespace": "ns", "labels": labels()},
            "spec": {"selector": {"matchLabels": labels()},
                     "template": {"metadata": {"labels": labels()}, "spec": pod}}}),
    }
}

pub(super) fn deployment(pod: Value) -> Value {
    workload("Deployment", pod)
}

pub(super) fn cloudflared(extra: Value) -> Value {
    let mut c = json!({"name": "cloudflared", "image": "cloudflare/cloudflared:2026.8.2"});
    if let (Some(c), Some(extra)) = (c.as_object_mut(), extra.as_object()) {
        c.extend(extra.clone());
    }
    c
}

fn pod_pointer(object: &Value) -> &'static str {
    if object["kind"] == "Pod" {
        "/spec"
    } else {
        "/spec/template/spec"
    }
}

/// Mutates, checks the patch holds no `remove`, applies it and returns the result.
fn mutated(object: &Value) -> Value {
    mutated_with(object, None)
}

pub(super) fn mutated_with(object: &Value, checksum: Option<&str>) -> Value {
    let patch = mutate_workload_with_checksum(object, checksum).expect("mutation succeeds");
    assert_no_remove(&patch);
    let mut doc = object.clone();
    json_patch::patch(&mut doc, &patch).expect("the patch applies");
    doc
}

pub(super) fn assert_no_remove(patch: &Patch) {
    for op in &patch.0 {
        assert!(
            matches!(op, json_patch::PatchOperation::Add(_)),
            "only add operations expected, got {op}"
        );
    }
}

/// The patch as built before sparse copies: the whole object cloned, its pod spec hardened,
/// the checksum filled, the clone diffed against the original. Kept as the reference the
/// sparse patch must equal operation for operation.
pub(super) fn clone_and_diff(object: &Value, checksum: Option<&str>) -> Result<Patch, MutateError> {
    let Some(workload) = super::workload::Workload::classify(object)? else {
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
        fill::fill_object(template, "metadata", |metadata| {
            fill::fill_object(metadata, "annotations", |annotations| {
                fill::fill_value(
                    annotations,
                    cftunnel_types::names::ANNOTATION_CHECKSUM,
                    checksum.into(),
                );
            })
        });
    }
    Ok(json_patch::diff(object, &hardened))
}

fn hardened_pod(port: Option<u16>) -> Value {
    let mut container = json!({
        "name": "cloudflared",
        "image": "cloudflare/cloudflared:2026.8.2",
        "securityContext": {"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true,
                            "capabilities": {"drop": ["ALL"]}},
        "resources": {"requests": {"cpu": "10m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}},
    });
    if let Some(port) = port {
        container["args"] = json!(["tunnel", "--metrics", format!("0.0.0.0:{port}"), "run"]);
        container["readinessProbe"] = json!({"httpGet": {"path": "/ready", "port": port},
            "periodSeconds": 10, "failureThreshold": 3});
        container["startupProbe"] = json!({"httpGet": {"path": "/ready", "port": port},
            "periodSeconds": 5, "failureThreshold": 60});
        container["livenessProbe"] = json!({"httpGet": {"path": "/healthcheck", "port": port},
            "periodSeconds": 10, "timeoutSeconds": 5, "failureThreshold": 3});
    }
    json!({
        "securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
        "automountServiceAccountToken": false,
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
                {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64", "arm64"]}]}]}}},
        "containers": [container],
    })
}

#[test]
fn bare_workloads_of_each_kind_come_out_fully_hardened() {
    for kind in ["Deployment", "DaemonSet", "Pod"] {
        let bare = workload(
            kind,
            json!({"containers": [cloudflared(json!({"args": ["tunnel", "--metrics", "0.0.0.0:2000", "run"]}))]}),
        );
        let out = mutated(&bare);
        let pod = out.pointer(pod_pointer(&out)).expect("pod spec");
        assert_eq!(pod, &hardened_pod(Some(2000)), "{kind}");
        let c = &pod["containers"][0];
        assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
        assert_eq!(
            pod["securityContext"]["seccompProfile"]["type"],
            "RuntimeDefault"
        );
        assert_eq!(pod["securityContext"].get("runAsUser"), None);
        assert_eq!(pod["automountServiceAccountToken"], false);
        assert_eq!(c["securityContext"]["allowPrivilegeEscalation"], false);
        assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
        assert_eq!(c["securityContext"]["capabilities"]["drop"], json!(["ALL"]));
        assert_eq!(c["resources"]["requests"]["cpu"], "10m");
        assert_eq!(c["resources"]["requests"]["memory"], "64Mi");
        assert_eq!(c["resources"]["limits"]["memory"], "256Mi");
        assert_eq!(
            c["readinessProbe"]["httpGet"],
            json!({"path": "/ready", "port": 2000})
        );
        assert_eq!(
            c["startupProbe"]["httpGet"],
            json!({"path": "/ready", "port": 2000})
        );
        assert_eq!(
            c["livenessProbe"]["httpGet"],
            json!({"path": "/healthcheck", "port": 2000})
        );
        assert!(c["livenessProbe"]["failureThreshold"].as_i64() >= Some(3));
        // Everything outside the pod spec is untouched.
        let mut rest = out.clone();
        let mut bare_rest = bare.clone();
        *rest.pointer_mut(pod_pointer(&out)).expect("pod") = Value::Null;
        *bare_rest.pointer_mut(pod_pointer(&bare)).expect("pod") = Value::Null;
        assert_eq!(rest, bare_rest, "{kind}");
    }
}

#[test]
fn harden_pod_spec_alone_matches_the_webhook() {
    let mut pod = json!({"containers": [cloudflared(json!({"args": ["tunnel", "--metrics", "0.0.0.0:2000", "run"]}))]});
    harden_pod_spec(&mut pod);
    assert_eq!(pod, hardened_pod(Some(2000)));
    let mut again = pod.clone();
    harden_pod_spec(&mut again);
    assert_eq!(again, pod);
}

#[test]
fn affinity_is_anded_into_every_existing_term_once() {
    let preferred = json!([{"weight": 10, "preference": {"matchExpressions": [
        {"key": "zone", "operator": "In", "values": ["a"]}]}}]);
    let object = deployment(json!({
        "affinity": {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["edge"]}]},
                {"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]}],
                 "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]},
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]},
                {},
            ]},
            "preferredDuringSchedulingIgnoredDuringExecution": preferred.clone()}},
        "containers": [cloudflared(json!({}))]}));
    let out = mutated(&object);
    let node = &out["spec"]["template"]["spec"]["affinity"]["nodeAffinity"];
    let os = json!({"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]});
    let arch = json!({"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64", "arm64"]});
    assert_eq!(
        node["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"],
        json!([
            {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["edge"]}, os, arch]},
            {"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]}, os],
             "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]},
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}],
             "matchExpressions": [os, arch]},
            // An empty term matches no node; filling it would widen scheduling.
            {},
        ])
    );
    assert_eq!(
        node["preferredDuringSchedulingIgnoredDuringExecution"],
        preferred
    );
}

#[test]
fn an_empty_term_list_gets_the_only_term_and_preferred_alone_is_kept() {
    let preferred = json!([{"weight": 1, "preference": {"matchExpressions": [
        {"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]}]}}]);
    for affinity in [
        json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []},
                                "preferredDuringSchedulingIgnoredDuringExecution": preferred.clone()}}),
        json!({"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": preferred.clone()}}),
    ] {
        let out = mutated(&deployment(json!({"affinity": affinity, "containers": []})));
        let node = &out["spec"]["template"]["spec"]["affinity"]["nodeAffinity"];
        assert_eq!(
            node["requiredDuringSchedulingIgnoredDuringExecution"],
            hardened_pod(None)["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        );
        assert_eq!(
            node["preferredDuringSchedulingIgnoredDuringExecution"],
            preferred
        );
    }
}

#[test]
fn other_containers_and_init_containers_are_untouched_byte_for_byte() {
    let sidecar = json!({"name": "sidecar", "image": "envoy", "args": ["--metrics", ":9000"],
        "securityContext": {"capabilities": {"drop": ["NET_RAW"]}}});
    let init = json!([{"name": "cloudflared", "image": "busybox", "args": ["--metrics=:2000"]},
                      {"name": "init", "image": "busybox"}]);
    let object = deployment(json!({
        "initContainers": init.clone(),
        "containers": [sidecar.clone(), cloudflared(json!({}))]}));
    let out = mutated(&object);
    let pod = &out["spec"]["template"]["spec"];
    let text = |v: &Value| serde_json::to_string(v).expect("serializable");
    assert_eq!(text(&pod["containers"][0]), text(&sidecar));
    assert_eq!(text(&pod["initContainers"]), text(&init));
    assert_eq!(pod["containers"][1], hardened_pod(None)["containers"][0]);
}

#[test]
fn probes_only_with_a_known_metrics_port() {
    let env = |v: &str| json!({"env": [{"name": "OTHER", "value": "x"}, {"name": "TUNNEL_METRICS", "value": v}]});
    for (extra, port) in [
        (
            json!({"args": ["tunnel", "--metrics", "0.0.0.0:2000", "run"]}),
            Some(2000),
        ),
        (
            json!({"args": ["tunnel", "--metrics=:44483", "run"]}),
            Some(44483),
        ),
        (
            json!({"command": ["cloudflared", "tunnel", "--metrics", "[::]:2001", "run"]}),
            Some(2001),
        ),
        (env("0.0.0.0:3000"), Some(3000)),
        (json!({"args": ["tunnel", "run"]}), None),
        (
            json!({"args": ["tunnel", "--metrics", "localhost:2000", "run"]}),
            None,
        ),
        (env("127.0.0.1:2000"), None),
    ] {
        let out = mutated(&deployment(
            json!({"containers": [cloudflared(extra.clone())]}),
        ));
        let c = &out["spec"]["template"]["spec"]["containers"][0];
        let expected = port.map(|p| {
            (
                json!({"path": "/ready", "port": p}),
                json!({"path": "/healthcheck", "port": p}),
            )
        });
        let actual = c.get("readinessProbe").map(|r| {
            assert_eq!(c["startupProbe"]["httpGet"], r["httpGet"]);
            (r["httpGet"].clone(), c["livenessProbe"]["httpGet"].clone())
        });
        assert_eq!(actual, expected, "{extra}");
        if port.is_none() {
            assert_eq!(
                (c.get("startupProbe"), c.get("livenessProbe")),
                (None, None)
            );
        }
    }
}

#[test]
fn values_the_user_wrote_are_kept() {
    let user_liveness = json!({"httpGet": {"path": "/ready", "port": 2000}, "failureThreshold": 1});
    let object = deployment(json!({
    "securityContext": {"runAsNonRoot": false, "seccompProfile": {"type": "Localhost", "localhostProfile": "p.json"}},
    "automountServiceAccountToken": true,
    "containers": [cloudflared(json!({
        "args": ["tunnel", "--metrics", "0.0.0.0:2000", "run"],
        "securityContext": {"readOnlyRootFilesystem": false, "capabilities": {"drop": ["NET_RAW"]}},
        "resources": {"requests": {"cpu": "1"}},
        "livenessProbe": user_liveness.clone(),
    }))]}));
    let out = mutated(&object);
    let pod = &out["spec"]["template"]["spec"];
    assert_eq!(
        pod["securityContext"],
        object["spec"]["template"]["spec"]["securityContext"]
    );
    assert_eq!(pod["automountServiceAccountToken"], true);
    let c = &pod["containers"][0];
    assert_eq!(
        c["securityContext"],
        json!({"readOnlyRootFilesystem": false, "allowPrivilegeEscalation": false,
               "capabilities": {"drop": ["NET_RAW", "ALL"]}})
    );
    assert_eq!(c["resources"], json!({"requests": {"cpu": "1"}}));
    // A lenient-enough liveness probe is the user's call, even failureThreshold 1 on /ready.
    assert_eq!(c["livenessProbe"], user_liveness);
    assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/ready");
}

#[test]
fn an_empty_resources_object_gets_the_defaults() {
    let out = mutated(&deployment(
        json!({"containers": [cloudflared(json!({"resources": {}}))]}),
    ));
    assert_eq!(
        out["spec"]["template"]["spec"]["containers"][0]["resources"],
        hardened_pod(None)["containers"][0]["resources"]
    );
}

#[test]
fn privilege_escalation_is_not_filled_beside_privileged_or_sys_admin() {
    for sc in [
        json!({"privileged": true}),
        json!({"capabilities": {"add": ["SYS_ADMIN"]}}),
        json!({"capabilities": {"add": ["CAP_SYS_ADMIN"]}}),
    ] {
        let out = mutated(&deployment(
            json!({"containers": [cloudflared(json!({"securityContext": sc}))]}),
        ));
        let c = &out["spec"]["template"]["spec"]["containers"][0]["securityContext"];
        assert_eq!(c.get("allowPrivilegeEscalation"), None, "{sc}");
        assert_eq!(c["readOnlyRootFilesystem"], true);
    }
}

#[test]
fn windows_pods_get_no_linux_only_fields() {
    let out = mutated(&deployment(
        json!({"os": {"name": "windows"}, "containers": [cloudflared(json!({}))]}),
    ));
    let pod = &out["spec"]["template"]["spec"];
    assert_eq!(pod.get("securityContext"), None);
    assert_eq!(pod.get("affinity"), None);
    assert_eq!(pod["automountServiceAccountToken"], false);
    assert_eq!(pod["containers"][0].get("securityContext"), None);
    assert_eq!(
        pod["containers"][0]["resources"]["limits"]["memory"],
        "256Mi"
    );
}

#[test]
fn objects_without_the_cloudflared_label_are_not_mutated() {
    let mut other = deployment(json!({"containers": [cloudflared(json!({}))]}));
    other["metadata"]["labels"] = json!({"cfargotunnel.com/app": "nginx"});
    assert_eq!(mutate_workload(&other), Ok(Patch::default()));
    other["metadata"]
        .as_object_mut()
        .expect("metadata")
        .remove("labels");
    assert_eq!(mutate_workload(&other), Ok(Patch::default()));
    assert_eq!(
        mutate_workload(&json!({"kind": "StatefulSet"})),
        Ok(Patch::default())
    );
}

#[test]
fn malformed_input_is_an_error_never_a_panic() {
    for v in [json!(null), json!([1]), json!("x"), json!(3)] {
        assert_eq!(mutate_workload(&v), Err(MutateError::NotAnObject));
        assert_eq!(restamp(&v, "abc"), None);
    }
    let mut broken = deployment(json!({}));
    broken["spec"]["template"]["spec"] = json!([]);
    let err = mutate_workload(&broken).expect_err("no pod spec");
    assert_eq!(
        err,
        MutateError::MissingPodSpec {
            path: "spec.template.spec".to_string()
        }
    );
    assert_eq!(
        err.to_string(),
        "spec.template.spec: missing or not an object; a cloudflared workload needs a pod spec"
    );
    let pod = json!({"kind": "Pod", "metadata": {"labels": labels()}});
    assert_eq!(
        mutate_workload(&pod),
        Err(MutateError::MissingPodSpec {
            path: "spec".to_string()
        })
    );
    let sts = json!({"kind": "StatefulSet", "metadata": {"labels": labels()}});
    assert_eq!(
        mutate_workload(&sts).map_err(|e| e.to_string()),
        Err(
            "kind: \"StatefulSet\" is not mutated; only Deployment, DaemonSet and Pod are"
                .to_string()
        )
    );
}

fn shapes() -> Vec<Value> {
    let args = json!({"args": ["tunnel", "--metrics", "0.0.0.0:2000", "run"]});
    let pods = vec![
        json!({}),
        json!({"containers": []}),
        json!({"containers": [cloudflared(json!({}))]}),
        json!({"containers": [cloudflared(args.clone())]}),
        json!({"containers": [cloudflared(json!({"securityContext": {"capabilities": {"drop": ["NET_RAW"]}}}))]}),
        json!({"containers": [cloudflared(json!({"securityContext": {"privileged": true}}))]}),
        json!({"containers": [cloudflared(json!({"securityContext": {"capabilities": {"drop": "ALL"}}}))]}),
        json!({"containers": [cloudflared(json!({"resources": null}))], "securityContext": null}),
        json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{}, {"matchFields": []}, {"matchExpressions": [{"key": "a", "operator": "Exists"}]}]}}}}),
        json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}}}),
        json!({"affinity": "weird", "containers": "weird"}),
        json!({"os": {"name": "windows"}, "containers": [cloudflared(args)]}),
        hardened_pod(Some(2000)),
    ];
    pods.into_iter()
        .flat_map(|pod| ["Deployment", "DaemonSet", "Pod"].map(|k| workload(k, pod.clone())))
        .collect()
}

#[test]
fn mutating_a_mutated_object_yields_an_empty_patch() {
    for object in shapes() {
        for checksum in [None, Some("abc")] {
            let once = mutated_with(&object, checksum);
            assert_eq!(
                mutate_workload_with_checksum(&once, checksum),
                Ok(Patch::default()),
                "{object}"
            );
        }
    }
}

#[test]
fn unknown_fields_survive_the_patch() {
    let object = deployment(json!({
        "someFutureField": {"x": 1},
        "containers": [cloudflared(json!({"futureContainerField": [1, {"y": true}],
            "securityContext": {"futureSecurityField": "z"}}))]}));
    let out = mutated(&object);
    let pod = &out["spec"]["template"]["spec"];
    assert_eq!(pod["someFutureField"], json!({"x": 1}));
    assert_eq!(
        pod["containers"][0]["futureContainerField"],
        json!([1, {"y": true}])
    );
    assert_eq!(
        pod["containers"][0]["securityContext"]["futureSecurityField"],
        "z"
    );
}

#[test]
fn the_sparse_patch_of_each_shape_equals_the_diff_of_a_hardened_clone() {
    for object in shapes() {
        for checksum in [None, Some("abc")] {
            let expected = clone_and_diff(&object, checksum).expect("mutation succeeds");
            assert_eq!(
                mutate_workload_with_checksum(&object, checksum),
                Ok(expected),
                "{object}"
            );
        }
    }
}
