//! On the real API server, after the CRDs are served: a route with parents on two tunnels, one
//! of which refuses the Gateway's namespace, is served only through the other, and each
//! `status.parents[]` entry says what became of its own parent; a GRPCRoute backend on a plain
//! HTTP port is `UnsupportedProtocol` and answers 503, a TLS one is served over https, and its
//! tunnel runs cloudflared with `--protocol http2`.
use cftunnel_testenv::poll_until;
use cftunnel_types::gateway::{GRPCRoute, Gateway, HTTPRoute, RouteStatus};
use cftunnel_types::names::CONTROLLER_NAME;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::Api;
use serde_json::{Value, json};

use crate::harness::{Harness, POLL, WAIT};
use crate::live::{API_SECRET, condition, create, wait_records};

/// cftunnel's `status.parents[]` entry for the parent Gateway `gateway`, if written.
fn entry(status: Option<RouteStatus>, gateway: &str) -> Vec<Condition> {
    status
        .into_iter()
        .flat_map(|s| s.parents)
        .find(|p| p.controller_name == CONTROLLER_NAME && p.parent_ref.name == gateway)
        .map(|p| p.conditions)
        .unwrap_or_default()
}

/// The rules of the config.yaml of the Tunnel `tunnel`: (hostname, service).
async fn rules(h: &Harness, tunnel: &str) -> Option<Vec<(String, String)>> {
    let text = Api::<ConfigMap>::namespaced(h.admin.clone(), &h.ns)
        .get_opt(tunnel)
        .await
        .ok()
        .flatten()
        .and_then(|c| c.data)
        .and_then(|d| d.get("config.yaml").cloned())?;
    let config: Value = serde_yaml_ng::from_str(&text).ok()?;
    Some(
        config["ingress"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|r| {
                (
                    r["hostname"].as_str().unwrap_or("*").to_string(),
                    r["service"].as_str().unwrap_or("").to_string(),
                )
            })
            .collect(),
    )
}

async fn wait_rules(
    h: &Harness,
    tunnel: &str,
    what: &str,
    check: impl Fn(&[(String, String)]) -> bool,
) {
    let waited = poll_until(what, WAIT, POLL, || async {
        rules(h, tunnel).await.filter(|r| check(r)).map(|_| ())
    })
    .await;
    if let Err(e) = waited {
        panic!("{e}; rules of {tunnel} now {:?}", rules(h, tunnel).await);
    }
}

/// The value after `--protocol` in the cloudflared arguments of the Tunnel `tunnel`.
async fn protocol_arg(h: &Harness, tunnel: &str) -> Option<String> {
    let deployment = Api::<Deployment>::namespaced(h.admin.clone(), &h.ns)
        .get_opt(tunnel)
        .await
        .ok()
        .flatten()?;
    let deployment = serde_json::to_value(deployment).ok()?;
    let args: Vec<String> = deployment
        .pointer("/spec/template/spec/containers/0/args")?
        .as_array()?
        .iter()
        .filter_map(|a| a.as_str().map(str::to_string))
        .collect();
    let at = args.iter().position(|a| a == "--protocol")?;
    args.get(at + 1).cloned()
}

async fn wait_protocol(h: &Harness, tunnel: &str, wanted: &str) {
    let waited = poll_until(
        &format!("{tunnel} running cloudflared --protocol {wanted}"),
        WAIT,
        POLL,
        || async { (protocol_arg(h, tunnel).await.as_deref() == Some(wanted)).then_some(()) },
    )
    .await;
    if let Err(e) = waited {
        panic!("{e}; now {:?}", protocol_arg(h, tunnel).await);
    }
}

/// A Gateway of `class` on the Tunnel `tunnel` of the test namespace, one HTTP listener.
fn gateway(name: &str, class: &str, tunnel: &str) -> Value {
    json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
        "metadata": {"name": name},
        "spec": {"gatewayClassName": class,
                 "infrastructure": {"parametersRef": {"group": "networking.cfargotunnel.com", "kind": "Tunnel", "name": tunnel}},
                 "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]},
    })
}

/// Tunnels `open` (routes of its namespace) and `closed` (no namespace matches its selector),
/// a Gateway on each, and an HTTPRoute with both as parents.
pub(crate) async fn each_parent_is_judged_on_its_own(h: &Harness, class: &str) {
    let ns = h.ns.clone();
    h.create_tunnel(
        "open",
        h.spec(API_SECRET, json!({"newTunnel": {"name": "open"}})),
    )
    .await;
    h.create_tunnel(
        "closed",
        h.spec(
            API_SECRET,
            json!({"newTunnel": {"name": "closed"},
                   "allowedRoutes": {"namespaces": {"from": "Selector",
                       "selector": {"matchLabels": {"cftunnel-test/never": "true"}}}}}),
        ),
    )
    .await;
    h.wait_reason(&h.tunnels(), "open", "Ready").await;
    h.wait_reason(&h.tunnels(), "closed", "Ready").await;
    let gateways: Api<Gateway> = Api::namespaced(h.admin.clone(), &ns);
    create(&gateways, gateway("gw-open", class, "open")).await;
    create(&gateways, gateway("gw-closed", class, "closed")).await;
    let routes: Api<HTTPRoute> = Api::namespaced(h.admin.clone(), &ns);
    create(
        &routes,
        json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": "two-parents"},
            "spec": {"parentRefs": [{"name": "gw-closed"}, {"name": "gw-open"}],
                     "hostnames": ["parents.example.com"],
                     "rules": [{"backendRefs": [{"name": "web", "port": 80}]}]},
        }),
    )
    .await;

    let refused = poll_until(
        "two-parents: gw-open Accepted, gw-closed NoMatchingParent",
        WAIT,
        POLL,
        || async {
            let status = routes.get("two-parents").await.ok()?.status;
            let open = entry(status.clone(), "gw-open");
            let closed = entry(status, "gw-closed");
            let accepted = condition(&open, "Accepted") == ("True", "Accepted", "")
                && condition(&open, "ResolvedRefs").0 == "True";
            let (s, r, m) = condition(&closed, "Accepted");
            (accepted && s == "False" && r == "NoMatchingParent").then(|| m.to_string())
        },
    )
    .await;
    let refused = match refused {
        Ok(message) => message,
        Err(e) => {
            let now = routes.get("two-parents").await.ok().and_then(|r| r.status);
            panic!("{e}; now {now:?}")
        }
    };
    assert_eq!(
        refused,
        format!(
            "Gateway {ns}/gw-closed cannot serve routes: Tunnel {ns}/closed does not admit routes from namespace \"{ns}\", the Gateway's (its allowedRoutes.namespaces); ask its owner to allow it, or name another tunnel"
        )
    );
    let svc = format!("http://web.{ns}.svc:80");
    wait_rules(
        h,
        "open",
        "parents.example.com served through open",
        |rules| rules.contains(&("parents.example.com".to_string(), svc.clone())),
    )
    .await;
    let closed = rules(h, "closed").await.unwrap_or_default();
    assert!(
        !closed.iter().any(|(host, _)| host == "parents.example.com"),
        "the tunnel that refuses the Gateway's namespace serves the route: {closed:?}"
    );
    wait_records(h, "parents.example.com", 1).await;
    let gateway = gateways.get("gw-closed").await.expect("gateway");
    let conditions = gateway.status.map(|s| s.conditions).unwrap_or_default();
    assert_eq!(
        condition(&conditions, "Accepted").1,
        "InvalidParameters",
        "{conditions:?}"
    );
}

/// Waits until cftunnel's `gw-open` entry of GRPCRoute `name` has `type_` = `status` with
/// `reason`; returns its message.
async fn wait_grpc(
    routes: &Api<GRPCRoute>,
    name: &str,
    type_: &str,
    status: &str,
    reason: &str,
) -> String {
    let found = poll_until(
        &format!("GRPCRoute {name} {type_}={status} {reason}"),
        WAIT,
        POLL,
        || async {
            let conditions = entry(routes.get(name).await.ok()?.status, "gw-open");
            let (s, r, m) = condition(&conditions, type_);
            (s == status && r == reason).then(|| m.to_string())
        },
    )
    .await;
    match found {
        Ok(message) => message,
        Err(e) => {
            let now = routes.get(name).await.ok().and_then(|r| r.status);
            panic!("{e}; now {now:?}")
        }
    }
}

/// GRPCRoutes through `gw-open`: one to a plain HTTP port, one to a TLS port.
pub(crate) async fn grpc_backends_must_speak_tls(h: &Harness) {
    let ns = h.ns.clone();
    let services: Api<Service> = Api::namespaced(h.admin.clone(), &ns);
    for (name, port) in [
        ("grpc-plain", json!({"name": "grpc", "port": 50051})),
        ("grpc-tls", json!({"name": "grpcs", "port": 8443})),
    ] {
        create(
            &services,
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
                   "spec": {"ports": [port]}}),
        )
        .await;
    }
    let routes: Api<GRPCRoute> = Api::namespaced(h.admin.clone(), &ns);
    for (name, host, backend, port) in [
        ("plain", "plain-grpc.example.com", "grpc-plain", 50051),
        ("secure", "secure-grpc.example.com", "grpc-tls", 8443),
    ] {
        create(
            &routes,
            json!({
                "apiVersion": "gateway.networking.k8s.io/v1", "kind": "GRPCRoute",
                "metadata": {"name": name},
                "spec": {"parentRefs": [{"name": "gw-open"}], "hostnames": [host],
                         "rules": [{"backendRefs": [{"name": backend, "port": port}]}]},
            }),
        )
        .await;
    }
    let message = wait_grpc(
        &routes,
        "plain",
        "ResolvedRefs",
        "False",
        "UnsupportedProtocol",
    )
    .await;
    assert_eq!(
        message,
        format!(
            "spec.rules[0].backendRefs[0].port: port 50051 of Service {ns}/grpc-plain is not TLS (named \"grpc\"), and cloudflared reaches an origin over HTTP/2, which gRPC needs, only with TLS; serve gRPC over TLS on a port with appProtocol https, or one named https, grpcs or https-..., or port 443 (requests answer 503, which gRPC clients read as UNAVAILABLE)"
        )
    );
    wait_grpc(&routes, "plain", "Accepted", "True", "Accepted").await;
    wait_grpc(&routes, "secure", "Accepted", "True", "Accepted").await;
    wait_grpc(&routes, "secure", "ResolvedRefs", "True", "ResolvedRefs").await;
    let tls = format!("https://grpc-tls.{ns}.svc:8443");
    wait_rules(h, "open", "the GRPCRoutes rendered", |rules| {
        rules.contains(&("plain-grpc.example.com".into(), "http_status:503".into()))
            && rules.contains(&("secure-grpc.example.com".into(), tls.clone()))
    })
    .await;
    // The tunnel carrying gRPC runs over http2; the other keeps its spec's protocol.
    wait_protocol(h, "open", "http2").await;
    assert_eq!(protocol_arg(h, "closed").await.as_deref(), Some("auto"));
}
