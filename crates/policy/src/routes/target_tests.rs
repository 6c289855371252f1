//! The route model: identities, ports, protocols, targets; exact outcomes.
use serde_json::{Value, json};

use super::fixtures::*;
use super::*;
use crate::routes::{OriginRequest, Route};
use cftunnel_types::TunnelKind;

#[test]
fn a_binding_routes_its_service_on_the_default_hostname_and_first_port() {
    let web = service(
        "shop",
        "web",
        0,
        json!({}),
        json!({}),
        json!([{"port": 8080}, {"port": 9090}]),
    );
    let table = compute_routes(&world_with(
        vec![binding("shop", "b", 1, to_edge(), json!([{"name": "web"}]))],
        vec![web],
    ));
    let edge = &table.tunnels[&shop_edge()];
    assert_eq!(
        edge.routes,
        vec![route("web.example.com", None, "http://web.shop.svc:8080")]
    );
    assert_eq!(
        edge.dns,
        vec![DnsName {
            fqdn: "web.example.com".into(),
            dns_updates_disabled: false
        }]
    );
    let status = source(&table, SourceKind::TunnelBinding, "shop", "b");
    assert_eq!(
        (
            status.reason,
            status.ready_status(),
            status.message.as_str()
        ),
        (
            RouteReason::Routed,
            "True",
            "routes web.example.com through Tunnel shop/edge"
        )
    );
    assert_eq!(status.hostnames(), vec!["web.example.com"]);
    assert_eq!(status.tunnel, Some(shop_edge()));
    // The ClusterTunnel of the same name is known, and routes nothing.
    assert_eq!(
        *table.tunnels[&identity(TunnelKind::ClusterTunnel, "", "edge")],
        TunnelRoutes::default()
    );
}

#[test]
fn same_named_tunnels_in_two_namespaces_never_share_routes() {
    let mut world = world_with(
        vec![
            binding(
                "shop",
                "b",
                1,
                to_edge(),
                json!([{"name": "web", "spec": {"fqdn": "shop.example.com"}}]),
            ),
            binding(
                "blog",
                "b",
                1,
                to_edge(),
                json!([{"name": "web", "spec": {"fqdn": "blog.example.com"}}]),
            ),
        ],
        vec![http_service("shop", "web"), http_service("blog", "web")],
    );
    world
        .tunnels
        .push(tunnel(TunnelKind::Tunnel, "blog", "edge", "example.com"));
    let table = compute_routes(&world);
    let hosts = |ns: &str| -> Vec<String> {
        table.tunnels[&identity(TunnelKind::Tunnel, ns, "edge")]
            .routes
            .iter()
            .map(|r| format!("{} -> {}", r.hostname, r.service))
            .collect()
    };
    assert_eq!(
        hosts("shop"),
        ["shop.example.com -> http://web.shop.svc:80"]
    );
    assert_eq!(
        hosts("blog"),
        ["blog.example.com -> http://web.blog.svc:80"]
    );
}

#[test]
fn ports_are_chosen_by_name_or_number_and_a_missing_one_answers_404() {
    let api = service(
        "shop",
        "api",
        0,
        json!({}),
        json!({}),
        json!([{"name": "metrics", "port": 9090}, {"name": "web", "port": 8443, "appProtocol": "https"}]),
    );
    let subjects = json!([
        {"name": "api", "spec": {"fqdn": "by-name.example.com", "port": "web"}},
        {"name": "api", "spec": {"fqdn": "by-number.example.com", "port": 9090}},
        {"name": "api", "spec": {"fqdn": "by-text.example.com", "port": "9090"}},
        {"name": "api", "spec": {"fqdn": "missing.example.com", "port": "grpc"}},
    ]);
    let table = compute_routes(&world_with(
        vec![binding("shop", "b", 1, to_edge(), subjects)],
        vec![api],
    ));
    let services: Vec<(&str, &str)> = table.tunnels[&shop_edge()]
        .routes
        .iter()
        .map(|r| (r.hostname.as_str(), r.service.as_str()))
        .collect();
    assert_eq!(
        services,
        [
            ("by-name.example.com", "https://api.shop.svc:8443"),
            ("by-number.example.com", "http://api.shop.svc:9090"),
            ("by-text.example.com", "http://api.shop.svc:9090"),
            ("missing.example.com", "http_status:404"),
        ]
    );
    let status = source(&table, SourceKind::TunnelBinding, "shop", "b");
    assert_eq!(status.reason, RouteReason::PortNotFound);
    assert_eq!(status.ready_status(), "False");
    assert_eq!(
        status.message,
        "subjects[3].spec.port: Service shop/api has no port \"grpc\"; use one of metrics (9090), web (8443)"
    );
    assert_eq!(
        status.hostnames().len(),
        4,
        "a 404 route keeps its hostname"
    );
}

#[test]
fn protocols_are_inferred_in_the_documented_order() {
    let ports = json!([
        {"name": "a", "port": 8000, "appProtocol": "kubernetes.io/h2c"},
        {"name": "b", "port": 8001, "appProtocol": "HTTPS"},
        {"name": "ssh", "port": 2222},
        {"name": "rdp", "port": 80},
        {"name": "c", "port": 22},
        {"name": "d", "port": 139},
        {"name": "e", "port": 445},
        {"name": "f", "port": 443},
        {"name": "g", "port": 3389},
        {"name": "h", "port": 5432},
        {"name": "https", "port": 22, "appProtocol": "http"},
    ]);
    let svc = service("shop", "x", 0, json!({}), json!({}), ports);
    let names = [
        "a", "b", "ssh", "rdp", "c", "d", "e", "f", "g", "h", "https",
    ];
    let mut subjects: Vec<Value> = names
        .iter()
        .map(|p| json!({"name": "x", "spec": {"fqdn": format!("{p}.example.com"), "port": p}}))
        .collect();
    subjects.push(json!({"name": "x", "spec": {"fqdn": "explicit.example.com", "port": "h", "protocol": "tcp"}}));
    subjects.push(
        json!({"name": "x", "spec": {"fqdn": "udp.example.com", "port": "h", "protocol": "udp"}}),
    );
    let table = compute_routes(&world_with(
        vec![binding("shop", "b", 1, to_edge(), json!(subjects))],
        vec![svc],
    ));
    let by_host: std::collections::BTreeMap<&str, &Route> = table.tunnels[&shop_edge()]
        .routes
        .iter()
        .map(|r| (r.hostname.as_str(), r))
        .collect();
    for (host, want) in [
        ("a", "http://x.shop.svc:8000"),
        ("b", "https://x.shop.svc:8001"),
        ("ssh", "ssh://x.shop.svc:2222"),
        ("rdp", "rdp://x.shop.svc:80"),
        ("c", "ssh://x.shop.svc:22"),
        ("d", "smb://x.shop.svc:139"),
        ("e", "smb://x.shop.svc:445"),
        ("f", "https://x.shop.svc:443"),
        ("g", "rdp://x.shop.svc:3389"),
        ("h", "http://x.shop.svc:5432"),
        ("https", "http://x.shop.svc:22"),
        ("explicit", "tcp://x.shop.svc:5432"),
        ("udp", "tcp://x.shop.svc:5432"),
    ] {
        let got = by_host
            .get(format!("{host}.example.com").as_str())
            .map(|r| r.service.as_str());
        assert_eq!(got, Some(want), "{host}");
    }
    // h2c: plain http, and http2Origin stays unset.
    assert_eq!(
        by_host["a.example.com"].origin_request,
        OriginRequest::default()
    );
}

#[test]
fn a_missing_service_answers_404_until_it_exists() {
    let b = binding("shop", "b", 1, to_edge(), json!([{"name": "web"}]));
    let table = compute_routes(&world_with(vec![b.clone()], Vec::new()));
    assert_eq!(
        table.tunnels[&shop_edge()].routes,
        vec![route("web.example.com", None, "http_status:404")]
    );
    assert_eq!(table.tunnels[&shop_edge()].dns.len(), 1);
    let status = source(&table, SourceKind::TunnelBinding, "shop", "b");
    assert_eq!(status.reason, RouteReason::ServiceNotFound);
    assert_eq!(
        status.message,
        "subjects[0].name: Service shop/web does not exist; create it or fix the name (the hostname answers 404 until then)"
    );
    let table = compute_routes(&world_with(vec![b], vec![http_service("shop", "web")]));
    assert_eq!(
        table.tunnels[&shop_edge()].routes,
        vec![route("web.example.com", None, "http://web.shop.svc:80")]
    );
}

#[test]
fn an_explicit_target_is_used_as_is_without_the_service() {
    let subjects = json!([{"name": "web", "spec": {"target": "https://other.shop.svc:8443", "path": "^/api(/|$)"}}]);
    let table = compute_routes(&world_with(
        vec![binding("shop", "b", 1, to_edge(), subjects)],
        Vec::new(),
    ));
    assert_eq!(
        table.tunnels[&shop_edge()].routes,
        vec![route(
            "web.example.com",
            Some("^/api(/|$)"),
            "https://other.shop.svc:8443"
        )]
    );
    assert_eq!(
        source(&table, SourceKind::TunnelBinding, "shop", "b").reason,
        RouteReason::Routed
    );
}
