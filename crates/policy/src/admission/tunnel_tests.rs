//! Tunnel / ClusterTunnel rules, one behaviour per test, exact messages.
use serde_json::json;

use super::tunnel::{TunnelView, validate, validate_update};
use cftunnel_types::cel;
use cftunnel_types::{TunnelSpec, TunnelStatus};

fn spec(value: serde_json::Value) -> TunnelSpec {
    serde_json::from_value(value).expect("spec JSON")
}

fn base() -> serde_json::Value {
    json!({
        "newTunnel": {"name": "shop"},
        "cloudflare": {"domain": "example.com", "secret": "cloudflare-secrets", "accountId": "0123456789abcdef0123456789abcdef"}
    })
}

fn with(
    mut value: serde_json::Value,
    pointer: &str,
    field: serde_json::Value,
) -> serde_json::Value {
    let (parent, key) = pointer.rsplit_once('/').expect("pointer");
    value.pointer_mut(parent).expect("parent")[key] = field;
    value
}

fn messages(name: &str, s: &TunnelSpec) -> Vec<String> {
    validate(TunnelView {
        name,
        spec: s,
        status: None,
    })
    .violations
    .iter()
    .map(|v| v.message().to_string())
    .collect()
}

#[test]
fn accepts_the_go_operator_documented_shape() {
    let s = spec(json!({
        "newTunnel": {"name": "k8s-tunnel"},
        "size": 2,
        "cloudflare": {"email": "me@example.com", "domain": "example.com", "secret": "cloudflare-secrets", "accountName": "My Account"}
    }));
    assert_eq!(messages("k8s-tunnel", &s), Vec::<String>::new());
    assert_eq!(s.protocol, "auto");
    assert_eq!(s.fallback_target, "http_status:404");
    assert_eq!(s.cloudflare.api_token_key, "CLOUDFLARE_API_TOKEN");
}

#[test]
fn rejects_both_new_and_existing_tunnel() {
    let s = spec(with(base(), "/existingTunnel", json!({"name": "old"})));
    assert_eq!(messages("t", &s), vec![cel::BOTH_TUNNEL_SOURCES]);
}

#[test]
fn an_empty_existing_tunnel_does_not_count_as_set() {
    let s = spec(with(
        base(),
        "/existingTunnel",
        json!({"id": "", "name": ""}),
    ));
    assert_eq!(messages("t", &s), Vec::<String>::new());
    let mut neither = base();
    neither.as_object_mut().expect("object").remove("newTunnel");
    let neither = with(neither, "/existingTunnel", json!({}));
    assert_eq!(messages("t", &spec(neither)), vec![cel::NO_TUNNEL_SOURCE]);
}

#[test]
fn rejects_a_malformed_existing_tunnel_id_quoting_it() {
    let mut v = base();
    v.as_object_mut().expect("object").remove("newTunnel");
    let s = spec(with(v, "/existingTunnel", json!({"id": "not-a-uuid"})));
    let m = messages("t", &s);
    assert_eq!(m.len(), 1);
    assert!(
        m[0].starts_with("spec.existingTunnel.id: \"not-a-uuid\" is not a tunnel id"),
        "{}",
        m[0]
    );
}

#[test]
fn rejects_an_empty_or_uuid_shaped_new_tunnel_name() {
    let empty = spec(with(base(), "/newTunnel/name", json!("")));
    assert_eq!(
        messages("t", &empty),
        vec!["spec.newTunnel.name: must not be empty; give the name of the tunnel to create"]
    );
    let uuid = spec(with(
        base(),
        "/newTunnel/name",
        json!("6ff42ae2-765d-4adf-8112-31c55c1551ef"),
    ));
    assert!(messages("t", &uuid)[0].contains("looks like a tunnel id"));
}

#[test]
fn rejects_a_name_longer_than_63_characters() {
    assert_eq!(
        messages(&"a".repeat(64), &spec(base())),
        vec![cel::NAME_TOO_LONG]
    );
    assert_eq!(
        messages(&"a".repeat(63), &spec(base())),
        Vec::<String>::new()
    );
}

#[test]
fn lists_every_violation_of_the_cloudflare_block_at_once() {
    let s = spec(json!({
        "newTunnel": {"name": "x"},
        "cloudflare": {"domain": "*.example.com", "secret": "Bad_Secret"},
        "protocol": "udp",
        "fallbackTarget": "http://web/path"
    }));
    let m = messages("t", &s);
    assert_eq!(m.len(), 5, "{m:#?}");
    assert!(m[0].starts_with("spec.cloudflare.domain: \"*.example.com\" is not a DNS zone name"));
    assert!(m[1].starts_with("spec.cloudflare.secret: \"Bad_Secret\" is not a valid Secret name"));
    assert!(
        m[2].starts_with(
            "spec.cloudflare: neither accountId nor accountName is set; set accountId"
        )
    );
    assert_eq!(
        m[3],
        "spec.protocol: \"udp\" is not supported; use auto, quic or http2"
    );
    assert!(m[4].starts_with("spec.fallbackTarget: \"http://web/path\" has a path"));
}

#[test]
fn rejects_an_account_id_that_is_not_32_hex() {
    let s = spec(with(base(), "/cloudflare/accountId", json!("12345")));
    assert!(
        messages("t", &s)[0]
            .starts_with("spec.cloudflare.accountId: \"12345\" is not an account id")
    );
}

#[test]
fn deploy_patch_must_be_an_object_that_keeps_identity_and_hardening() {
    let cases = [
        ("[1, 2]", "spec.deployPatch: must be a YAML or JSON object"),
        ("{not yaml", "spec.deployPatch: is not valid YAML or JSON"),
        (
            "spec: {selector: {matchLabels: {a: b}}}",
            "spec.deployPatch: spec.selector: cannot be patched",
        ),
        (
            "spec: {template: {spec: {serviceAccountName: admin}}}",
            "spec.deployPatch: spec.template.spec.serviceAccountName: cannot be set",
        ),
        (
            "spec: {template: {spec: {automountServiceAccountToken: true}}}",
            "spec.deployPatch: spec.template.spec.automountServiceAccountToken: true is refused",
        ),
        (
            "spec: {template: {spec: {hostNetwork: true}}}",
            "spec.deployPatch: spec.template.spec.hostNetwork: true is refused",
        ),
        (
            "spec: {template: {spec: {containers: [{name: cloudflared, securityContext: {privileged: true}}]}}}",
            "spec.deployPatch: spec.template.spec.containers[0].securityContext.privileged: true is refused",
        ),
        (
            "spec: {template: {spec: {containers: [{name: cloudflared, $patch: delete}]}}}",
            "spec.deployPatch: spec.template.spec.containers: the cloudflared container cannot be removed",
        ),
        (
            "spec: {template: {spec: {$patch: replace, containers: [{name: sidecar, image: 'busybox:1.37'}]}}}",
            "spec.deployPatch: spec.template.spec.containers: the cloudflared container cannot be removed",
        ),
        (
            "spec: {template: {spec: {containers: null}}}",
            "spec.deployPatch: spec.template.spec.containers: the cloudflared container cannot be removed",
        ),
        (
            "spec: {template: {spec: {containers: [{name: sidecar, image: 'busybox:1.37'}, {$patch: replace}]}}}",
            "spec.deployPatch: spec.template.spec.containers: the cloudflared container cannot be removed",
        ),
    ];
    for (patch, expected) in cases {
        let s = spec(with(base(), "/deployPatch", json!(patch)));
        let m = messages("t", &s);
        assert_eq!(m.len(), 1, "{patch}: {m:#?}");
        assert!(m[0].starts_with(expected), "{patch}: {}", m[0]);
    }
    let fine = spec(with(
        base(),
        "/deployPatch",
        json!("spec: {replicas: 3, template: {spec: {nodeSelector: {disk: ssd}}}}"),
    ));
    assert_eq!(messages("t", &fine), Vec::<String>::new());
}

#[test]
fn selector_routes_need_a_selector() {
    let s = spec(with(
        base(),
        "/allowedRoutes",
        json!({"namespaces": {"from": "Selector"}}),
    ));
    assert!(
        messages("t", &s)[0]
            .starts_with("spec.allowedRoutes.namespaces.selector: is required with from: Selector")
    );
    let bad = spec(with(
        base(),
        "/allowedRoutes",
        json!({"namespaces": {"from": "Everyone"}}),
    ));
    assert_eq!(
        messages("t", &bad),
        vec![
            "spec.allowedRoutes.namespaces.from: \"Everyone\" is not supported; use All, Same or Selector"
        ]
    );
}

fn update(new: &TunnelSpec, old: &TunnelSpec, status: Option<&TunnelStatus>) -> Vec<String> {
    let new = TunnelView {
        name: "t",
        spec: new,
        status,
    };
    let old = TunnelView {
        name: "t",
        spec: old,
        status,
    };
    validate_update(new, old)
        .violations
        .iter()
        .map(|v| v.message().to_string())
        .collect()
}

#[test]
fn new_tunnel_name_is_immutable_only_once_the_tunnel_exists() {
    let old = spec(base());
    let renamed = spec(with(base(), "/newTunnel/name", json!("shop-2")));
    assert_eq!(
        update(&renamed, &old, None),
        Vec::<String>::new(),
        "a typo can be fixed before creation"
    );
    let created = TunnelStatus {
        tunnel_id: Some("6ff42ae2-765d-4adf-8112-31c55c1551ef".into()),
        ..Default::default()
    };
    assert_eq!(
        update(&renamed, &old, Some(&created)),
        vec![cel::NEW_TUNNEL_NAME_IMMUTABLE]
    );
}

#[test]
fn account_and_source_switches_are_refused() {
    let old = spec(base());
    let other_account = spec(with(
        base(),
        "/cloudflare/accountId",
        json!("fedcba9876543210fedcba9876543210"),
    ));
    assert_eq!(
        update(&other_account, &old, None),
        vec![cel::ACCOUNT_IMMUTABLE]
    );
    let mut existing = base();
    existing
        .as_object_mut()
        .expect("object")
        .remove("newTunnel");
    let existing = spec(with(existing, "/existingTunnel", json!({"name": "old"})));
    assert_eq!(
        update(&existing, &old, None),
        vec![cel::TUNNEL_SOURCE_SWITCH]
    );
    let renamed = {
        let mut v = base();
        v.as_object_mut().expect("object").remove("newTunnel");
        spec(with(v, "/existingTunnel", json!({"name": "other"})))
    };
    assert_eq!(
        update(&renamed, &existing, None),
        vec![cel::EXISTING_TUNNEL_IMMUTABLE]
    );
}

#[test]
fn ratcheting_refuses_only_new_violations() {
    let broken = spec(with(base(), "/protocol", json!("udp")));
    assert_eq!(
        update(&broken, &broken, None),
        Vec::<String>::new(),
        "an old violation does not block updates"
    );
    let worse = spec(with(
        with(base(), "/protocol", json!("udp")),
        "/fallbackTarget",
        json!("ftp://x"),
    ));
    let m = update(&worse, &broken, None);
    assert_eq!(m.len(), 1);
    assert!(m[0].starts_with("spec.fallbackTarget:"), "{}", m[0]);
}
