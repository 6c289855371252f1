//! Ingresses as route sources: class and tunnel, path types, backends, the catch-all and
//! hostname authority across kinds.
use std::sync::Arc;

use serde_json::{Value, json};

use super::fixtures::*;
use super::*;
use cftunnel_types::TunnelKind;

/// One row: the rule's paths (`pathType`, `path`), a request path, the index of the path that
/// serves it.
pub(crate) type PathTypeExample = (
    &'static [(&'static str, &'static str)],
    &'static str,
    Option<usize>,
);

/// Every row of the Kubernetes documentation's table of Ingress path-type examples: the paths
/// of one Ingress rule (`pathType`, `path`), a request path, and the index of the path that
/// serves it (`None`: no path matches, the catch-all answers).
pub(crate) const PATH_TYPE_EXAMPLES: &[PathTypeExample] = &[
    (&[("Prefix", "/")], "/", Some(0)),
    (&[("Prefix", "/")], "/any/path", Some(0)),
    (&[("Exact", "/foo")], "/foo", Some(0)),
    (&[("Exact", "/foo")], "/bar", None),
    (&[("Exact", "/foo")], "/foo/", None),
    (&[("Exact", "/foo/")], "/foo", None),
    (&[("Prefix", "/foo")], "/foo", Some(0)),
    (&[("Prefix", "/foo")], "/foo/", Some(0)),
    (&[("Prefix", "/foo/")], "/foo", Some(0)),
    (&[("Prefix", "/foo/")], "/foo/", Some(0)),
    (&[("Prefix", "/aaa/bb")], "/aaa/bbb", None),
    (&[("Prefix", "/aaa/bbb")], "/aaa/bbb", Some(0)),
    (&[("Prefix", "/aaa/bbb/")], "/aaa/bbb", Some(0)),
    (&[("Prefix", "/aaa/bbb")], "/aaa/bbb/", Some(0)),
    (&[("Prefix", "/aaa/bbb")], "/aaa/bbb/ccc", Some(0)),
    (&[("Prefix", "/aaa/bbb")], "/aaa/bbbxyz", None),
    (&[("Prefix", "/"), ("Prefix", "/aaa")], "/aaa/ccc", Some(1)),
    (
        &[("Prefix", "/"), ("Prefix", "/aaa"), ("Prefix", "/aaa/bbb")],
        "/aaa/bbb",
        Some(2),
    ),
    (
        &[("Prefix", "/"), ("Prefix", "/aaa"), ("Prefix", "/aaa/bbb")],
        "/ccc",
        Some(0),
    ),
    (&[("Prefix", "/aaa")], "/ccc", None),
    (&[("Prefix", "/foo"), ("Exact", "/foo")], "/foo", Some(1)),
];

/// The host row `n` of [`PATH_TYPE_EXAMPLES`] is served on.
pub(crate) fn example_host(n: usize) -> String {
    format!("row{n}.example.org")
}

/// The service path `j` of row `n` routes to.
pub(crate) fn example_service(n: usize, j: usize) -> String {
    format!("http://r{n}-p{j}.shop.svc:80")
}

/// One Ingress per row of [`PATH_TYPE_EXAMPLES`] on the ClusterTunnel `edge`, with its Services.
pub(crate) fn path_type_world() -> RouteWorld {
    let mut world = world_with(Vec::new(), Vec::new());
    world.ingress_classes = vec![cluster_edge_class()];
    for (n, (paths, _, _)) in PATH_TYPE_EXAMPLES.iter().enumerate() {
        let paths: Vec<Value> = paths
            .iter()
            .enumerate()
            .map(|(j, (kind, path))| {
                world.services.push(http_service("shop", &format!("r{n}-p{j}")));
                json!({"path": path, "pathType": kind,
                       "backend": {"service": {"name": format!("r{n}-p{j}"), "port": {"number": 80}}}})
            })
            .collect();
        world.ingresses.push(ingress(
            "shop",
            &format!("row{n}"),
            n as i64,
            json!({"ingressClassName": "cftunnel",
                   "rules": [{"host": example_host(n), "http": {"paths": paths}}]}),
        ));
    }
    world
}

fn cluster_edge() -> cftunnel_types::TunnelIdentity {
    identity(TunnelKind::ClusterTunnel, "", "edge")
}

fn served<'r>(routes: &'r [Route], host: &str, path: &str) -> &'r str {
    match serving_route(routes, host, path) {
        Serving::Route(route) => &route.service,
        Serving::CatchAll => "catch-all",
    }
}

#[test]
fn every_row_of_the_path_type_examples_is_served_as_the_documentation_says() {
    let table = compute_routes(&path_type_world());
    let routes = table.routes_of(&cluster_edge());
    for (n, (paths, request, expected)) in PATH_TYPE_EXAMPLES.iter().enumerate() {
        let want = expected.map_or("catch-all".to_string(), |j| example_service(n, j));
        assert_eq!(
            served(&routes, &example_host(n), request),
            want,
            "row {n}: {paths:?} vs {request}"
        );
    }
    for status in table.sources.values() {
        assert_eq!(status.reason, RouteReason::Routed, "{}", status.message);
    }
}

fn one_ingress(spec: Value, services: Vec<Arc<cftunnel_types::ServicePorts>>) -> RouteTable {
    let mut world = world_with(Vec::new(), services);
    world.ingress_classes = vec![cluster_edge_class()];
    world.ingresses = vec![ingress("shop", "web", 0, spec)];
    compute_routes(&world)
}

fn ingress_status(table: &RouteTable) -> &SourceStatus {
    source(table, SourceKind::Ingress, "shop", "web")
}

#[test]
fn ports_by_name_implementation_specific_regexes_and_the_default_backend() {
    let api = service(
        "shop",
        "api",
        0,
        json!({}),
        json!({}),
        json!([{"name": "metrics", "port": 9090}, {"name": "web", "port": 8080}]),
    );
    let table = one_ingress(
        json!({"ingressClassName": "cftunnel",
               "defaultBackend": {"service": {"name": "web", "port": {"number": 80}}},
               "rules": [
                 {"host": "app.example.org", "http": {"paths": [
                    {"path": "\\.png$", "pathType": "ImplementationSpecific",
                     "backend": {"service": {"name": "api", "port": {"name": "web"}}}}]}},
                 {"http": {"paths": [{"path": "/status", "pathType": "Exact",
                     "backend": {"service": {"name": "api", "port": {"number": 9090}}}}]}}]}),
        vec![api, http_service("shop", "web")],
    );
    let routes = table.routes_of(&cluster_edge());
    assert_eq!(
        served(&routes, "app.example.org", "/a/logo.png"),
        "http://api.shop.svc:8080"
    );
    assert_eq!(
        served(&routes, "app.example.org", "/status"),
        "http://api.shop.svc:9090"
    );
    assert_eq!(
        served(&routes, "other.example.net", "/status"),
        "http://api.shop.svc:9090"
    );
    assert_eq!(
        served(&routes, "other.example.net", "/"),
        "http://web.shop.svc:80"
    );
    assert!(
        routes.iter().any(|r| r.matches_everything()),
        "the defaultBackend is a route for every host and path: {routes:?}"
    );
    let dns: Vec<&str> = table.tunnels[&cluster_edge()]
        .dns
        .iter()
        .map(|d| d.fqdn.as_str())
        .collect();
    assert_eq!(
        dns,
        vec!["app.example.org"],
        "a rule without host gets no DNS name"
    );
    let status = ingress_status(&table);
    assert_eq!(status.reason, RouteReason::Routed, "{}", status.message);
}

#[test]
fn what_an_ingress_gets_wrong_is_named_with_its_field() {
    let table = one_ingress(
        json!({"ingressClassName": "cftunnel", "rules": [{"host": "app.example.org", "http": {"paths": [
            {"path": "/(", "pathType": "ImplementationSpecific",
             "backend": {"service": {"name": "web", "port": {"number": 80}}}},
            {"path": "/b", "pathType": "Prefix",
             "backend": {"resource": {"apiGroup": "k8s.example.com", "kind": "Bucket", "name": "b"}}},
            {"path": "/c", "pathType": "Prefix",
             "backend": {"service": {"name": "web", "port": {"name": "grpc"}}}}]}}]}),
        vec![http_service("shop", "web")],
    );
    let status = ingress_status(&table);
    assert_eq!(status.reason, RouteReason::InvalidRoute);
    for expected in [
        "spec.rules[0].http.paths[0].path: \"/(\" is not a valid regular expression",
        "spec.rules[0].http.paths[1].backend: a resource backend cannot be served through a tunnel",
        "spec.rules[0].http.paths[2].backend.service.port: Service shop/web has no port \"grpc\"; use one of http (80)",
    ] {
        assert!(
            status.message.contains(expected),
            "{expected}\n in {}",
            status.message
        );
    }
    // The port is only missing: that route is served as 404 and keeps its hostname.
    let c = status
        .routes
        .iter()
        .find(|e| e.path.as_deref() == Some("^/c(/|$)"))
        .map(|e| (e.reason, e.service.as_str()));
    assert_eq!(c, Some((RouteReason::PortNotFound, "http_status:404")));
}

#[test]
fn the_class_decides_whose_ingress_it_is_and_its_parameters_name_the_tunnel() {
    let spec = |class: Option<&str>| {
        let mut spec = json!({"rules": [{"host": "app.example.com", "http": {"paths": [
            {"path": "/", "pathType": "Prefix",
             "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}]});
        if let Some(class) = class {
            spec["ingressClassName"] = json!(class);
        }
        spec
    };
    let mut other = (*ingress_class("nginx", Value::Null)).clone();
    if let Some(s) = other.spec.as_mut() {
        s.controller = Some("k8s.io/ingress-nginx".into());
    }
    let mut default_class = (*ingress_class(
        "shop-edge",
        json!({"apiGroup": "networking.cfargotunnel.com", "kind": "Tunnel", "name": "edge",
               "scope": "Namespace", "namespace": "shop"}),
    ))
    .clone();
    default_class.metadata.annotations = Some(
        [(
            cftunnel_types::names::ANNOTATION_DEFAULT_INGRESS_CLASS.to_string(),
            "true".to_string(),
        )]
        .into(),
    );
    let broken = ingress_class(
        "broken",
        json!({"apiGroup": "networking.cfargotunnel.com", "kind": "Tunnel", "name": "edge", "scope": "Cluster"}),
    );
    let mut world = world_with(Vec::new(), vec![http_service("shop", "web")]);
    world.ingress_classes = vec![Arc::new(other), Arc::new(default_class), broken];
    world.ingresses = vec![
        ingress("shop", "nginx", 0, spec(Some("nginx"))),
        ingress("shop", "missing", 1, spec(Some("gone"))),
        ingress("shop", "defaulted", 2, spec(None)),
        ingress("shop", "broken", 3, spec(Some("broken"))),
    ];
    let table = compute_routes(&world);
    let kinds: Vec<&str> = table
        .sources
        .keys()
        .filter(|r| r.kind == SourceKind::Ingress)
        .map(|r| r.name.as_str())
        .collect();
    assert_eq!(
        kinds,
        vec!["broken", "defaulted"],
        "only Ingresses of our classes are sources"
    );
    let defaulted = source(&table, SourceKind::Ingress, "shop", "defaulted");
    assert_eq!(defaulted.tunnel, Some(shop_edge()));
    assert_eq!(
        defaulted.reason,
        RouteReason::Routed,
        "{}",
        defaulted.message
    );
    let broken = source(&table, SourceKind::Ingress, "shop", "broken");
    assert_eq!(broken.reason, RouteReason::InvalidRoute);
    assert!(
        broken.message.contains(
            "spec.ingressClassName: IngressClass broken spec.parameters.scope: \"Cluster\" does not fit a Tunnel"
        ),
        "{}",
        broken.message
    );
}

#[test]
fn one_hostname_has_one_owner_across_ingresses_bindings_and_services() {
    // The binding is the oldest; the Ingress loses the shared host, keeps its other one.
    let binding = binding(
        "shop",
        "web",
        0,
        json!({"kind": "ClusterTunnel", "name": "edge"}),
        json!([{"kind": "Service", "name": "web", "spec": {"fqdn": "app.example.org"}}]),
    );
    let mut world = world_with(vec![binding], vec![http_service("shop", "web")]);
    world.ingress_classes = vec![cluster_edge_class()];
    world.ingresses = vec![ingress(
        "shop",
        "web",
        5,
        json!({"ingressClassName": "cftunnel", "rules": [
            {"host": "app.example.org", "http": {"paths": [{"pathType": "ImplementationSpecific",
              "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}},
            {"host": "shop.example.org", "http": {"paths": [{"pathType": "ImplementationSpecific",
              "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}]}),
    )];
    let table = compute_routes(&world);
    let status = ingress_status(&table);
    assert_eq!(status.reason, RouteReason::HostnameConflict);
    assert!(
        status.message.contains(
            "spec.rules[0].host: app.example.org is already exposed by TunnelBinding shop/web (subject web), which is older"
        ),
        "{}",
        status.message
    );
    assert_eq!(status.hostnames(), vec!["shop.example.org"]);
    let binding = source(&table, SourceKind::TunnelBinding, "shop", "web");
    assert_eq!(binding.reason, RouteReason::Routed);
}

#[test]
fn every_host_routes_of_two_tunnels_do_not_conflict() {
    let mut world = world_with(Vec::new(), vec![http_service("shop", "web")]);
    let shop_class = ingress_class(
        "shop",
        json!({"apiGroup": "networking.cfargotunnel.com", "kind": "Tunnel", "name": "edge",
               "scope": "Namespace", "namespace": "shop"}),
    );
    world.ingress_classes = vec![cluster_edge_class(), shop_class];
    let default = |class: &str| {
        json!({"ingressClassName": class,
               "defaultBackend": {"service": {"name": "web", "port": {"number": 80}}}})
    };
    world.ingresses = vec![
        ingress("shop", "a", 0, default("cftunnel")),
        ingress("shop", "b", 1, default("shop")),
    ];
    let table = compute_routes(&world);
    for name in ["a", "b"] {
        let status = source(&table, SourceKind::Ingress, "shop", name);
        assert_eq!(
            status.reason,
            RouteReason::Routed,
            "{name}: {}",
            status.message
        );
    }
    assert!(table.tunnels.values().all(|t| t.dns.is_empty()));
}
