//! Strategic merge on a Deployment: one behaviour per test, exact resulting JSON.
use serde_json::{Value, json};

use super::strategic_merge::strategic_merge;
use super::strategic_merge_keys::DEPLOYMENT;

fn base() -> Value {
    json!({"spec": {"replicas": 2, "template": {"spec": {
        "containers": [{
            "name": "cloudflared", "image": "cf:1",
            "args": ["tunnel", "run"],
            "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
            "ports": [{"name": "metrics", "containerPort": 2000, "protocol": "TCP"}],
            "volumeMounts": [{"name": "creds", "mountPath": "/creds"}, {"name": "config", "mountPath": "/config"}]
        }],
        "volumes": [{"name": "creds", "secret": {"secretName": "s"}}, {"name": "config", "configMap": {"name": "c"}}],
        "tolerations": [{"key": "a", "operator": "Exists"}]
    }}}})
}

fn apply(patch: Value) -> Value {
    strategic_merge(&base(), &patch, DEPLOYMENT).expect("merges")
}

fn pod(v: &Value) -> &Value {
    &v["spec"]["template"]["spec"]
}

#[test]
fn containers_merge_by_name_and_a_new_sidecar_goes_first() {
    let out = apply(json!({"spec": {"template": {"spec": {"containers": [
        {"name": "cloudflared", "env": [{"name": "C", "value": "3"}]},
        {"name": "sidecar", "image": "busybox:1"}
    ]}}}}));
    let containers = &pod(&out)["containers"];
    assert_eq!(containers[0]["name"], json!("cloudflared"));
    assert_eq!(containers[0]["image"], json!("cf:1"));
    assert_eq!(
        containers[0]["env"],
        json!([{"name": "C", "value": "3"}, {"name": "A", "value": "1"}, {"name": "B", "value": "2"}])
    );
    assert_eq!(
        containers[1],
        json!({"name": "sidecar", "image": "busybox:1"})
    );
}

#[test]
fn env_merges_by_name_keeping_live_order() {
    let out = apply(json!({"spec": {"template": {"spec": {"containers": [
        {"name": "cloudflared", "env": [{"name": "B", "value": "changed"}]}
    ]}}}}));
    assert_eq!(
        pod(&out)["containers"][0]["env"],
        json!([{"name": "A", "value": "1"}, {"name": "B", "value": "changed"}])
    );
}

#[test]
fn ports_merge_by_container_port() {
    let out = apply(json!({"spec": {"template": {"spec": {"containers": [
        {"name": "cloudflared", "ports": [{"containerPort": 2000, "name": "prom"}, {"containerPort": 7844, "protocol": "UDP"}]}
    ]}}}}));
    assert_eq!(
        pod(&out)["containers"][0]["ports"],
        json!([{"name": "prom", "containerPort": 2000, "protocol": "TCP"}, {"containerPort": 7844, "protocol": "UDP"}])
    );
}

#[test]
fn volumes_merge_by_name_and_mounts_by_mount_path() {
    let out = apply(json!({"spec": {"template": {"spec": {
        "volumes": [{"name": "tmp", "emptyDir": {}}],
        "containers": [{"name": "cloudflared", "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}, {"name": "cfg2", "mountPath": "/config"}]}]
    }}}}));
    assert_eq!(
        pod(&out)["volumes"],
        json!([{"name": "tmp", "emptyDir": {}}, {"name": "creds", "secret": {"secretName": "s"}}, {"name": "config", "configMap": {"name": "c"}}])
    );
    assert_eq!(
        pod(&out)["containers"][0]["volumeMounts"],
        json!([{"name": "tmp", "mountPath": "/tmp"}, {"name": "creds", "mountPath": "/creds"}, {"name": "cfg2", "mountPath": "/config"}])
    );
}

#[test]
fn lists_without_merge_key_are_replaced() {
    let out = apply(json!({"spec": {"template": {"spec": {
        "tolerations": [{"key": "b", "operator": "Equal", "value": "x"}],
        "containers": [{"name": "cloudflared", "args": ["version"]}]
    }}}}));
    assert_eq!(
        pod(&out)["tolerations"],
        json!([{"key": "b", "operator": "Equal", "value": "x"}])
    );
    assert_eq!(pod(&out)["containers"][0]["args"], json!(["version"]));
}

#[test]
fn patch_delete_removes_a_volume_by_name() {
    let out = apply(
        json!({"spec": {"template": {"spec": {"volumes": [{"name": "config", "$patch": "delete"}]}}}}),
    );
    assert_eq!(
        pod(&out)["volumes"],
        json!([{"name": "creds", "secret": {"secretName": "s"}}])
    );
}

#[test]
fn patch_replace_takes_the_containers_list_as_given() {
    let out = apply(json!({"spec": {"template": {"spec": {"containers": [
        {"name": "only", "image": "x:1"}, {"$patch": "replace"}
    ]}}}}));
    assert_eq!(
        pod(&out)["containers"],
        json!([{"name": "only", "image": "x:1"}])
    );
}

#[test]
fn patch_replace_and_delete_on_maps() {
    let out = apply(json!({"spec": {"template": {"spec": {"volumes": [
        {"name": "creds", "secret": {"$patch": "replace", "secretName": "other"}}
    ]}}}}));
    assert_eq!(
        pod(&out)["volumes"][0],
        json!({"name": "creds", "secret": {"secretName": "other"}})
    );

    let mut live = base();
    live["spec"]["template"]["spec"]["securityContext"] = json!({"runAsNonRoot": true});
    let delete = json!({"spec": {"template": {"spec": {"securityContext": {"$patch": "delete"}}}}});
    let out = strategic_merge(&live, &delete, DEPLOYMENT).expect("merges");
    assert_eq!(pod(&out)["securityContext"], json!({}));
    // Where nothing lives yet, a map carrying a directive is dropped, as the API server does.
    assert_eq!(pod(&apply(delete)).get("securityContext"), None);
}

#[test]
fn set_element_order_reorders_the_merged_list() {
    let out = apply(json!({"spec": {"template": {"spec": {"containers": [{
        "name": "cloudflared",
        "$setElementOrder/env": [{"name": "B"}, {"name": "A"}],
        "env": [{"name": "A", "value": "one"}]
    }]}}}}));
    assert_eq!(
        pod(&out)["containers"][0]["env"],
        json!([{"name": "B", "value": "2"}, {"name": "A", "value": "one"}])
    );
}

#[test]
fn set_element_order_must_agree_with_the_patch_order() {
    let err = strategic_merge(
        &base(),
        &json!({"spec": {"template": {"spec": {"containers": [{
            "name": "cloudflared",
            "$setElementOrder/env": [{"name": "A"}, {"name": "B"}],
            "env": [{"name": "B", "value": "x"}, {"name": "A", "value": "y"}]
        }]}}}}),
        DEPLOYMENT,
    )
    .expect_err("refused");
    assert_eq!(
        err.to_string(),
        "spec.template.spec.containers[0].$setElementOrder/env: does not list the patch's elements in the patch's order; list every patched element, in the same order as the patch"
    );
}

#[test]
fn null_deletes_a_key() {
    let out = apply(
        json!({"spec": {"replicas": null, "template": {"spec": {"containers": [{"name": "cloudflared", "args": null}]}}}}),
    );
    assert_eq!(out["spec"].get("replicas"), None);
    assert_eq!(pod(&out)["containers"][0].get("args"), None);
}

#[test]
fn retain_keys_clears_unlisted_fields() {
    let out = apply(json!({"spec": {"template": {"spec": {"volumes": [
        {"name": "config", "$retainKeys": ["name", "emptyDir"], "emptyDir": {}}
    ]}}}}));
    assert_eq!(
        pod(&out)["volumes"][1],
        json!({"name": "config", "emptyDir": {}})
    );
    let err = strategic_merge(
        &base(),
        &json!({"spec": {"template": {"spec": {"volumes": [{"name": "config", "$retainKeys": ["name"], "emptyDir": {}}]}}}}),
        DEPLOYMENT,
    )
    .expect_err("refused");
    assert_eq!(
        err.to_string(),
        "spec.template.spec.volumes[0].$retainKeys: does not list \"emptyDir\", which the patch sets; add \"emptyDir\" to $retainKeys"
    );
}

#[test]
fn delete_from_primitive_list_and_primitive_merge() {
    let live = json!({"metadata": {"finalizers": ["a", "b", "c"]}});
    let out = strategic_merge(
        &live,
        &json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["b"]}}),
        DEPLOYMENT,
    )
    .expect("merges");
    assert_eq!(out["metadata"]["finalizers"], json!(["a", "c"]));
    let out = strategic_merge(
        &live,
        &json!({"metadata": {"finalizers": ["d", "a"]}}),
        DEPLOYMENT,
    )
    .expect("merges");
    assert_eq!(out["metadata"]["finalizers"], json!(["d", "a", "b", "c"]));
}

#[test]
fn an_element_without_its_merge_key_is_refused_with_its_path() {
    let err = strategic_merge(
        &base(),
        &json!({"spec": {"template": {"spec": {"containers": [{"image": "x:1"}]}}}}),
        DEPLOYMENT,
    )
    .expect_err("refused");
    assert_eq!(
        err.to_string(),
        "spec.template.spec.containers[0]: has no \"name\", the merge key of this list; add \"name\", or replace the whole list with $patch: replace"
    );
}

#[test]
fn new_fields_are_taken_without_nulls_or_directives() {
    let out = apply(
        json!({"spec": {"template": {"spec": {"affinity": {"nodeAffinity": null, "podAntiAffinity": {"x": 1}}}}}}),
    );
    assert_eq!(pod(&out)["affinity"], json!({"podAntiAffinity": {"x": 1}}));
}
