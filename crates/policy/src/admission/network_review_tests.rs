//! NetworkRoutes and VirtualNetworks through the webhook's answer: judged by their rules with
//! the view's claims, ratcheted on UPDATE, refused when their spec cannot be read.
use std::sync::Arc;

use kube::core::DynamicObject;
use kube::core::admission::AdmissionRequest;
use serde_json::{Value, json};

use super::review::validate;
use crate::rules::view::AdmissionView;
use cftunnel_types::NetworkRoute;
use cftunnel_types::names::GROUP;

fn request(
    kind: &str,
    namespace: Option<&str>,
    operation: &str,
    object: Value,
    old: Option<Value>,
) -> AdmissionRequest<DynamicObject> {
    let review = json!({
        "uid": "u1", "kind": {"group": GROUP, "version": "v1alpha2", "kind": kind},
        "resource": {"group": GROUP, "version": "v1alpha2", "resource": "x"},
        "name": object["metadata"]["name"], "namespace": namespace, "operation": operation,
        "userInfo": {"username": "admin"}, "object": object, "oldObject": old, "dryRun": false
    });
    serde_json::from_value(review).unwrap_or_else(|e| panic!("request: {e}"))
}

fn route(name: &str, cidrs: &[&str], comment: &str) -> Value {
    json!({
        "apiVersion": "networking.cfargotunnel.com/v1alpha2", "kind": "NetworkRoute",
        "metadata": {"name": name, "namespace": "shop"},
        "spec": {"tunnelRef": {"name": "edge"}, "cidrs": cidrs, "comment": comment},
    })
}

fn view_holding(namespace: &str, cidr: &str) -> AdmissionView {
    let mut held: NetworkRoute =
        serde_json::from_value(route("lan", &[cidr], "")).unwrap_or_else(|e| panic!("route: {e}"));
    held.metadata.namespace = Some(namespace.into());
    let mut view = AdmissionView::default();
    view.network_routes = vec![Arc::new(held)];
    view
}

#[test]
fn a_network_route_is_judged_against_the_claims_of_the_view() {
    let view = view_holding("blog", "10.20.0.0/24");
    let create = request(
        "NetworkRoute",
        Some("shop"),
        "CREATE",
        route("mine", &["10.20.0.0/24"], ""),
        None,
    );
    let refused = validate(&create, &view);
    assert!(!refused.allowed);
    assert_eq!(
        refused.result.message,
        "spec.cidrs[0]: 10.20.0.0/24 is already routed by NetworkRoute blog/lan in the account's default network; remove it there first"
    );
    let warnings = refused.warnings.unwrap_or_default();
    assert!(
        warnings
            .iter()
            .any(|w| w.starts_with("spec.tunnelRef: Tunnel shop/edge is not known yet")),
        "{warnings:?}"
    );
    let free = request(
        "NetworkRoute",
        Some("shop"),
        "CREATE",
        route("mine", &["10.21.0.0/24"], ""),
        None,
    );
    assert!(validate(&free, &view).allowed);
}

#[test]
fn an_update_is_refused_only_for_what_it_adds() {
    let view = view_holding("blog", "10.20.0.0/24");
    let old = route("mine", &["10.20.0.0/24"], "");
    let comment = request(
        "NetworkRoute",
        Some("shop"),
        "UPDATE",
        route("mine", &["10.20.0.0/24"], "db"),
        Some(old.clone()),
    );
    assert!(validate(&comment, &view).allowed, "stored before the rule");
    let wider = request(
        "NetworkRoute",
        Some("shop"),
        "UPDATE",
        route("mine", &["10.20.0.0/24", "10.20.0.0/16"], ""),
        Some(old),
    );
    let refused = validate(&wider, &view);
    assert!(!refused.allowed);
    assert!(
        refused.result.message.starts_with(
            "spec.cidrs[1]: 10.20.0.0/16 overlaps 10.20.0.0/24, routed by NetworkRoute blog/lan"
        ),
        "{}",
        refused.result.message
    );
}

#[test]
fn a_virtual_network_is_judged_and_an_unreadable_spec_refused() {
    let view = AdmissionView::default();
    let network = |spec: Value| {
        json!({
            "apiVersion": "networking.cfargotunnel.com/v1alpha2", "kind": "VirtualNetwork",
            "metadata": {"name": "staging"}, "spec": spec,
        })
    };
    let bad = request(
        "VirtualNetwork",
        None,
        "CREATE",
        network(
            json!({"name": "staging", "cloudflare": {"accountId": "x", "secret": "cloudflare"}}),
        ),
        None,
    );
    let refused = validate(&bad, &view);
    assert!(!refused.allowed);
    assert!(
        refused
            .result
            .message
            .starts_with("spec.cloudflare.accountId: \"x\" is not an account id"),
        "{}",
        refused.result.message
    );
    let good = request(
        "VirtualNetwork",
        None,
        "CREATE",
        network(
            json!({"name": "staging", "cloudflare": {"accountId": "0123456789abcdef0123456789abcdef", "secret": "cloudflare"}}),
        ),
        None,
    );
    assert!(validate(&good, &view).allowed);
    let mut unreadable = route("mine", &["10.20.0.0/24"], "");
    unreadable["spec"]["cidrs"] = json!("10.20.0.0/24");
    let response = validate(
        &request("NetworkRoute", Some("shop"), "CREATE", unreadable, None),
        &view,
    );
    assert!(!response.allowed);
    assert!(
        response.result.message.starts_with("spec: cannot be read"),
        "{}",
        response.result.message
    );
}
