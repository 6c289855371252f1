use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::networking::v1::{IngressLoadBalancerIngress, IngressLoadBalancerStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::json;

use super::*;
use crate::routes::{RouteEntry, RouteReason, SourceKind, SourceRef, SourceStatus};
use cftunnel_types::{TunnelBinding, TunnelIdentity, TunnelKind};

fn time(secs: i64) -> Time {
    Time(jiff::Timestamp::from_second(secs).unwrap_or(jiff::Timestamp::UNIX_EPOCH))
}

fn binding() -> TunnelBinding {
    serde_json::from_value(json!({
        "apiVersion": "networking.cfargotunnel.com/v1alpha1",
        "kind": "TunnelBinding",
        "metadata": {"name": "web", "namespace": "shop", "generation": 3},
        "subjects": [{"name": "web"}],
        "tunnelRef": {"kind": "tunnel", "name": "edge"},
    }))
    .unwrap_or_else(|e| panic!("{e}"))
}

fn source(
    kind: SourceKind,
    tunnel: Option<TunnelIdentity>,
    host: &str,
    reason: RouteReason,
) -> SourceStatus {
    let source = SourceRef {
        kind,
        namespace: "shop".into(),
        name: "web".into(),
        uid: String::new(),
    };
    SourceStatus {
        tunnel,
        routes: vec![Arc::new(RouteEntry {
            hostname: host.into(),
            path: None,
            service: "http://web.shop.svc:80".into(),
            source: source.into(),
            reason,
            message: String::new(),
        })],
        reason,
        message: String::new(),
    }
}

fn routed(host: &str) -> SourceStatus {
    source(
        SourceKind::TunnelBinding,
        binding_tunnel(&binding()),
        host,
        RouteReason::Routed,
    )
}

fn ready(
    status: &cftunnel_types::TunnelBindingStatus,
) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
    find_ready(status.conditions.as_ref())
        .cloned()
        .unwrap_or_else(|| panic!("no Ready"))
}

fn note(hostname: Option<&str>, reason: &str, message: &str) -> DnsNote {
    DnsNote {
        hostname: hostname.map(str::to_string),
        reason: reason.into(),
        message: message.into(),
    }
}

#[test]
fn a_routed_binding_reports_its_hostnames_and_services() {
    let status = binding_status(&binding(), &routed("web.example.com"), &[], time(10));
    assert_eq!(status.hostnames.as_deref(), Some("web.example.com"));
    let services = status.services.clone().unwrap_or_default();
    assert_eq!(services[0].target, "http://web.shop.svc:80");
    let ready = ready(&status);
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("True", "Routed")
    );
    assert_eq!(ready.observed_generation, Some(3));
    assert_eq!(status.observed_generation, Some(3));
}

#[test]
fn dns_notes_of_its_own_hostnames_turn_ready_false_others_do_not() {
    let conflict = note(
        Some("WEB.example.com"),
        "DNSConflict",
        "DNS record CNAME web.example.com is not managed by Tunnel shop/edge",
    );
    let elsewhere = note(Some("other.example.com"), "DNSConflict", "x");
    let source = routed("web.example.com");
    let status = binding_status(
        &binding(),
        &source,
        std::slice::from_ref(&elsewhere),
        time(10),
    );
    assert_eq!(ready(&status).status, "True");
    let status = binding_status(
        &binding(),
        &source,
        &[elsewhere, conflict.clone()],
        time(10),
    );
    let ready = ready(&status);
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "DNSConflict")
    );
    assert_eq!(ready.message, conflict.message);
}

#[test]
fn the_transition_time_moves_only_when_ready_flips() {
    let mut b = binding();
    let first = binding_status(&b, &routed("web.example.com"), &[], time(10));
    b.status = Some(first.clone());
    let same = binding_status(&b, &routed("web.example.com"), &[], time(99));
    assert_eq!(same, first, "an unchanged outcome is an unchanged status");
    let problem = note(None, "DNSError", "DNS records not synced");
    let flipped = binding_status(&b, &routed("web.example.com"), &[problem], time(99));
    assert_eq!(ready(&flipped).last_transition_time, time(99));
}

#[test]
fn a_stored_binding_is_labelled_once_and_a_stale_name_label_removed() {
    let mut b = binding();
    assert_eq!(
        missing_labels(&b).map(serde_json::Value::Object),
        Some(json!({"cfargotunnel.com/name": "edge", "cfargotunnel.com/kind": "TunnelBinding"}))
    );
    b.metadata.labels = Some(
        [
            ("cfargotunnel.com/name", "edge"),
            ("cfargotunnel.com/kind", "TunnelBinding"),
            ("team", "shop"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect(),
    );
    assert_eq!(missing_labels(&b), None);
    b.spec.tunnel_ref.name = "e".repeat(64);
    assert_eq!(
        missing_labels(&b).map(serde_json::Value::Object),
        Some(json!({"cfargotunnel.com/name": null}))
    );
}

#[test]
fn a_binding_names_its_tunnel_by_identity() {
    let id = binding_tunnel(&binding()).unwrap_or_else(|| panic!("no tunnel"));
    assert_eq!(
        (id.kind, id.namespace.as_str(), id.name.as_str()),
        (TunnelKind::Tunnel, "shop", "edge")
    );
}

fn edge() -> TunnelIdentity {
    TunnelIdentity {
        kind: TunnelKind::ClusterTunnel,
        namespace: String::new(),
        name: "edge".into(),
    }
}

fn ingress_source(reason: RouteReason) -> SourceStatus {
    source(SourceKind::Ingress, Some(edge()), "app.example.com", reason)
}

fn hostnames(status: &IngressLoadBalancerStatus) -> Vec<String> {
    status
        .ingress
        .iter()
        .flatten()
        .filter_map(|i| i.hostname.clone())
        .collect()
}

#[test]
fn the_load_balancer_is_the_tunnel_while_a_route_is_served() {
    let id = "6ff42ae2-765d-4adf-8112-31c55c1551ef";
    let ids = BTreeMap::from([(edge(), id.to_string())]);
    assert_eq!(
        hostnames(&load_balancer(&ingress_source(RouteReason::Routed), &ids)),
        vec![format!("{id}.cfargotunnel.com")]
    );
    assert!(
        hostnames(&load_balancer(
            &ingress_source(RouteReason::HostnameConflict),
            &ids
        ))
        .is_empty()
    );
    assert!(
        hostnames(&load_balancer(
            &ingress_source(RouteReason::Routed),
            &BTreeMap::new()
        ))
        .is_empty(),
        "no tunnel id yet: no address"
    );
}

#[test]
fn an_ingress_of_another_class_keeps_only_the_entries_cftunnel_did_not_write() {
    let id = "6ff42ae2-765d-4adf-8112-31c55c1551ef";
    let ours = BTreeSet::from([id.to_string()]);
    let entry = |h: &str| IngressLoadBalancerIngress {
        hostname: Some(h.into()),
        ..IngressLoadBalancerIngress::default()
    };
    let have = IngressLoadBalancerStatus {
        ingress: Some(vec![
            entry(&format!("{id}.cfargotunnel.com")),
            entry("lb.other.example"),
        ]),
    };
    assert_eq!(
        hostnames(&without_ours(&have, &ours)),
        vec!["lb.other.example".to_string()]
    );
    let only_ours = IngressLoadBalancerStatus {
        ingress: Some(vec![entry(&format!("{id}.cfargotunnel.com"))]),
    };
    assert_eq!(without_ours(&only_ours, &ours).ingress, None);
}

#[test]
fn route_states_follow_the_reason() {
    let conflict = ingress_source(RouteReason::HostnameConflict);
    let routes = route_statuses(&conflict.routes);
    assert_eq!(routes[0].state, "Conflict");
    assert_eq!(routes[0].reason.as_deref(), Some("HostnameConflict"));
    assert_eq!(routes[0].source, "Ingress shop/web");
    let routed = route_statuses(&ingress_source(RouteReason::Routed).routes);
    assert_eq!(
        (routed[0].state.as_str(), routed[0].reason.clone()),
        ("Active", None)
    );
}
