//! TCPRoutes and UDPRoutes: TCP and UDP listeners take them, their parents and backends are
//! judged as the specification says, listeners count them, and HTTPRoutes are as they were.
use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use serde_json::{Value, json};

use super::l4::{L4Kind, L4Routes};
use super::status::{GatewayApiStatus, StatusInput, gateway_statuses_with_l4};
use super::tests::{cluster_edge, condition, decode, gateway_world, http_route, statuses};
use crate::routes::*;
use cftunnel_types::ServicePorts;
use cftunnel_types::gateway::{Gateway, ListenerStatus, TCPRoute, UDPRoute};

/// A Service of `namespace` with `ports` and `cluster_ips`.
pub(crate) fn addressed_service(
    namespace: &str,
    name: &str,
    ports: Value,
    cluster_ips: &[&str],
) -> Arc<ServicePorts> {
    decode(json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"ports": ports, "clusterIPs": cluster_ips},
    }))
}

/// A Gateway `shop/<name>` of the class `cftunnel` (on the ClusterTunnel `edge`) with
/// `listeners`, taking routes from every namespace.
pub(crate) fn gateway(name: &str, listeners: Value) -> Arc<Gateway> {
    let mut listeners = listeners;
    for listener in listeners.as_array_mut().into_iter().flatten() {
        listener["allowedRoutes"]["namespaces"] = json!({"from": "All"});
    }
    decode(json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
        "metadata": {"name": name, "namespace": "shop", "generation": 1,
                     "creationTimestamp": "2024-05-01T00:00:00Z"},
        "spec": {"gatewayClassName": "cftunnel", "listeners": listeners},
    }))
}

/// The world of `gateway_world` (the HTTP Gateway `shop/web`) with the Gateway `shop/private`
/// (listeners `http` 80, `tcp` 5432 and `udp` 53), the Services `shop/postgres` (TCP 5432) and
/// `shop/dns` (UDP and TCP 53, two families), and a headless `shop/peers` (UDP 7946).
pub(crate) fn l4_world() -> RouteWorld {
    let mut world = gateway_world();
    world.gateways.push(gateway(
        "private",
        json!([{"name": "http", "port": 80, "protocol": "HTTP"},
               {"name": "tcp", "port": 5432, "protocol": "TCP"},
               {"name": "udp", "port": 53, "protocol": "UDP"}]),
    ));
    world.services.push(addressed_service(
        "shop",
        "postgres",
        json!([{"name": "pg", "port": 5432}]),
        &["10.96.0.10"],
    ));
    world.services.push(addressed_service(
        "shop",
        "dns",
        json!([{"name": "dns", "port": 53, "protocol": "UDP"},
               {"name": "dns-tcp", "port": 53, "protocol": "TCP"}]),
        &["10.96.0.53", "fd00::53"],
    ));
    world.services.push(addressed_service(
        "shop",
        "peers",
        json!([{"name": "gossip", "port": 7946, "protocol": "UDP"}]),
        &["None"],
    ));
    world
}

pub(crate) fn tcp_route(name: &str, spec: Value) -> Arc<TCPRoute> {
    decode(json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "TCPRoute",
        "metadata": {"name": name, "namespace": "shop", "generation": 3},
        "spec": spec,
    }))
}

pub(crate) fn udp_route(name: &str, spec: Value) -> Arc<UDPRoute> {
    decode(json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "UDPRoute",
        "metadata": {"name": name, "namespace": "shop", "generation": 3},
        "spec": spec,
    }))
}

fn l4_statuses(world: &RouteWorld, l4: &L4Routes) -> GatewayApiStatus {
    let ids = [(
        cluster_edge(),
        "6ff42ae2-765d-4adf-8112-31c55c1551ef".to_string(),
    )]
    .into();
    gateway_statuses_with_l4(
        world,
        l4,
        &compute_routes(world),
        &StatusInput {
            tunnel_ids: &ids,
            dns: &BTreeMap::new(),
            now: Time(jiff::Timestamp::UNIX_EPOCH),
            changed_routes_only: false,
        },
    )
}

fn parent(statuses: &GatewayApiStatus, kind: L4Kind, name: &str) -> Vec<Condition> {
    statuses.l4_routes[&(kind, "shop".to_string(), name.to_string())]
        .first()
        .map(|p| p.conditions.clone())
        .unwrap_or_default()
}

fn listener<'s>(statuses: &'s GatewayApiStatus, gateway: &str, name: &str) -> &'s ListenerStatus {
    statuses.gateways[&("shop".to_string(), gateway.to_string())]
        .listeners
        .iter()
        .find(|l| l.name == name)
        .unwrap_or_else(|| panic!("no listener {name}"))
}

fn kinds(listener: &ListenerStatus) -> Vec<&str> {
    listener
        .supported_kinds
        .iter()
        .map(|k| k.kind.as_str())
        .collect()
}

#[test]
fn a_tcp_route_on_a_tcp_listener_is_accepted_and_attached_there_only() {
    let world = l4_world();
    let l4 = L4Routes {
        tcp: vec![tcp_route(
            "db",
            json!({"parentRefs": [{"name": "private"}],
                   "rules": [{"backendRefs": [{"name": "postgres", "port": 5432}]}]}),
        )],
        udp: Vec::new(),
    };
    let statuses = l4_statuses(&world, &l4);
    let db = parent(&statuses, L4Kind::TCPRoute, "db");
    assert_eq!(condition(&db, "Accepted").0, "True");
    assert_eq!(condition(&db, "ResolvedRefs").0, "True");
    assert!(db.iter().all(|c| c.observed_generation == Some(3)));
    // The parentRef names the whole Gateway: only its TCP listener takes a TCPRoute.
    let tcp = listener(&statuses, "private", "tcp");
    assert_eq!(tcp.attached_routes, 1);
    assert_eq!(kinds(tcp), ["TCPRoute"]);
    assert_eq!(condition(&tcp.conditions, "Accepted").0, "True");
    assert_eq!(condition(&tcp.conditions, "Programmed").0, "True");
    assert_eq!(listener(&statuses, "private", "http").attached_routes, 0);
    assert_eq!(listener(&statuses, "private", "udp").attached_routes, 0);
    assert_eq!(kinds(listener(&statuses, "private", "udp")), ["UDPRoute"]);
    // It is no route of the model: nothing routes to the Service.
    let table = compute_routes(&world);
    assert!(
        table
            .routes_of(&cluster_edge())
            .iter()
            .all(|r| !r.service.contains("postgres"))
    );
}

#[test]
fn a_tcp_route_on_an_http_listener_is_not_allowed_by_listeners_and_counts_nowhere() {
    let world = l4_world();
    let l4 = L4Routes {
        tcp: vec![
            tcp_route(
                "on-http",
                json!({"parentRefs": [{"name": "web"}],
                       "rules": [{"backendRefs": [{"name": "postgres", "port": 5432}]}]}),
            ),
            tcp_route(
                "on-section",
                json!({"parentRefs": [{"name": "private", "sectionName": "http"}],
                       "rules": [{"backendRefs": [{"name": "postgres", "port": 5432}]}]}),
            ),
            tcp_route(
                "no-port",
                json!({"parentRefs": [{"name": "private", "port": 6543}],
                       "rules": [{"backendRefs": [{"name": "postgres", "port": 5432}]}]}),
            ),
        ],
        udp: Vec::new(),
    };
    let statuses = l4_statuses(&world, &l4);
    for name in ["on-http", "on-section"] {
        let conditions = parent(&statuses, L4Kind::TCPRoute, name);
        let (status, reason, message) = condition(&conditions, "Accepted");
        assert_eq!(
            (status, reason),
            ("False", "NotAllowedByListeners"),
            "{name}"
        );
        assert!(message.contains("admits a TCPRoute"), "{message}");
    }
    let no_port = parent(&statuses, L4Kind::TCPRoute, "no-port");
    assert_eq!(
        condition(&no_port, "Accepted").1,
        "NoMatchingParent",
        "{no_port:?}"
    );
    assert_eq!(listener(&statuses, "web", "http").attached_routes, 0);
    for name in ["http", "tcp", "udp"] {
        assert_eq!(listener(&statuses, "private", name).attached_routes, 0);
    }
}

#[test]
fn a_udp_route_to_a_missing_service_is_backend_not_found_and_stays_accepted() {
    let world = l4_world();
    let route = |name: &str, backend: Value| {
        udp_route(
            name,
            json!({"parentRefs": [{"name": "private", "sectionName": "udp"}],
                   "rules": [{"backendRefs": [backend]}]}),
        )
    };
    let l4 = L4Routes {
        tcp: Vec::new(),
        udp: vec![
            route("missing", json!({"name": "nothing", "port": 53})),
            route("tcp-port", json!({"name": "postgres", "port": 5432})),
            route("no-port", json!({"name": "dns"})),
            route("headless", json!({"name": "peers", "port": 7946})),
            route(
                "elsewhere",
                json!({"name": "dns", "namespace": "kube-system", "port": 53}),
            ),
            route(
                "not-a-service",
                json!({"group": "example.com", "kind": "Pool", "name": "dns", "port": 53}),
            ),
            route("dns", json!({"name": "dns", "port": 53})),
        ],
    };
    let statuses = l4_statuses(&world, &l4);
    for (name, reason, said) in [
        (
            "missing",
            "BackendNotFound",
            "Service shop/nothing does not exist",
        ),
        (
            "tcp-port",
            "UnsupportedProtocol",
            "port 5432 of Service shop/postgres is TCP",
        ),
        ("no-port", "BackendNotFound", ".port: not set"),
        ("headless", "BackendNotFound", "has no cluster IP"),
        (
            "elsewhere",
            "RefNotPermitted",
            "no ReferenceGrant there allows UDPRoutes of shop",
        ),
        (
            "not-a-service",
            "InvalidKind",
            "Pool (\"example.com\") is not a kind",
        ),
    ] {
        let conditions = parent(&statuses, L4Kind::UDPRoute, name);
        assert_eq!(condition(&conditions, "Accepted").0, "True", "{name}");
        let (status, found, message) = condition(&conditions, "ResolvedRefs");
        assert_eq!((status, found), ("False", reason), "{name}: {message}");
        assert!(message.contains(said), "{name}: {message}");
        assert!(
            message.starts_with("spec.rules[0].backendRefs[0]"),
            "{message}"
        );
    }
    let dns = parent(&statuses, L4Kind::UDPRoute, "dns");
    assert_eq!(condition(&dns, "ResolvedRefs").0, "True");
    // Accepted routes count, whether their backends resolve or not.
    assert_eq!(listener(&statuses, "private", "udp").attached_routes, 7);
}

#[test]
fn a_gateway_that_cannot_serve_routes_takes_no_tcp_route() {
    let mut world = l4_world();
    world.gateways.push(decode(json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
        "metadata": {"name": "orphan", "namespace": "shop"},
        "spec": {"gatewayClassName": "cftunnel",
                 "infrastructure": {"parametersRef": {"group": "networking.cfargotunnel.com",
                                                      "kind": "Tunnel", "name": "missing"}},
                 "listeners": [{"name": "tcp", "port": 5432, "protocol": "TCP"}]},
    })));
    let l4 = L4Routes {
        tcp: vec![tcp_route(
            "db",
            json!({"parentRefs": [{"name": "orphan"}],
                   "rules": [{"backendRefs": [{"name": "postgres", "port": 5432}]}]}),
        )],
        udp: Vec::new(),
    };
    let statuses = l4_statuses(&world, &l4);
    let db = parent(&statuses, L4Kind::TCPRoute, "db");
    let (status, reason, message) = condition(&db, "Accepted");
    assert_eq!((status, reason), ("False", "NoMatchingParent"));
    assert!(message.contains("Tunnel shop/missing"), "{message}");
    assert_eq!(listener(&statuses, "orphan", "tcp").attached_routes, 0);
}

#[test]
fn listeners_on_one_port_conflict_as_the_specification_says() {
    let mut world = gateway_world();
    world.gateways.push(gateway(
        "mixed",
        json!([{"name": "web", "port": 8080, "protocol": "HTTP"},
               {"name": "raw", "port": 8080, "protocol": "TCP"},
               {"name": "dns-tcp", "port": 53, "protocol": "TCP"},
               {"name": "dns-udp", "port": 53, "protocol": "UDP"},
               {"name": "a", "port": 7000, "protocol": "UDP"},
               {"name": "b", "port": 7000, "protocol": "UDP"},
               {"name": "tls", "port": 443, "protocol": "TLS"},
               {"name": "kinds", "port": 9000, "protocol": "TCP",
                "allowedRoutes": {"kinds": [{"kind": "HTTPRoute"}]}}]),
    ));
    let statuses = statuses(&world, &compute_routes(&world));
    let conflicted = |name: &str| {
        let l = listener(&statuses, "mixed", name);
        condition(&l.conditions, "Conflicted").1.to_string()
    };
    // A TCP listener beside an HTTP one on its port: neither is distinct.
    assert_eq!(conflicted("web"), "ProtocolConflict");
    assert_eq!(conflicted("raw"), "ProtocolConflict");
    // TCP and UDP on one port are distinct.
    assert_eq!(conflicted("dns-tcp"), "NoConflicts");
    assert_eq!(conflicted("dns-udp"), "NoConflicts");
    assert_eq!(conflicted("a"), "ProtocolConflict");
    assert_eq!(conflicted("b"), "ProtocolConflict");
    let raw = listener(&statuses, "mixed", "raw");
    assert_eq!(condition(&raw.conditions, "Programmed").1, "Invalid");
    // TLS is not served: no kind.
    let tls = listener(&statuses, "mixed", "tls");
    assert_eq!(
        condition(&tls.conditions, "Accepted").1,
        "UnsupportedProtocol"
    );
    assert!(tls.supported_kinds.is_empty());
    // A kind of another protocol.
    let named = listener(&statuses, "mixed", "kinds");
    let (status, reason, message) = condition(&named.conditions, "ResolvedRefs");
    assert_eq!((status, reason), ("False", "InvalidRouteKinds"));
    assert!(
        message.contains("a TCP listener serves only TCPRoute"),
        "{message}"
    );
    assert!(named.supported_kinds.is_empty());
}

#[test]
fn http_routes_are_judged_as_before_beside_l4_routes() {
    let mut world = l4_world();
    world.http_routes.push(http_route(
        "site",
        0,
        json!({"parentRefs": [{"name": "web"}, {"name": "private"}], "hostnames": ["site.example.org"],
               "rules": [{"backendRefs": [{"name": "web", "port": 80}]}]}),
    ));
    let l4 = L4Routes {
        tcp: vec![tcp_route(
            "db",
            json!({"parentRefs": [{"name": "private"}],
                   "rules": [{"backendRefs": [{"name": "postgres", "port": 5432}]}]}),
        )],
        udp: vec![udp_route(
            "dns",
            json!({"parentRefs": [{"name": "private"}],
                   "rules": [{"backendRefs": [{"name": "dns", "port": 53}]}]}),
        )],
    };
    let without = statuses(&world, &compute_routes(&world));
    let with = l4_statuses(&world, &l4);
    assert_eq!(with.routes, without.routes);
    assert_eq!(with.classes, without.classes);
    assert_eq!(
        with.gateways[&("shop".into(), "web".into())],
        without.gateways[&("shop".into(), "web".into())]
    );
    let site = &with.routes[&(SourceKind::HTTPRoute, "shop".into(), "site".into())];
    assert!(
        site.iter()
            .all(|p| condition(&p.conditions, "Accepted").0 == "True")
    );
    assert_eq!(listener(&with, "private", "http").attached_routes, 1);
    assert_eq!(listener(&with, "private", "tcp").attached_routes, 1);
    assert_eq!(listener(&with, "private", "udp").attached_routes, 1);
    assert!(without.l4_routes.is_empty());
}
