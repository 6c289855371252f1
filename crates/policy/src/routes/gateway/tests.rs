//! Gateway API sources: refusals of what a tunnel cannot express, GRPCRoute paths, backends,
//! attachment, and one owner per hostname across Ingresses, HTTPRoutes and bindings.
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use serde_json::{Value, json};

use super::status::{GatewayApiStatus, StatusInput, gateway_statuses};
use crate::routes::fixtures::*;
use crate::routes::*;
use cftunnel_types::gateway::{GRPCRoute, Gateway, GatewayClass, HTTPRoute};
use cftunnel_types::{TunnelIdentity, TunnelKind};

pub(super) fn decode<T: serde::de::DeserializeOwned>(value: Value) -> Arc<T> {
    Arc::new(serde_json::from_value(value).unwrap_or_else(|e| panic!("fixture: {e}")))
}

pub(super) fn cluster_edge() -> TunnelIdentity {
    identity(TunnelKind::ClusterTunnel, "", "edge")
}

/// A world with the class `cftunnel` on the ClusterTunnel `edge` and the Gateway `shop/web`
/// (one HTTP listener, routes from every namespace).
pub(super) fn gateway_world() -> RouteWorld {
    let mut world = world_with(
        Vec::new(),
        vec![http_service("shop", "web"), http_service("shop", "api")],
    );
    world.gateway_classes.push(decode::<GatewayClass>(json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
        "metadata": {"name": "cftunnel"},
        "spec": {"controllerName": "cfargotunnel.com/cftunnel",
                 "parametersRef": {"group": "networking.cfargotunnel.com", "kind": "ClusterTunnel", "name": "edge"}},
    })));
    world.gateways.push(decode::<Gateway>(json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
        "metadata": {"name": "web", "namespace": "shop", "generation": 2},
        "spec": {"gatewayClassName": "cftunnel", "listeners": [
            {"name": "http", "port": 80, "protocol": "HTTP", "allowedRoutes": {"namespaces": {"from": "All"}}}]},
    })));
    world
}

pub(super) fn http_route(name: &str, created: i64, spec: Value) -> Arc<HTTPRoute> {
    decode(json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
        "metadata": {"name": name, "namespace": "shop", "generation": 1, "uid": format!("uid-{name}"),
                     "creationTimestamp": timestamp(created)},
        "spec": spec,
    }))
}

pub(super) fn statuses(world: &RouteWorld, table: &RouteTable) -> GatewayApiStatus {
    let ids = [(
        cluster_edge(),
        "6ff42ae2-765d-4adf-8112-31c55c1551ef".to_string(),
    )]
    .into();
    gateway_statuses(
        world,
        table,
        &StatusInput {
            tunnel_ids: &ids,
            dns: &std::collections::BTreeMap::new(),
            now: Time(jiff::Timestamp::UNIX_EPOCH),
            changed_routes_only: false,
        },
    )
}

pub(super) fn parent_conditions(
    statuses: &GatewayApiStatus,
    kind: SourceKind,
    name: &str,
) -> Vec<Condition> {
    statuses.routes[&(kind, "shop".to_string(), name.to_string())]
        .first()
        .map(|p| p.conditions.clone())
        .unwrap_or_default()
}

pub(super) fn condition<'c>(
    conditions: &'c [Condition],
    type_: &str,
) -> (&'c str, &'c str, &'c str) {
    conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.as_str(), c.reason.as_str(), c.message.as_str()))
        .unwrap_or(("", "", ""))
}

#[test]
fn a_header_match_or_a_traffic_split_is_refused_with_its_field_and_never_served() {
    let mut world = gateway_world();
    world.http_routes.push(http_route(
        "headers",
        0,
        json!({"parentRefs": [{"name": "web"}], "hostnames": ["h.example.org"], "rules": [{
            "matches": [{"path": {"type": "PathPrefix", "value": "/"}, "headers": [{"name": "x-canary", "value": "1"}]}],
            "backendRefs": [{"name": "web", "port": 80}]}]}),
    ));
    world.http_routes.push(http_route(
        "split",
        1,
        json!({"parentRefs": [{"name": "web"}], "hostnames": ["s.example.org"], "rules": [{
            "backendRefs": [{"name": "web", "port": 80, "weight": 90}, {"name": "api", "port": 80, "weight": 10}]}]}),
    ));
    let table = compute_routes(&world);
    assert!(
        table.routes_of(&cluster_edge()).is_empty(),
        "nothing refused is served"
    );
    let statuses = statuses(&world, &table);
    let headers = parent_conditions(&statuses, SourceKind::HTTPRoute, "headers");
    assert_eq!(
        condition(&headers, "Accepted"),
        (
            "False",
            "UnsupportedValue",
            "spec.rules[0].matches[0].headers: cloudflared matches only hostname and path; remove the headers match or route it elsewhere"
        )
    );
    let split = parent_conditions(&statuses, SourceKind::HTTPRoute, "split");
    let (status, reason, message) = condition(&split, "Accepted");
    assert_eq!((status, reason), ("False", "UnsupportedValue"));
    assert!(
        message.starts_with("spec.rules[0].backendRefs: traffic split over 2 backends"),
        "{message}"
    );
    // Refused routes are attached to no listener.
    assert_eq!(
        statuses.gateways[&("shop".into(), "web".into())].listeners[0].attached_routes,
        0
    );
}

#[test]
fn a_grpc_route_matches_service_and_method_paths_with_an_http2_origin() {
    let mut world = gateway_world();
    for name in ["cart", "carts"] {
        world.services.push(service(
            "shop",
            name,
            0,
            json!({}),
            json!({}),
            json!([{"name": "grpcs", "port": 8443}]),
        ));
    }
    world.grpc_routes.push(decode::<GRPCRoute>(json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "GRPCRoute",
        "metadata": {"name": "grpc", "namespace": "shop"},
        "spec": {"parentRefs": [{"name": "web"}], "hostnames": ["grpc.example.org"], "rules": [
            {"matches": [{"method": {"service": "shop.Cart", "method": "Add"}}],
             "backendRefs": [{"name": "cart", "port": 8443}]},
            {"matches": [{"method": {"service": "shop.Cart"}}],
             "backendRefs": [{"name": "carts", "port": 8443}]}]},
    })));
    let table = compute_routes(&world);
    let routes = table.routes_of(&cluster_edge());
    let served = |path: &str| match serving_route(&routes, "grpc.example.org", path) {
        Serving::Route(r) => (r.service.as_str(), r.origin_request.http2_origin),
        Serving::CatchAll => ("catch-all", None),
    };
    assert_eq!(
        served("/shop.Cart/Add"),
        ("https://cart.shop.svc:8443", Some(true))
    );
    assert_eq!(
        served("/shop.Cart/Remove"),
        ("https://carts.shop.svc:8443", Some(true))
    );
    assert_eq!(served("/shop.Cartx/Add"), ("catch-all", None));
    let statuses = statuses(&world, &table);
    let grpc = parent_conditions(&statuses, SourceKind::GRPCRoute, "grpc");
    assert_eq!(condition(&grpc, "Accepted").0, "True");
    assert_eq!(
        condition(&grpc, "ResolvedRefs"),
        ("True", "ResolvedRefs", "")
    );
}

#[test]
fn one_hostname_one_owner_across_an_ingress_an_http_route_and_a_binding() {
    let mut world = gateway_world();
    world.bindings.push(binding(
        "shop",
        "web",
        10,
        json!({"kind": "ClusterTunnel", "name": "edge"}),
        json!([{"kind": "Service", "name": "web", "spec": {"fqdn": "app.example.org"}}]),
    ));
    world.ingress_classes = vec![cluster_edge_class()];
    world.ingresses.push(ingress(
        "shop",
        "web",
        5,
        json!({"ingressClassName": "cftunnel", "rules": [{"host": "app.example.org", "http": {"paths": [
            {"pathType": "ImplementationSpecific", "backend": {"service": {"name": "api", "port": {"number": 80}}}}]}}]}),
    ));
    world.http_routes.push(http_route(
        "web",
        0,
        json!({"parentRefs": [{"name": "web"}], "hostnames": ["app.example.org", "only.example.org"],
               "rules": [{"backendRefs": [{"name": "web", "port": 80}]}]}),
    ));
    let table = compute_routes(&world);
    // The HTTPRoute is the oldest: it owns app.example.org (every path).
    let binding = source(&table, SourceKind::TunnelBinding, "shop", "web");
    assert_eq!(
        binding.reason,
        RouteReason::HostnameConflict,
        "{}",
        binding.message
    );
    assert!(
        binding
            .message
            .contains("already exposed by HTTPRoute shop/web (rule 0)"),
        "{}",
        binding.message
    );
    // The Ingress's route has no path: the same claim as the HTTPRoute's Prefix `/`.
    let ingress = source(&table, SourceKind::Ingress, "shop", "web");
    assert_eq!(
        ingress.reason,
        RouteReason::HostnameConflict,
        "{}",
        ingress.message
    );
    let routes = table.routes_of(&cluster_edge());
    assert_eq!(
        routes
            .iter()
            .filter(|r| r.hostname == "app.example.org")
            .map(|r| r.service.as_str())
            .collect::<Vec<_>>(),
        vec!["http://web.shop.svc:80"]
    );
    let statuses = statuses(&world, &table);
    let route = parent_conditions(&statuses, SourceKind::HTTPRoute, "web");
    assert_eq!(condition(&route, "Accepted").0, "True");
    assert_eq!(condition(&route, "PartiallyInvalid").0, "");
}

#[test]
fn a_missing_backend_answers_500_and_says_backend_not_found() {
    let mut world = gateway_world();
    world.http_routes.push(http_route(
        "gone",
        0,
        json!({"parentRefs": [{"name": "web"}], "hostnames": ["gone.example.org"],
               "rules": [{"backendRefs": [{"name": "nothing", "port": 80}]}]}),
    ));
    let table = compute_routes(&world);
    let routes = table.routes_of(&cluster_edge());
    assert_eq!(
        routes
            .iter()
            .map(|r| (r.hostname.as_str(), r.service.as_str()))
            .collect::<Vec<_>>(),
        vec![("gone.example.org", "http_status:500")]
    );
    let statuses = statuses(&world, &table);
    let gone = parent_conditions(&statuses, SourceKind::HTTPRoute, "gone");
    assert_eq!(condition(&gone, "Accepted").0, "True");
    let (status, reason, message) = condition(&gone, "ResolvedRefs");
    assert_eq!((status, reason), ("False", "BackendNotFound"));
    assert!(
        message.contains("spec.rules[0].backendRefs[0]: Service shop/nothing does not exist"),
        "{message}"
    );
    let gateway = &statuses.gateways[&("shop".into(), "web".into())];
    assert_eq!(gateway.listeners[0].attached_routes, 1);
    assert_eq!(
        gateway.addresses[0].value,
        "6ff42ae2-765d-4adf-8112-31c55c1551ef.cfargotunnel.com"
    );
    assert!(
        gateway
            .conditions
            .iter()
            .all(|c| c.observed_generation == Some(2) && c.status == "True")
    );
}

#[test]
fn a_gateway_class_lists_exactly_the_features_whose_conformance_cases_pass_sorted_by_name() {
    let world = gateway_world();
    let statuses = statuses(&world, &compute_routes(&world));
    let names: Vec<&str> = statuses.classes["cftunnel"]
        .supported_features
        .iter()
        .map(|f| f.name.as_str())
        .collect();
    // GRPCRoute is served but passes no conformance case here (header matches are refused).
    assert_eq!(names, ["Gateway", "HTTPRoute", "ReferenceGrant"]);
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(names, sorted, "supportedFeatures MUST be sorted by name");
}

#[test]
fn a_status_writer_is_given_only_the_routes_whose_entries_must_change() {
    use super::status::merged_parents;
    use cftunnel_types::gateway::{ParentReference, RouteParentStatus, RouteStatus};
    let mut world = gateway_world();
    for (created, name) in [(0, "a"), (1, "b")] {
        world.http_routes.push(http_route(
            name,
            created,
            json!({"parentRefs": [{"name": "web"}], "hostnames": [format!("{name}.example.org")],
                "rules": [{"backendRefs": [{"name": "web", "port": 80}]}]}),
        ));
    }
    let table = compute_routes(&world);
    let all = statuses(&world, &table);
    // `a` carries what it should beside another controller's entry; `b` carries nothing yet.
    let other = RouteParentStatus {
        parent_ref: ParentReference {
            name: "mesh".into(),
            ..ParentReference::default()
        },
        controller_name: "example.com/mesh".into(),
        conditions: Vec::new(),
    };
    let key = |name: &str| (SourceKind::HTTPRoute, "shop".to_string(), name.to_string());
    let mut a = (*world.http_routes[0]).clone();
    a.status = Some(RouteStatus {
        parents: merged_parents(&[other], &all.routes[&key("a")]),
    });
    world.http_routes[0] = Arc::new(a);
    let ids = [(
        cluster_edge(),
        "6ff42ae2-765d-4adf-8112-31c55c1551ef".to_string(),
    )]
    .into();
    let changed = gateway_statuses(
        &world,
        &table,
        &StatusInput {
            tunnel_ids: &ids,
            dns: &std::collections::BTreeMap::new(),
            now: Time(jiff::Timestamp::UNIX_EPOCH),
            changed_routes_only: true,
        },
    );
    assert_eq!(changed.routes.keys().collect::<Vec<_>>(), vec![&key("b")]);
    assert_eq!(changed.routes[&key("b")], all.routes[&key("b")]);
    // Left-out routes still count on their listeners.
    assert_eq!(changed.gateways, all.gateways);
    assert_eq!(
        all.gateways[&("shop".to_string(), "web".to_string())].listeners[0].attached_routes,
        2
    );
}

/// The claims as the route table gives them: every entry of an Ingress or Gateway API source
/// that is served or lost a conflict, by source, as declared.
fn table_claims(world: &RouteWorld) -> Vec<crate::rules::HostnameClaim> {
    let table = compute_routes(world);
    let mut out = Vec::new();
    for (source, status) in &table.sources {
        let (Some(tunnel), true) = (&status.tunnel, source.kind != SourceKind::TunnelBinding)
        else {
            continue;
        };
        for entry in &status.routes {
            let claims = entry.reason.is_served() || entry.reason == RouteReason::HostnameConflict;
            if claims && entry.hostname != ANY_HOST {
                out.push(crate::rules::HostnameClaim {
                    fqdn: entry.hostname.clone(),
                    path: entry.path.clone().unwrap_or_default(),
                    tunnel: tunnel.clone(),
                    owner: source.to_string(),
                    object: source.to_string(),
                });
            }
        }
    }
    out
}

#[test]
fn admission_claims_are_the_route_tables_without_building_it() {
    let mut world = gateway_world();
    world.ingress_classes = vec![cluster_edge_class()];
    world.bindings.push(binding(
        "shop",
        "web",
        10,
        json!({"kind": "ClusterTunnel", "name": "edge"}),
        json!([{"kind": "Service", "name": "web", "spec": {"fqdn": "app.example.org"}}]),
    ));
    for (namespace, name, created, host) in [
        ("shop", "web", 5, "app.example.org"),
        ("shop-b", "a", 1, "b.example.org"),
        ("shop", "z", 2, "b.example.org"),
    ] {
        world.ingresses.push(ingress(
            namespace,
            name,
            created,
            json!({"ingressClassName": "cftunnel", "rules": [{"host": host, "http": {"paths": [
                {"path": "/x", "pathType": "Prefix", "backend": {"service": {"name": "api", "port": {"number": 80}}}}]}}]}),
        ));
    }
    world.http_routes.push(http_route(
        "web",
        0,
        json!({"parentRefs": [{"name": "web"}], "hostnames": ["app.example.org", "only.example.org"],
               "rules": [{"backendRefs": [{"name": "web", "port": 80}]},
                         {"matches": [{"path": {"type": "PathPrefix", "value": "/v2"}}],
                          "backendRefs": [{"name": "api", "port": 80}]}]}),
    ));
    world.http_routes.push(http_route(
        "late",
        20,
        json!({"parentRefs": [{"name": "web"}], "hostnames": ["only.example.org"],
               "rules": [{"backendRefs": [{"name": "missing", "port": 80}]}]}),
    ));
    world.http_routes.push(http_route(
        "invalid",
        30,
        json!({"parentRefs": [{"name": "web"}], "hostnames": ["Not A Hostname"],
               "rules": [{"backendRefs": [{"name": "web", "port": 80}]}]}),
    ));
    world.http_routes.push(http_route(
        "elsewhere",
        40,
        json!({"parentRefs": [{"name": "absent"}], "hostnames": ["free.example.org"],
               "rules": [{"backendRefs": [{"name": "web", "port": 80}]}]}),
    ));
    let expected = table_claims(&world);
    let fqdns: Vec<&str> = expected.iter().map(|c| c.fqdn.as_str()).collect();
    // Served and conflicting entries claim; the binding, the invalid hostname and the route
    // of a Gateway that does not exist do not.
    for fqdn in ["app.example.org", "only.example.org", "b.example.org"] {
        assert!(fqdns.contains(&fqdn), "{fqdn} in {fqdns:?}");
    }
    assert!(
        !fqdns.iter().any(|f| f.contains("free") || f.contains(' ')),
        "{fqdns:?}"
    );
    assert!(
        expected.iter().any(|c| c.owner == "HTTPRoute shop/late"),
        "{expected:?}"
    );
    assert_eq!(model_claims(&world), expected);
}
