//! Hostname authority: the oldest claim owns a hostname and path; exact outcomes.
use serde_json::json;

use super::fixtures::*;
use super::*;
use cftunnel_types::TunnelKind;

#[test]
fn the_oldest_claim_owns_a_hostname_and_the_newer_one_gets_no_route() {
    let fqdn = json!([{"name": "web", "spec": {"fqdn": "App.example.com"}}]);
    let older = binding("shop", "old", 5, to_edge(), fqdn.clone());
    let newer = binding(
        "shop",
        "new",
        6,
        to_edge(),
        json!([{"name": "api", "spec": {"fqdn": "app.example.com"}}]),
    );
    let services = vec![http_service("shop", "web"), http_service("shop", "api")];
    let table = compute_routes(&world_with(vec![newer, older], services));
    let edge = &table.tunnels[&shop_edge()];
    assert_eq!(
        edge.routes,
        vec![route("app.example.com", None, "http://web.shop.svc:80")]
    );
    assert_eq!(edge.dns.len(), 1);
    let loser = source(&table, SourceKind::TunnelBinding, "shop", "new");
    assert_eq!(
        (loser.reason, loser.ready_status()),
        (RouteReason::HostnameConflict, "False")
    );
    assert_eq!(
        loser.message,
        "subjects[0].spec.fqdn: app.example.com is already exposed by TunnelBinding shop/old (subject web), which is older; remove it from one of them"
    );
    assert!(loser.hostnames().is_empty());
    let reasons: Vec<(&str, RouteReason)> = edge
        .entries
        .iter()
        .map(|e| (e.source.name.as_str(), e.reason))
        .collect();
    assert_eq!(
        reasons,
        [
            ("new", RouteReason::HostnameConflict),
            ("old", RouteReason::Routed)
        ]
    );
}

#[test]
fn equal_creation_times_are_decided_by_namespace_then_name() {
    let subjects = |svc: &str| json!([{"name": svc, "spec": {"fqdn": "app.example.org"}}]);
    let cluster = json!({"kind": "ClusterTunnel", "name": "edge"});
    let table = compute_routes(&world_with(
        vec![
            binding("b-ns", "a", 1, cluster.clone(), subjects("one")),
            binding("a-ns", "z", 1, cluster.clone(), subjects("two")),
            binding("a-ns", "y", 1, cluster, subjects("three")),
        ],
        Vec::new(),
    ));
    let edge = &table.tunnels[&identity(TunnelKind::ClusterTunnel, "", "edge")];
    assert_eq!(
        edge.routes,
        vec![route("app.example.org", None, "http_status:404")]
    );
    let owners: Vec<(&str, &str, RouteReason)> = edge
        .entries
        .iter()
        .map(|e| {
            (
                e.source.namespace.as_str(),
                e.source.name.as_str(),
                e.reason,
            )
        })
        .collect();
    assert_eq!(
        owners,
        [
            ("a-ns", "y", RouteReason::ServiceNotFound),
            ("a-ns", "z", RouteReason::HostnameConflict),
            ("b-ns", "a", RouteReason::HostnameConflict),
        ]
    );
}

#[test]
fn one_hostname_uses_one_tunnel_but_paths_of_one_tunnel_share_it() {
    let mut world = world_with(
        vec![
            binding(
                "shop",
                "api",
                1,
                to_edge(),
                json!([{"name": "api", "spec": {"fqdn": "app.example.com", "path": "^/api"}}]),
            ),
            binding(
                "shop",
                "web",
                2,
                to_edge(),
                json!([{"name": "web", "spec": {"fqdn": "app.example.com"}}]),
            ),
            binding(
                "shop",
                "other",
                3,
                json!({"kind": "ClusterTunnel", "name": "wide"}),
                json!([{"name": "web", "spec": {"fqdn": "app.example.com", "path": "^/other"}}]),
            ),
        ],
        vec![http_service("shop", "api"), http_service("shop", "web")],
    );
    world
        .tunnels
        .push(tunnel(TunnelKind::ClusterTunnel, "", "wide", "example.com"));
    let table = compute_routes(&world);
    assert_eq!(
        table.tunnels[&shop_edge()].routes,
        vec![
            route("app.example.com", None, "http://web.shop.svc:80"),
            route("app.example.com", Some("^/api"), "http://api.shop.svc:80"),
        ]
    );
    assert_eq!(table.tunnels[&shop_edge()].dns.len(), 1);
    let wide = &table.tunnels[&identity(TunnelKind::ClusterTunnel, "", "wide")];
    assert!(wide.routes.is_empty() && wide.dns.is_empty());
    assert_eq!(
        source(&table, SourceKind::TunnelBinding, "shop", "other").message,
        "subjects[0].spec.fqdn: app.example.com is already routed through Tunnel shop/edge by TunnelBinding shop/api (subject api), which is older; one hostname can use one tunnel, remove it from one of them"
    );
}

#[test]
fn a_subject_listed_twice_in_one_binding_loses_the_second_time() {
    let subjects = json!([
        {"name": "web", "spec": {"fqdn": "app.example.com"}},
        {"name": "api", "spec": {"fqdn": "app.example.com"}},
    ]);
    let table = compute_routes(&world_with(
        vec![binding("shop", "b", 1, to_edge(), subjects)],
        vec![http_service("shop", "web"), http_service("shop", "api")],
    ));
    assert_eq!(
        table.tunnels[&shop_edge()].routes,
        vec![route("app.example.com", None, "http://web.shop.svc:80")]
    );
    assert_eq!(
        source(&table, SourceKind::TunnelBinding, "shop", "b").message,
        "subjects[1].spec.fqdn: app.example.com (path \"\") is listed twice in this binding; keep one subject per hostname and path"
    );
}

#[test]
fn a_dns_name_is_as_old_as_the_oldest_source_serving_it() {
    let path = |p: &str| json!([{"name": "web", "spec": {"fqdn": "app.example.com", "path": p}}]);
    let services = vec![http_service("shop", "web")];
    let table = compute_routes(&world_with(
        vec![
            binding("shop", "later", 9, to_edge(), path("^/b")),
            binding("shop", "first", 3, to_edge(), path("^/a")),
            binding(
                "shop",
                "solo",
                5,
                to_edge(),
                json!([{"name": "web", "spec": {"fqdn": "solo.example.com"}}]),
            ),
        ],
        services,
    ));
    let edge = &table.tunnels[&shop_edge()];
    let since = |host: &str| edge.dns_since.get(host).cloned();
    let of = |name: &str, created: i64| {
        let at = jiff::Timestamp::from_second(1_700_000_000 + created)
            .unwrap_or(jiff::Timestamp::UNIX_EPOCH);
        let source = SourceRef {
            kind: SourceKind::TunnelBinding,
            namespace: "shop".into(),
            name: name.into(),
            uid: format!("uid-shop-{name}"),
        };
        Age::new(
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at)),
            &source,
        )
    };
    assert_eq!(since("app.example.com"), Some(of("first", 3)));
    assert_eq!(since("solo.example.com"), Some(of("solo", 5)));
    assert_eq!(edge.dns_since.len(), edge.dns.len());
}
