//! GRPCRoutes as cloudflared can carry them: a backend that is not TLS is `UnsupportedProtocol`
//! and answers 503 (gRPC `UNAVAILABLE`), a TLS backend is served over `https://` with an HTTP/2
//! origin, which makes the tunnel carrying it run cloudflared over `http2`.
use serde_json::{Value, json};

use super::rules::speaks_tls;
use super::tests::{cluster_edge, condition, decode, gateway_world, parent_conditions, statuses};
use crate::routes::fixtures::*;
use crate::routes::*;
use cftunnel_types::gateway::GRPCRoute;
use cftunnel_types::service::Port;

/// A world with the Gateway `shop/web` and a GRPCRoute `shop/<name>` of one rule sending
/// `shop.Cart` to port `port` of the Service `cart`, whose only port is `service_port`.
fn grpc_world(name: &str, service_port: Value, port: i32) -> RouteWorld {
    let mut world = gateway_world();
    world.services.push(service(
        "shop",
        "cart",
        0,
        json!({}),
        json!({}),
        json!([service_port]),
    ));
    world.grpc_routes.push(decode::<GRPCRoute>(json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "GRPCRoute",
        "metadata": {"name": name, "namespace": "shop", "generation": 1},
        "spec": {"parentRefs": [{"name": "web"}], "hostnames": ["grpc.example.org"], "rules": [
            {"matches": [{"method": {"service": "shop.Cart"}}],
             "backendRefs": [{"name": "cart", "port": port}]}]},
    })));
    world
}

/// What `grpc.example.org` serves on the ClusterTunnel `edge`: (service, http2Origin).
fn served(world: &RouteWorld) -> Vec<(String, Option<bool>)> {
    compute_routes(world)
        .routes_of(&cluster_edge())
        .into_iter()
        .filter(|r| r.hostname == "grpc.example.org")
        .map(|r| (r.service, r.origin_request.http2_origin))
        .collect()
}

#[test]
fn a_grpc_backend_on_a_plain_http_port_is_unsupported_protocol_and_answers_503() {
    let world = grpc_world("plain", json!({"name": "grpc", "port": 50051}), 50051);
    assert_eq!(served(&world), vec![("http_status:503".to_string(), None)]);
    let table = compute_routes(&world);
    let statuses = statuses(&world, &table);
    let plain = parent_conditions(&statuses, SourceKind::GRPCRoute, "plain");
    assert_eq!(
        condition(&plain, "ResolvedRefs"),
        (
            "False",
            "UnsupportedProtocol",
            "spec.rules[0].backendRefs[0].port: port 50051 of Service shop/cart is not TLS (named \"grpc\"), and cloudflared reaches an origin over HTTP/2, which gRPC needs, only with TLS; serve gRPC over TLS on a port with appProtocol https, or one named https, grpcs or https-..., or port 443 (requests answer 503, which gRPC clients read as UNAVAILABLE)"
        )
    );
    // The rule is implemented (it answers UNAVAILABLE, as GRPCRouteRule.backendRefs asks).
    assert_eq!(condition(&plain, "Accepted"), ("True", "Accepted", ""));
}

#[test]
fn an_h2c_app_protocol_is_cleartext_even_on_port_443() {
    let world = grpc_world(
        "h2c",
        json!({"name": "https", "port": 443, "appProtocol": "kubernetes.io/h2c"}),
        443,
    );
    assert_eq!(served(&world), vec![("http_status:503".to_string(), None)]);
    let table = compute_routes(&world);
    let h2c = parent_conditions(&statuses(&world, &table), SourceKind::GRPCRoute, "h2c");
    let (status, reason, message) = condition(&h2c, "ResolvedRefs");
    assert_eq!((status, reason), ("False", "UnsupportedProtocol"));
    assert!(
        message.contains("is not TLS (appProtocol \"kubernetes.io/h2c\")"),
        "{message}"
    );
}

#[test]
fn a_grpc_backend_that_speaks_tls_is_served_over_https_with_an_http2_origin() {
    for (port, number) in [
        (json!({"name": "grpcs", "port": 8443}), 8443),
        (json!({"name": "https-api", "port": 9443}), 9443),
        (
            json!({"name": "rpc", "port": 9000, "appProtocol": "https"}),
            9000,
        ),
        (json!({"port": 443}), 443),
    ] {
        let world = grpc_world("tls", port.clone(), number);
        assert_eq!(
            served(&world),
            vec![(format!("https://cart.shop.svc:{number}"), Some(true))],
            "{port}"
        );
        let table = compute_routes(&world);
        let tls = parent_conditions(&statuses(&world, &table), SourceKind::GRPCRoute, "tls");
        assert_eq!(
            condition(&tls, "Accepted"),
            ("True", "Accepted", ""),
            "{port}"
        );
        assert_eq!(
            condition(&tls, "ResolvedRefs"),
            ("True", "ResolvedRefs", ""),
            "{port}"
        );
    }
}

#[test]
fn a_port_speaks_tls_by_its_app_protocol_else_its_name_else_port_443() {
    let port = |value: Value| -> Port {
        serde_json::from_value(value).unwrap_or_else(|e| panic!("port: {e}"))
    };
    for (value, tls) in [
        (json!({"port": 8443, "appProtocol": "https"}), true),
        (json!({"port": 8443, "appProtocol": "HTTPS"}), true),
        (json!({"port": 443, "appProtocol": "http"}), false),
        (
            json!({"port": 443, "appProtocol": "kubernetes.io/h2c"}),
            false,
        ),
        (
            json!({"port": 8443, "name": "grpcs", "appProtocol": "grpc"}),
            false,
        ),
        (json!({"port": 8443, "name": "https"}), true),
        (json!({"port": 8443, "name": "grpcs"}), true),
        (json!({"port": 8443, "name": "https-web"}), true),
        (json!({"port": 8443, "name": "grpc"}), false),
        (json!({"port": 8443, "name": "httpsx"}), false),
        (json!({"port": 443}), true),
        (json!({"port": 443, "name": "grpc"}), true),
        (json!({"port": 50051}), false),
    ] {
        assert_eq!(speaks_tls(&port(value.clone())), tls, "{value}");
    }
}

/// Whether the routes the ClusterTunnel `edge` gets from `world` ask for an HTTP/2 origin (what
/// makes the rendered cloudflared run over `http2`; see the renderer's protocol tests).
fn asks_http2(world: &RouteWorld) -> bool {
    compute_routes(world)
        .routes_of(&cluster_edge())
        .iter()
        .any(|r| r.origin_request.http2_origin == Some(true))
}

#[test]
fn a_tunnel_carrying_a_grpc_route_gets_an_http2_origin_and_one_without_does_not() {
    let grpc = grpc_world("tls", json!({"name": "grpcs", "port": 8443}), 8443);
    assert!(asks_http2(&grpc));
    let mut http_only = gateway_world();
    http_only.http_routes.push(super::tests::http_route(
        "web",
        0,
        json!({"parentRefs": [{"name": "web"}], "hostnames": ["app.example.org"],
               "rules": [{"backendRefs": [{"name": "web", "port": 80}]}]}),
    ));
    assert!(
        !compute_routes(&http_only)
            .routes_of(&cluster_edge())
            .is_empty()
    );
    assert!(!asks_http2(&http_only));
}
