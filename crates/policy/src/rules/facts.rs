//! Builds the admission view from objects: what each tunnel allows, which hostnames each
//! binding and labelled Service claims. Shared by the webhook's caches and `cftunnel validate`.
use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, LabelSelectorRequirement, ObjectMeta,
};

use super::view::{HostnameClaim, RouteNamespacePolicy, TunnelFacts, find_tunnel};
use super::{binding, service};
use cftunnel_types::{TunnelBinding, TunnelSpec};
use cftunnel_types::{TunnelIdentity, TunnelKind};

/// Facts of a Tunnel or ClusterTunnel (whose `namespace` is ignored). An unknown `from` falls
/// back to the kind's default (the tunnel's own validation reports it); `Selector` without a
/// selector admits no namespace.
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
    let allowed = match routes.and_then(|n| n.from.as_deref()) {
        Some("All") => RouteNamespacePolicy::All,
        Some("Same") => RouteNamespacePolicy::Same,
        Some("Selector") => RouteNamespacePolicy::Selector(
            routes
                .and_then(|n| n.selector.clone())
                .unwrap_or_else(never_matching),
        ),
        // ClusterTunnels served every namespace under the Go operator.
        _ if kind == TunnelKind::ClusterTunnel => RouteNamespacePolicy::All,
        _ => RouteNamespacePolicy::Same,
    };
    TunnelFacts {
        identity: referenced(kind, namespace, name),
        domain: spec.cloudflare.domain.clone(),
        allowed,
        has_origin_ca_pool: spec
            .origin_ca_pool
            .as_deref()
            .is_some_and(|s| !s.is_empty()),
        account: account_key(spec),
        account_zones: Vec::new(),
    }
}

/// `id:<accountId>` or `name:<accountName>`, as [`TunnelFacts::account`] holds it.
fn account_key(spec: &TunnelSpec) -> String {
    let cf = &spec.cloudflare;
    match (cf.account_id.as_deref(), cf.account_name.as_deref()) {
        (Some(id), _) if !id.trim().is_empty() => format!("id:{}", id.trim().to_ascii_lowercase()),
        (_, Some(name)) if !name.trim().is_empty() => format!("name:{}", name.trim()),
        _ => String::new(),
    }
}

/// Fills each tunnel's [`TunnelFacts::account_zones`]: the domains of the other tunnels naming
/// the same account. They are the zones of that account the cluster knows without asking
/// Cloudflare, so a route of one tunnel may use a hostname in another's zone.
pub fn link_account_zones(tunnels: &mut [TunnelFacts]) {
    let mut by_account: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for t in tunnels.iter().filter(|t| !t.account.is_empty()) {
        by_account
            .entry(t.account.clone())
            .or_default()
            .push(t.domain.to_ascii_lowercase());
    }
    for zones in by_account.values_mut() {
        zones.sort();
        zones.dedup();
    }
    for t in tunnels.iter_mut() {
        let own = t.domain.to_ascii_lowercase();
        t.account_zones = by_account
            .get(&t.account)
            .filter(|_| !t.account.is_empty())
            .map(|zones| zones.iter().filter(|z| **z != own).cloned().collect())
            .unwrap_or_default();
    }
}

fn never_matching() -> LabelSelector {
    LabelSelector {
        match_expressions: Some(vec![LabelSelectorRequirement {
            key: "kubernetes.io/metadata.name".into(),
            operator: "In".into(),
            values: Some(Vec::new()),
        }]),
        match_labels: None,
    }
}

/// The identity a reference from `namespace` points at, whether the tunnel exists or not.
pub fn referenced(kind: TunnelKind, namespace: &str, name: &str) -> TunnelIdentity {
    let namespace = if kind == TunnelKind::ClusterTunnel {
        String::new()
    } else {
        namespace.to_string()
    };
    TunnelIdentity {
        kind,
        namespace,
        name: name.to_string(),
    }
}

/// Hostnames a binding claims: each subject's fqdn, or its default `<service>.<domain>` once the
/// tunnel is known. A claim on a tunnel that does not exist yet still holds the hostname.
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
    let facts = find_tunnel(tunnels, kind, namespace, &b.spec.tunnel_ref.name);
    let identity = referenced(kind, namespace, &b.spec.tunnel_ref.name);
    let mut claims = Vec::new();
    for (i, subject) in b.spec.subjects.iter().enumerate() {
        let route = binding::subject_route(i, subject, namespace);
        for (_, fqdn) in route.effective_fqdns(facts) {
            claims.push(HostnameClaim {
                fqdn: fqdn.into_owned(),
                path: route.path_value().to_string(),
                tunnel: identity.clone(),
                owner: format!("{object} (subject {})", subject.name),
                object: object.clone(),
            });
        }
    }
    claims
}

/// Hostnames a labelled Service (its metadata) claims through its annotations.
pub fn service_claims(
    s: &ObjectMeta,
    namespace: &str,
    tunnels: &[TunnelFacts],
) -> Vec<HostnameClaim> {
    let empty = BTreeMap::new();
    let labels = s.labels.as_ref().unwrap_or(&empty);
    let Some((kind, tunnel_name)) = service::exposure(labels) else {
        return Vec::new();
    };
    let name = s.name.as_deref().unwrap_or("");
    let object = format!("Service {namespace}/{name}");
    let route =
        service::annotation_route(name, namespace, s.annotations.as_ref().unwrap_or(&empty));
    let identity = referenced(kind, namespace, tunnel_name);
    route
        .effective_fqdns(find_tunnel(tunnels, kind, namespace, tunnel_name))
        .into_iter()
        .map(|(_, fqdn)| HostnameClaim {
            fqdn: fqdn.into_owned(),
            path: route.path_value().to_string(),
            tunnel: identity.clone(),
            owner: object.clone(),
            object: object.clone(),
        })
        .collect()
}

/// Does the tunnel `kind` `namespace/name` with `spec` admit routes of `route_namespace`
/// (its `allowedRoutes`, the kind's default when unset)? `namespace_labels` holds each
/// namespace's labels, for `Selector`.
pub fn tunnel_admits(
    kind: TunnelKind,
    namespace: &str,
    name: &str,
    spec: &TunnelSpec,
    route_namespace: &str,
    namespace_labels: &BTreeMap<String, BTreeMap<String, String>>,
) -> bool {
    let facts = tunnel_facts(kind, namespace, name, spec);
    super::view::admits_namespace(namespace_labels, &facts.allowed, namespace, route_namespace)
}
