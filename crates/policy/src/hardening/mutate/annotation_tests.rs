//! The checksum: its encoding, the ConfigMaps it covers, and its pod-template annotation.
use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::tests::{cloudflared, deployment, mutated_with, workload};
use super::*;

const CHECKSUM_POINTER: &str = "/spec/template/metadata/annotations/cfargotunnel.com~1checksum";

fn owned_by_tunnel(mut object: Value, api_version: &str, kind: &str) -> Value {
    object["metadata"]["labels"]["cfargotunnel.com/tunnel"] = json!("t1");
    object["metadata"]["ownerReferences"] = json!([{"apiVersion": api_version, "kind": kind, "name": "t1", "uid": "u", "controller": true}]);
    object
}

#[test]
fn the_checksum_is_added_to_user_managed_deployments_and_daemonsets_only() {
    let pod = json!({"containers": [cloudflared(json!({}))]});
    for kind in ["Deployment", "DaemonSet"] {
        let out = mutated_with(&workload(kind, pod.clone()), Some("abc"));
        assert_eq!(out.pointer(CHECKSUM_POINTER), Some(&json!("abc")), "{kind}");
    }
    let out = mutated_with(&workload("Pod", pod.clone()), Some("abc"));
    assert_eq!(out.pointer("/metadata/annotations"), None);
    for kind in ["Tunnel", "ClusterTunnel"] {
        for version in ["v1alpha1", "v1alpha2"] {
            let owned = owned_by_tunnel(
                deployment(pod.clone()),
                &format!("networking.cfargotunnel.com/{version}"),
                kind,
            );
            let out = mutated_with(&owned, Some("abc"));
            assert_eq!(out.pointer(CHECKSUM_POINTER), None, "{kind} {version}");
            assert_eq!(
                out["spec"]["template"]["spec"]["automountServiceAccountToken"],
                false
            );
            assert_eq!(restamp(&out, "def"), None);
        }
    }
    // Only both signs together mean a Tunnel controls the workload.
    for looks_owned in [
        owned_by_tunnel(deployment(pod.clone()), "example.com/v1", "Tunnel"),
        owned_by_tunnel(
            deployment(pod.clone()),
            "networking.cfargotunnel.com/v1alpha2",
            "TunnelBinding",
        ),
        {
            let mut o = owned_by_tunnel(
                deployment(pod.clone()),
                "networking.cfargotunnel.com/v1alpha2",
                "Tunnel",
            );
            o["metadata"]["labels"]
                .as_object_mut()
                .expect("labels")
                .remove("cfargotunnel.com/tunnel");
            o
        },
    ] {
        let out = mutated_with(&looks_owned, Some("abc"));
        assert_eq!(out.pointer(CHECKSUM_POINTER), Some(&json!("abc")));
    }
}

#[test]
fn an_existing_checksum_is_left_to_restamp() {
    let mut object = deployment(json!({"containers": []}));
    object["spec"]["template"]["metadata"]["annotations"] =
        json!({"cfargotunnel.com/checksum": "old", "a": "b"});
    let out = mutated_with(&object, Some("new"));
    assert_eq!(
        out["spec"]["template"]["metadata"]["annotations"],
        json!({"cfargotunnel.com/checksum": "old", "a": "b"})
    );
    assert_eq!(restamp(&out, "old"), None);
    let patch = restamp(&out, "new").expect("a differing checksum is restamped");
    assert_eq!(
        serde_json::to_value(&patch).expect("serializable"),
        json!([{"op": "replace", "path": CHECKSUM_POINTER, "value": "new"}])
    );
    let mut doc = out.clone();
    json_patch::patch(&mut doc, &patch).expect("applies");
    assert_eq!(
        doc["spec"]["template"]["metadata"]["annotations"],
        json!({"cfargotunnel.com/checksum": "new", "a": "b"})
    );
    assert_eq!(restamp(&doc, "new"), None);
}

#[test]
fn restamp_adds_a_missing_checksum_and_skips_pods() {
    let object = deployment(json!({"containers": []}));
    let patch = restamp(&object, "abc").expect("missing checksum is stamped");
    assert_eq!(
        serde_json::to_value(&patch).expect("serializable"),
        json!([{"op": "add", "path": "/spec/template/metadata/annotations", "value": {"cfargotunnel.com/checksum": "abc"}}])
    );
    assert_eq!(
        restamp(&workload("Pod", json!({"containers": []})), "abc"),
        None
    );
    let mut unlabelled = object.clone();
    unlabelled["metadata"]["labels"] = json!({});
    assert_eq!(restamp(&unlabelled, "abc"), None);
}

fn cm(name: &str, data: &[(&str, &str)], binary: &[(&str, &str)]) -> ConfigMapContent {
    let map = |entries: &[(&str, &str)]| -> BTreeMap<String, String> {
        entries
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    (name.to_string(), map(data), map(binary))
}

#[test]
fn the_config_checksum_is_stable_and_order_independent() {
    let a = cm("cloudflared-config", &[("config.yaml", "tunnel: t\n")], &[]);
    let b = cm("extra", &[("x", "1")], &[("cert.der", "AAEC")]);
    let sum = config_checksum(&[a.clone(), b.clone()]);
    // Pinned: a different encoding would roll every user-managed cloudflared pod on upgrade.
    assert_eq!(sum, PINNED_CHECKSUM);
    assert_eq!(config_checksum(&[b, a]), sum);
    assert_eq!(sum.len(), 64);
    assert!(
        sum.chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
    );
}

const PINNED_CHECKSUM: &str = "690547500bdb10001cb965587036fde92c70b7e3e51db68f702d4836dcbc8691";

#[test]
fn the_config_checksum_changes_with_any_data() {
    let base = vec![cm("a", &[("k", "v")], &[("b", "AQ==")])];
    let variants = vec![
        vec![],
        vec![cm("", &[], &[])],
        vec![cm("a2", &[("k", "v")], &[("b", "AQ==")])],
        vec![cm("a", &[("k2", "v")], &[("b", "AQ==")])],
        vec![cm("a", &[("k", "v2")], &[("b", "AQ==")])],
        vec![cm("a", &[("k", "v")], &[("b", "Ag==")])],
        vec![cm("a", &[("k", "v")], &[("c", "AQ==")])],
        vec![cm("a", &[("k", "v")], &[])],
        vec![cm("a", &[("k", "v"), ("b", "AQ==")], &[])],
        vec![cm("a", &[("k", "v")], &[("b", "AQ==")]), cm("z", &[], &[])],
        vec![cm("a", &[("k", "v")], &[]), cm("b", &[], &[("b", "AQ==")])],
    ];
    let mut seen = vec![config_checksum(&base)];
    for variant in &variants {
        let sum = config_checksum(variant);
        assert!(!seen.contains(&sum), "{variant:?} collides");
        seen.push(sum);
    }
    // Concatenations that would read the same without length prefixes.
    assert_ne!(
        config_checksum(&[cm("a", &[("bc", "d")], &[])]),
        config_checksum(&[cm("ab", &[("c", "d")], &[])])
    );
    assert_ne!(
        config_checksum(&[cm("a", &[("k", "vk"), ("l", "")], &[])]),
        config_checksum(&[cm("a", &[("k", "v"), ("kl", "")], &[])])
    );
}

#[test]
fn mounted_config_maps_lists_direct_projected_and_optional_ones() {
    let pod = json!({"volumes": [
        {"name": "config", "configMap": {"name": "cf-config"}},
        {"name": "creds", "secret": {"secretName": "cf-creds"}},
        {"name": "opt", "configMap": {"name": "b-optional", "optional": true}},
        {"name": "proj", "projected": {"sources": [
            {"configMap": {"name": "a-projected", "items": [{"key": "k", "path": "p"}]}},
            {"secret": {"name": "s"}},
            {"configMap": {"name": "cf-config"}},
            {"downwardAPI": {"items": []}}]}},
        {"name": "scratch", "emptyDir": {}},
    ]});
    assert_eq!(
        mounted_config_maps(&pod),
        vec!["a-projected", "b-optional", "cf-config"]
    );
    assert!(mounted_config_maps(&json!({"containers": []})).is_empty());
    assert!(mounted_config_maps(&json!({"volumes": "x"})).is_empty());
    assert!(mounted_config_maps(&json!(null)).is_empty());
}
