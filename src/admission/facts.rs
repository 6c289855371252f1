//! Builds the admission view from objects: what each tunnel allows, which hostnames each
//! binding and labelled Service claims. Shared by the webhook's caches and `cftunnel validate`.
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Service;

use super::view::{
    HostnameClaim, RouteNamespacePolicy, TunnelFacts, TunnelIdentity, TunnelKind, find_tunnel,
};
use super::{binding, service};
use crate::api::{TunnelBinding, TunnelSpec};

/// Facts of a Tunnel (`namespace` set) or ClusterTunnel (`namespace` empty).
pub fn tunnel_facts(
    kind: TunnelKind,
    namespace: &str,
    name: &str,
    spec: &TunnelSpec,
) -> TunnelFacts {
    let routes = spec
        .allowed_routes
        .as_ref()
        .and_then(|a| a.namespaces.as_ref());
    let allowed = match (
        routes.and_then(|n| n.from.as_deref()),
        routes.and_then(|n| n.selector.clone()),
    ) {
        (Some("All"), _) => RouteNamespacePolicy::All,
        (Some("Same"), _) => RouteNamespacePolicy::Same,
        (Some("Selector"), Some(selector)) => RouteNamespacePolicy::Selector(selector),
        // Defaults: ClusterTunnels served every namespace under the Go operator.
        _ if kind == TunnelKind::ClusterTunnel => RouteNamespacePolicy::All,
        _ => RouteNamespacePolicy::Same,
    };
    let namespace = if kind == TunnelKind::ClusterTunnel {
        String::new()
    } else {
        namespace.to_string()
    };
    TunnelFacts {
        identity: TunnelIdentity {
            kind,
            namespace,
            name: name.to_string(),
        },
        domain: spec.cloudflare.domain.clone(),
        allowed,
        has_origin_ca_pool: spec
            .origin_ca_pool
            .as_deref()
            .is_some_and(|s| !s.is_empty()),
    }
}

/// Hostnames a binding claims, given the tunnels known (a subject without fqdn claims the
/// default `<service>.<domain>` once its tunnel is known).
pub fn binding_claims(
    b: &TunnelBinding,
    namespace: &str,
    tunnels: &[TunnelFacts],
) -> Vec<HostnameClaim> {
    let name = b.metadata.name.as_deref().unwrap_or("");
    let object = format!("TunnelBinding {namespace}/{name}");
    let Some(kind) = TunnelKind::parse(&b.spec.tunnel_ref.kind) else {
        return Vec::new();
    };
    let Some(tunnel) = find_tunnel(tunnels, kind, namespace, &b.spec.tunnel_ref.name) else {
        return Vec::new();
    };
    let mut claims = Vec::new();
    for (i, subject) in b.spec.subjects.iter().enumerate() {
        let route = binding::subject_route(i, subject, namespace);
        for (_, fqdn) in route.effective_fqdns(Some(tunnel)) {
            claims.push(HostnameClaim {
                fqdn: fqdn.to_ascii_lowercase(),
                path: route.path_value().to_string(),
                tunnel: tunnel.identity.clone(),
                owner: format!("{object} (subject {})", subject.name),
                object: object.clone(),
            });
        }
    }
    claims
}

/// Hostnames a labelled Service claims.
pub fn service_claims(s: &Service, namespace: &str, tunnels: &[TunnelFacts]) -> Vec<HostnameClaim> {
    let empty = BTreeMap::new();
    let labels = s.metadata.labels.as_ref().unwrap_or(&empty);
    let Some((kind, tunnel_name)) = service::exposure(labels) else {
        return Vec::new();
    };
    let Some(tunnel) = find_tunnel(tunnels, kind, namespace, tunnel_name) else {
        return Vec::new();
    };
    let name = s.metadata.name.as_deref().unwrap_or("");
    let object = format!("Service {namespace}/{name}");
    let route = service::annotation_route(
        name,
        namespace,
        s.metadata.annotations.as_ref().unwrap_or(&empty),
    );
    route
        .effective_fqdns(Some(tunnel))
        .into_iter()
        .map(|(_, fqdn)| HostnameClaim {
            fqdn: fqdn.to_ascii_lowercase(),
            path: route.path_value().to_string(),
            tunnel: tunnel.identity.clone(),
            owner: object.clone(),
            object: object.clone(),
        })
        .collect()
}
