//! The admission view built from the given objects, as the webhook builds it from its caches
//! (with the same functions, `crate::rules::facts`). Every tunnel and VirtualNetwork of the
//! input is known whatever its place; claims are added as objects are walked.
use k8s_openapi::api::core::v1::Service;

use super::decode::{Decoded, TunnelObject};
use crate::rules::facts;
use crate::rules::{AdmissionView, HostnameClaim, TunnelFacts};
use cftunnel_types::TunnelBinding;

/// Tunnels, VirtualNetworks and namespace labels of the input; claims are added as objects
/// are walked.
pub(crate) fn base_view<'a>(objects: impl IntoIterator<Item = &'a Decoded>) -> AdmissionView {
    let mut view = AdmissionView::default();
    for object in objects {
        match object {
            Decoded::Tunnel(t) => view.tunnels.push(tunnel_facts(t)),
            Decoded::Namespace { name, labels } => {
                view.namespace_labels.insert(name.clone(), labels.clone());
            }
            Decoded::VirtualNetwork(network) => {
                view.virtual_networks
                    .push(std::sync::Arc::new(network.clone()));
            }
            Decoded::Binding { .. }
            | Decoded::Service { .. }
            | Decoded::NetworkRoute { .. }
            | Decoded::Access(_)
            | Decoded::AccessPolicy { .. }
            | Decoded::Ingress { .. }
            | Decoded::IngressClass(_)
            | Decoded::Gateway(_) => {}
        }
    }
    facts::link_account_zones(&mut view.tunnels);
    view
}

pub fn tunnel_facts(t: &TunnelObject) -> TunnelFacts {
    facts::tunnel_facts(t.kind, &t.namespace, &t.name, &t.spec)
}

pub fn binding_claims(
    binding: &TunnelBinding,
    namespace: &str,
    view: &AdmissionView,
) -> Vec<HostnameClaim> {
    facts::binding_claims(binding, namespace, &view.tunnels)
}

pub fn service_claims(
    service: &Service,
    namespace: &str,
    view: &AdmissionView,
) -> Vec<HostnameClaim> {
    facts::service_claims(&service.metadata, namespace, &view.tunnels)
}
