//! The private routes Gateways ask for: a Gateway of cftunnel's classes with a TCP or UDP
//! listener routes, through its tunnel, every backend Service of the TCPRoutes and UDPRoutes
//! accepted through it ([`private_backends`]): each cluster IP as a /32 or /128 and the
//! Service's cluster DNS name `<name>.<namespace>.svc.cluster.local` as a hostname route
//! (cloudflared resolves it on the cluster's side). The IP routes go in the VirtualNetwork the
//! Gateway's `cfargotunnel.com/virtual-network` annotation names, else in the account's default
//! network.
//!
//! The caller resolves what needs the cluster's tunnels or Cloudflare, as for a NetworkRoute:
//! the tunnel's id and account, the virtual network's id. The routes are settled by age with
//! the NetworkRoutes' in [`super::desired_routes`] (the Gateway's creation time).
use std::collections::BTreeMap;

use cftunnel_types::gateway::ANNOTATION_VIRTUAL_NETWORK;
use cftunnel_types::network::{NetworkService, NetworkTunnelRef, VirtualNetworkRef};
use cftunnel_types::{NetworkRouteSpec, TunnelIdentity, TunnelKind};

use super::desired::NetworkRouteSource;
use super::marker::{Owner, OwnerKind};
use crate::routes::RouteWorld;
use crate::routes::gateway::{L4Routes, PrivateBackends, private_backends};

/// The cluster DNS domain a Service's private hostname is in.
pub const CLUSTER_DOMAIN: &str = "cluster.local";

/// What cftunnel writes after its marker on a Gateway's routes.
const GATEWAY_COMMENT: &str = "Gateway";

/// One Gateway's private routes, as the planner reads a NetworkRoute's.
#[derive(Clone, Debug, PartialEq)]
pub struct GatewayNetworkSource {
    /// The Gateway's tunnel (a Tunnel may be in another namespace than the Gateway when its
    /// class names it): resolve its id into `source.tunnel_id` and its account as a
    /// NetworkRoute's.
    pub tunnel: TunnelIdentity,
    /// Named after the Gateway, created when it was; `spec.tunnelRef` names the tunnel's kind and
    /// name, `spec.virtualNetworkRef` the annotation's VirtualNetwork (resolve its id into
    /// `virtual_network_id`; until then the IP routes are held). Each Service is
    /// `<namespace>/<name>` in `spec.services` and `service_ips`; `spec.hostnames` holds their
    /// cluster DNS names.
    pub source: NetworkRouteSource,
}

impl GatewayNetworkSource {
    /// The Gateway, as the owner of its routes.
    pub fn owner(&self) -> Owner {
        Owner::new(
            OwnerKind::Gateway,
            &self.source.namespace,
            &self.source.name,
        )
    }
}

/// The cluster DNS name of the Service `namespace/name`.
pub fn service_hostname(namespace: &str, name: &str) -> String {
    format!("{name}.{namespace}.svc.{CLUSTER_DOMAIN}")
}

/// The private routes of every Gateway of cftunnel's classes with a TCP or UDP listener and a
/// tunnel that serves it, by Gateway namespace and name. A Gateway whose routes all went asks
/// for nothing: its source is still there, so its old routes are deleted.
pub fn gateway_network_sources(world: &RouteWorld, l4: &L4Routes) -> Vec<GatewayNetworkSource> {
    private_backends(world, l4)
        .into_iter()
        .map(network_source)
        .collect()
}

fn network_source(backends: PrivateBackends<'_>) -> GatewayNetworkSource {
    let metadata = &backends.gateway.metadata;
    let mut services = Vec::new();
    let mut hostnames = Vec::new();
    let mut service_ips = BTreeMap::new();
    for (namespace, name, service) in &backends.services {
        let key = format!("{namespace}/{name}");
        services.push(NetworkService { name: key.clone() });
        hostnames.push(service_hostname(namespace, name));
        service_ips.insert(key, service.cluster_ips().map(str::to_string).collect());
    }
    let virtual_network_ref = metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_VIRTUAL_NETWORK))
        .map(|name| name.trim())
        .filter(|name| !name.is_empty())
        .map(|name| VirtualNetworkRef {
            name: name.to_string(),
        });
    let kind = match backends.tunnel.kind {
        TunnelKind::Tunnel => "Tunnel",
        TunnelKind::ClusterTunnel => "ClusterTunnel",
    };
    GatewayNetworkSource {
        source: NetworkRouteSource {
            owner_kind: OwnerKind::Gateway,
            namespace: metadata.namespace.clone().unwrap_or_default(),
            name: metadata.name.clone().unwrap_or_default(),
            created: metadata.creation_timestamp.as_ref().map(|t| t.0),
            spec: NetworkRouteSpec {
                tunnel_ref: NetworkTunnelRef {
                    kind: Some(kind.to_string()),
                    name: backends.tunnel.name.clone(),
                },
                virtual_network_ref,
                cidrs: Vec::new(),
                services,
                hostnames,
                comment: Some(GATEWAY_COMMENT.to_string()),
            },
            tunnel_id: None,
            virtual_network_id: None,
            service_ips,
        },
        tunnel: backends.tunnel,
    }
}

#[cfg(test)]
#[path = "gateway_tests.rs"]
mod tests;
