//! Ratcheting in the route model: stored bindings in shapes the Go operator routed and
//! admission refuses today are served its way, with a `LegacyRoute` reason saying why.
use serde_json::json;

use super::fixtures::{binding, identity, service, tunnel};
use super::*;
use cftunnel_types::TunnelKind;

fn world_of(subjects: serde_json::Value, ports: serde_json::Value) -> (RouteTable, SourceStatus) {
    let world = RouteWorld {
        tunnels: vec![tunnel(TunnelKind::Tunnel, "shop", "edge", "example.com")],
        bindings: vec![binding(
            "shop",
            "old",
            1,
            json!({"kind": "Tunnel", "name": "edge"}),
            subjects,
        )],
        services: vec![service("shop", "web", 0, json!({}), json!({}), ports)],
        ..RouteWorld::default()
    };
    let table = compute_routes(&world);
    let status = table
        .sources
        .values()
        .next()
        .cloned()
        .unwrap_or_else(|| panic!("no source status"));
    (table, status)
}

fn served(table: &RouteTable) -> Vec<(String, String)> {
    table.tunnels[&identity(TunnelKind::Tunnel, "shop", "edge")]
        .routes
        .iter()
        .map(|r| (r.hostname.clone(), r.service.clone()))
        .collect()
}

#[test]
fn an_unknown_protocol_is_routed_as_inferred_from_the_service_port() {
    let (table, status) = world_of(
        json!([{"name": "web", "spec": {"protocol": "quic"}}]),
        json!([{"port": 443}]),
    );
    assert_eq!(
        served(&table),
        [(
            "web.example.com".to_string(),
            "https://web.shop.svc:443".to_string()
        )]
    );
    assert_eq!(
        (status.reason, status.ready_status()),
        (RouteReason::LegacyRoute, "True")
    );
    assert_eq!(
        status.message,
        "routes web.example.com through Tunnel shop/edge; subjects[0].spec.protocol: \"quic\" is not supported; use http, https, tcp, udp, ssh, rdp or smb (refused if applied today; routed with the protocol inferred from the Service port, as the Go operator did)"
    );
    assert_eq!(status.routes[0].reason, RouteReason::LegacyRoute);
}

#[test]
fn a_protocol_in_upper_case_is_not_taken_as_written_but_inferred() {
    // The Go operator's lookup was case-sensitive: "HTTPS" on port 8080 was served as http.
    let (table, status) = world_of(
        json!([{"name": "web", "spec": {"protocol": "HTTPS"}}]),
        json!([{"port": 8080}]),
    );
    assert_eq!(
        served(&table),
        [(
            "web.example.com".to_string(),
            "http://web.shop.svc:8080".to_string()
        )]
    );
    assert_eq!(status.reason, RouteReason::LegacyRoute);
    assert!(
        status
            .message
            .contains("subjects[0].spec.protocol: \"HTTPS\" is not supported"),
        "{}",
        status.message
    );
}

#[test]
fn a_subject_kind_in_another_case_routes_the_service() {
    let (table, status) = world_of(
        json!([{"kind": "service", "name": "web"}]),
        json!([{"port": 80}]),
    );
    assert_eq!(
        served(&table),
        [(
            "web.example.com".to_string(),
            "http://web.shop.svc:80".to_string()
        )]
    );
    assert_eq!(
        (status.reason, status.ready_status()),
        (RouteReason::LegacyRoute, "True")
    );
    assert_eq!(
        status.message,
        "routes web.example.com through Tunnel shop/edge; subjects[0].kind: \"service\" is not supported; only Service can be bound (refused if applied today; routed to the Service, as the Go operator did)"
    );
}

#[test]
fn two_oddities_give_two_notes_each_once() {
    let (_, status) = world_of(
        json!([{"kind": "SERVICE", "name": "web", "spec": {"protocol": "Ssh"}}]),
        json!([{"port": 22}]),
    );
    assert_eq!(status.reason, RouteReason::LegacyRoute);
    assert_eq!(
        status.message,
        "routes web.example.com through Tunnel shop/edge; subjects[0].kind: \"SERVICE\" is not supported; only Service can be bound (refused if applied today; routed to the Service, as the Go operator did); subjects[0].spec.protocol: \"Ssh\" is not supported; use http, https, tcp, udp, ssh, rdp or smb (refused if applied today; routed with the protocol inferred from the Service port, as the Go operator did)"
    );
    assert_eq!(status.routes[0].service, "ssh://web.shop.svc:22");
}

#[test]
fn other_refusals_still_refuse_and_a_missing_service_outranks_the_note() {
    let (table, status) = world_of(
        json!([{"kind": "Pod", "name": "web"}]),
        json!([{"port": 80}]),
    );
    assert!(served(&table).is_empty());
    assert_eq!(status.reason, RouteReason::InvalidRoute);
    assert_eq!(
        status.message,
        "subjects[0].kind: \"Pod\" is not supported; only Service can be bound"
    );
    let (table, status) = world_of(
        json!([{"name": "gone", "spec": {"protocol": "Http"}}]),
        json!([{"port": 80}]),
    );
    assert_eq!(
        served(&table),
        [(
            "gone.example.com".to_string(),
            "http_status:404".to_string()
        )]
    );
    assert_eq!(status.reason, RouteReason::ServiceNotFound);
    assert!(
        status.message.contains("Service shop/gone does not exist")
            && status.message.contains("\"Http\" is not supported"),
        "{}",
        status.message
    );
}
