//! The admission view built from the given objects, as the webhook builds it from its caches.
use k8s_openapi::api::core::v1::Service;

use super::decode::{Decoded, TunnelObject};
use crate::admission::binding::subject_route;
use crate::admission::service::{annotation_route, exposure};
use crate::admission::{
    AdmissionView, HostnameClaim, RouteNamespacePolicy, TunnelFacts, TunnelIdentity, TunnelKind,
};
use crate::api::TunnelBinding;

/// Tunnels and namespace labels of the input; claims are added as objects are walked.
pub fn base_view<'a>(objects: impl IntoIterator<Item = &'a Decoded>) -> AdmissionView {
    let mut view = AdmissionView::default();
    for object in objects {
        match object {
            Decoded::Tunnel(t) => view.tunnels.push(tunnel_facts(t)),
            Decoded::Namespace { name, labels } => {
                view.namespace_labels.insert(name.clone(), labels.clone());
            }
            Decoded::Binding { .. } | Decoded::Service { .. } => {}
        }
    }
    view
}

/// What the rules know of a tunnel. An unknown `from` falls back to the kind's default (the
/// tunnel's own validation reports it); `Selector` without a selector admits no namespace.
pub fn tunnel_facts(t: &TunnelObject) -> TunnelFacts {
    let namespaces = t
        .spec
        .allowed_routes
        .as_ref()
        .and_then(|a| a.namespaces.as_ref());
    let default = match t.kind {
        TunnelKind::ClusterTunnel => RouteNamespacePolicy::All,
        TunnelKind::Tunnel => RouteNamespacePolicy::Same,
    };
    let allowed = match namespaces.and_then(|n| n.from.as_deref()) {
        Some("All") => RouteNamespacePolicy::All,
        Some("Same") => RouteNamespacePolicy::Same,
        Some("Selector") => match namespaces.and_then(|n| n.selector.clone()) {
            Some(selector) => RouteNamespacePolicy::Selector(selector),
            None => RouteNamespacePolicy::Selector(never_matching_selector()),
        },
        _ => default,
    };
    TunnelFacts {
        identity: TunnelIdentity {
            kind: t.kind,
            namespace: t.namespace.clone(),
            name: t.name.clone(),
        },
        domain: t.spec.cloudflare.domain.clone(),
        allowed,
        has_origin_ca_pool: t
            .spec
            .origin_ca_pool
            .as_deref()
            .is_some_and(|s| !s.is_empty()),
    }
}

fn never_matching_selector() -> k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
    LabelSelector {
        match_expressions: Some(vec![LabelSelectorRequirement {
            key: "kubernetes.io/metadata.name".into(),
            operator: "In".into(),
            values: Some(Vec::new()),
        }]),
        match_labels: None,
    }
}

/// The identity a reference points at, known to the view or not.
fn referenced(kind: TunnelKind, namespace: &str, name: &str) -> TunnelIdentity {
    TunnelIdentity {
        kind,
        namespace: match kind {
            TunnelKind::Tunnel => namespace.to_string(),
            TunnelKind::ClusterTunnel => String::new(),
        },
        name: name.to_string(),
    }
}

/// The hostnames a binding claims: one per subject fqdn (the default one when its tunnel is
/// given). A reference to an unknown kind claims nothing.
pub fn binding_claims(
    binding: &TunnelBinding,
    namespace: &str,
    view: &AdmissionView,
) -> Vec<HostnameClaim> {
    let name = binding.metadata.name.as_deref().unwrap_or("");
    let object = format!("TunnelBinding {namespace}/{name}");
    let tunnel_ref = &binding.spec.tunnel_ref;
    let Some(kind) = TunnelKind::parse(&tunnel_ref.kind) else {
        return Vec::new();
    };
    let facts = view.tunnel(kind, namespace, &tunnel_ref.name);
    let identity = referenced(kind, namespace, &tunnel_ref.name);
    let mut claims = Vec::new();
    for (i, subject) in binding.spec.subjects.iter().enumerate() {
        let route = subject_route(i, subject, namespace);
        for (_, fqdn) in route.effective_fqdns(facts) {
            claims.push(HostnameClaim {
                fqdn,
                path: route.path_value().to_string(),
                tunnel: identity.clone(),
                owner: format!("{object} (subject {})", subject.name),
                object: object.clone(),
            });
        }
    }
    claims
}

/// The hostnames a labelled Service claims through its annotations.
pub fn service_claims(
    service: &Service,
    namespace: &str,
    view: &AdmissionView,
) -> Vec<HostnameClaim> {
    let name = service.metadata.name.as_deref().unwrap_or("");
    let object = format!("Service {namespace}/{name}");
    let Some(labels) = service.metadata.labels.as_ref() else {
        return Vec::new();
    };
    let Some((kind, tunnel_name)) = exposure(labels) else {
        return Vec::new();
    };
    let empty = Default::default();
    let annotations = service.metadata.annotations.as_ref().unwrap_or(&empty);
    let route = annotation_route(name, namespace, annotations);
    let facts = view.tunnel(kind, namespace, tunnel_name);
    let identity = referenced(kind, namespace, tunnel_name);
    route
        .effective_fqdns(facts)
        .into_iter()
        .map(|(_, fqdn)| HostnameClaim {
            fqdn,
            path: route.path_value().to_string(),
            tunnel: identity.clone(),
            owner: object.clone(),
            object: object.clone(),
        })
        .collect()
}
