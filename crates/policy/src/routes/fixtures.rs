//! Test fixtures of the route model: tunnels, bindings and Services built from JSON.
use std::sync::Arc;

use cftunnel_types::ServicePorts;
use k8s_openapi::api::networking::v1::{Ingress, IngressClass};
use serde_json::{Value, json};

use super::*;
use crate::routes::{OriginRequest, Route};
use crate::rules::{RouteNamespacePolicy, TunnelFacts};
use cftunnel_types::TunnelBinding;
use cftunnel_types::{TunnelIdentity, TunnelKind};

pub(super) fn identity(kind: TunnelKind, namespace: &str, name: &str) -> TunnelIdentity {
    crate::rules::facts::referenced(kind, namespace, name)
}

pub(crate) fn tunnel(kind: TunnelKind, namespace: &str, name: &str, domain: &str) -> TunnelFacts {
    TunnelFacts {
        identity: identity(kind, namespace, name),
        domain: domain.into(),
        allowed: match kind {
            TunnelKind::Tunnel => RouteNamespacePolicy::Same,
            TunnelKind::ClusterTunnel => RouteNamespacePolicy::All,
        },
        has_origin_ca_pool: false,
        account: String::new(),
        account_zones: Vec::new(),
    }
}

pub(super) fn timestamp(second: i64) -> String {
    jiff::Timestamp::from_second(1_700_000_000 + second)
        .unwrap_or(jiff::Timestamp::UNIX_EPOCH)
        .to_string()
}

/// A binding created `created` seconds after a fixed instant.
pub(crate) fn binding(
    namespace: &str,
    name: &str,
    created: i64,
    tunnel_ref: Value,
    subjects: Value,
) -> Arc<TunnelBinding> {
    let value = json!({
        "apiVersion": "networking.cfargotunnel.com/v1alpha1", "kind": "TunnelBinding",
        "metadata": {"name": name, "namespace": namespace, "uid": format!("uid-{namespace}-{name}"),
                     "creationTimestamp": timestamp(created)},
        "subjects": subjects, "tunnelRef": tunnel_ref,
    });
    Arc::new(serde_json::from_value(value).unwrap_or_else(|e| panic!("binding fixture: {e}")))
}

/// A Service with the given labels, annotations and ports.
pub(crate) fn service(
    namespace: &str,
    name: &str,
    created: i64,
    labels: Value,
    annotations: Value,
    ports: Value,
) -> Arc<ServicePorts> {
    let value = json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": namespace, "uid": format!("uid-svc-{namespace}-{name}"),
                     "creationTimestamp": timestamp(created), "labels": labels, "annotations": annotations},
        "spec": {"ports": ports},
    });
    Arc::new(serde_json::from_value(value).unwrap_or_else(|e| panic!("service fixture: {e}")))
}

pub(super) fn http_service(namespace: &str, name: &str) -> Arc<ServicePorts> {
    service(
        namespace,
        name,
        0,
        json!({}),
        json!({}),
        json!([{"name": "http", "port": 80}]),
    )
}

pub(super) fn shop_edge() -> TunnelIdentity {
    identity(TunnelKind::Tunnel, "shop", "edge")
}

pub(super) fn world_with(
    bindings: Vec<Arc<TunnelBinding>>,
    services: Vec<Arc<ServicePorts>>,
) -> RouteWorld {
    RouteWorld {
        tunnels: vec![
            tunnel(TunnelKind::Tunnel, "shop", "edge", "example.com"),
            tunnel(TunnelKind::ClusterTunnel, "", "edge", "example.org"),
        ],
        bindings,
        services,
        ..RouteWorld::default()
    }
}

pub(super) fn to_edge() -> Value {
    json!({"kind": "Tunnel", "name": "edge"})
}

pub(crate) fn route(hostname: &str, path: Option<&str>, service: &str) -> Route {
    Route {
        hostname: hostname.into(),
        path: path.map(Into::into),
        path_kind: Default::default(),
        service: service.into(),
        origin_request: OriginRequest::default(),
    }
}

/// The Tunnel `name` of namespace `ns`.
pub(crate) fn ns_tunnel(name: &str) -> TunnelIdentity {
    identity(TunnelKind::Tunnel, "ns", name)
}

/// A tunnel's routes: `host` to the Service `web`.
pub(crate) fn with_route(host: &str) -> TunnelRoutes {
    TunnelRoutes {
        routes: vec![route(host, None, "http://web.ns.svc:80")],
        ..TunnelRoutes::default()
    }
}

pub(super) fn source<'t>(
    table: &'t RouteTable,
    kind: SourceKind,
    ns: &str,
    name: &str,
) -> &'t SourceStatus {
    table
        .sources
        .iter()
        .find(|(r, _)| r.kind == kind && r.namespace == ns && r.name == name)
        .map(|(_, s)| s)
        .unwrap_or_else(|| panic!("no status for {ns}/{name}"))
}

/// An IngressClass of cftunnel's naming `parameters` (`null` for none).
pub(crate) fn ingress_class(name: &str, parameters: Value) -> Arc<IngressClass> {
    let value = json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "IngressClass",
        "metadata": {"name": name},
        "spec": {"controller": cftunnel_types::names::CONTROLLER_NAME, "parameters": parameters},
    });
    Arc::new(serde_json::from_value(value).unwrap_or_else(|e| panic!("class fixture: {e}")))
}

/// The class `cftunnel` on the ClusterTunnel `edge`.
pub(crate) fn cluster_edge_class() -> Arc<IngressClass> {
    ingress_class(
        "cftunnel",
        json!({"apiGroup": "networking.cfargotunnel.com", "kind": "ClusterTunnel", "name": "edge", "scope": "Cluster"}),
    )
}

/// An Ingress created `created` seconds after a fixed instant, with the given spec.
pub(crate) fn ingress(namespace: &str, name: &str, created: i64, spec: Value) -> Arc<Ingress> {
    let value = json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"name": name, "namespace": namespace, "uid": format!("uid-ing-{namespace}-{name}"),
                     "creationTimestamp": timestamp(created)},
        "spec": spec,
    });
    Arc::new(serde_json::from_value(value).unwrap_or_else(|e| panic!("ingress fixture: {e}")))
}
