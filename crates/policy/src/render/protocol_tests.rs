//! cloudflared's `--protocol`: `http2` for a tunnel with a route to an HTTP/2 origin (gRPC fails
//! over QUIC), the spec's own protocol otherwise.
use serde_json::{Value, json};

use super::tests::{five_routes, input, options, spec};
use super::*;
use crate::routes::Route;
use crate::routes::fixtures::route;
use cftunnel_types::TunnelKind;

/// The value after `--protocol` in the rendered cloudflared arguments.
fn protocol_arg(spec_extra: Value, routes: Vec<Route>) -> String {
    let rendered = render_all(
        &input(TunnelKind::Tunnel, spec(spec_extra), routes),
        &options(),
    )
    .expect("renders");
    let args: Vec<&str> = rendered.deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .expect("args")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let at = args
        .iter()
        .position(|a| *a == "--protocol")
        .expect("a --protocol argument");
    args.get(at + 1).expect("its value").to_string()
}

fn with_http2_origin() -> Vec<Route> {
    let mut grpc = route(
        "grpc.example.com",
        Some("^/shop\\.Cart(/|$)"),
        "https://cart.shop.svc:8443",
    );
    grpc.origin_request.http2_origin = Some(true);
    let mut routes = five_routes();
    routes.push(grpc);
    routes
}

#[test]
fn a_tunnel_with_a_route_to_an_http2_origin_runs_cloudflared_over_http2_whatever_its_protocol() {
    for extra in [
        json!({"protocol": "quic"}),
        json!({"protocol": "auto"}),
        json!({}),
        json!({"protocol": "quic", "configSource": "Cloudflare"}),
    ] {
        assert_eq!(
            protocol_arg(extra.clone(), with_http2_origin()),
            "http2",
            "{extra}"
        );
    }
}

#[test]
fn a_tunnel_without_one_keeps_its_spec_protocol_and_auto_when_unset() {
    assert_eq!(
        protocol_arg(json!({"protocol": "quic"}), five_routes()),
        "quic"
    );
    assert_eq!(
        protocol_arg(json!({"protocol": "http2"}), five_routes()),
        "http2"
    );
    assert_eq!(protocol_arg(json!({}), five_routes()), "auto");
    assert_eq!(
        protocol_arg(
            json!({"protocol": "quic", "configSource": "Cloudflare"}),
            five_routes()
        ),
        "quic"
    );
}
