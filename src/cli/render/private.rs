//! The private routes the NetworkRoutes of the input ask for at Cloudflare, as `cftunnel
//! render` shows them: YAML comments after the objects (they are Cloudflare's, not Kubernetes
//! objects), one line per route with its network, tunnel and comment, and the conflicts and
//! refusals the reconciler would report. Tunnel and virtual network ids come from the input's
//! statuses, else placeholders; a Service's addresses from its `spec.clusterIPs`; the marker's
//! cluster id is the running operator's, shown as `<cluster>`.
use std::collections::BTreeMap;
use std::fmt::Write as _;

use k8s_openapi::api::core::v1::Service;

use super::PLACEHOLDER_TUNNEL_ID;
use cftunnel_policy::dns::ClusterId;
use cftunnel_policy::private::{NetworkRouteSource, OwnerKind, desired_routes};
use cftunnel_policy::validate::decode::TunnelObject;
use cftunnel_types::TunnelKind;
use cftunnel_types::network::{NetworkRoute, VirtualNetwork};

/// Stands in for the cluster id in the markers shown (a valid one, replaced in the text).
const SHOWN_CLUSTER: &str = "render-cluster";

/// The comment block; empty when the input holds no NetworkRoute.
pub(super) fn describe(
    routes: &[(String, NetworkRoute)],
    networks: &[VirtualNetwork],
    tunnels: &[TunnelObject],
    services: &[Service],
) -> String {
    if routes.is_empty() {
        return String::new();
    }
    let Ok(cluster) = ClusterId::new(SHOWN_CLUSTER) else {
        return String::new();
    };
    let sources: Vec<NetworkRouteSource> = routes
        .iter()
        .map(|(namespace, route)| source(namespace, route, networks, tunnels, services))
        .collect();
    let desired = desired_routes(&cluster, &sources);
    let shown = |comment: &str| comment.replace(SHOWN_CLUSTER, "<cluster>");
    let mut out = String::from(
        "# Private routes at Cloudflare the NetworkRoutes ask for (not Kubernetes objects):\n",
    );
    for (key, route) in &desired.ip {
        let _ = writeln!(
            out,
            "#   ip route {} in network {} through tunnel {} ({}), comment {:?}",
            key.cidr,
            key.virtual_network_id.as_deref().unwrap_or("default"),
            route.tunnel_id.as_deref().unwrap_or(PLACEHOLDER_TUNNEL_ID),
            route.owner,
            shown(&route.comment)
        );
    }
    for (hostname, route) in &desired.hostnames {
        let _ = writeln!(
            out,
            "#   hostname route {hostname} through tunnel {} ({}), comment {:?}",
            route.tunnel_id.as_deref().unwrap_or(PLACEHOLDER_TUNNEL_ID),
            route.owner,
            shown(&route.comment)
        );
    }
    for conflict in &desired.conflicts {
        let _ = writeln!(out, "#   conflict: {}: {conflict}", conflict.owner);
    }
    for refusal in &desired.refusals {
        let _ = writeln!(out, "#   refused: {}: {}", refusal.owner, refusal.reason);
    }
    out
}

fn source(
    namespace: &str,
    route: &NetworkRoute,
    networks: &[VirtualNetwork],
    tunnels: &[TunnelObject],
    services: &[Service],
) -> NetworkRouteSource {
    let name = route.metadata.name.clone().unwrap_or_default();
    let reference = &route.spec.tunnel_ref;
    let tunnel = tunnels.iter().find(|t| {
        t.name == reference.name
            && match reference.kind.as_deref() {
                Some("ClusterTunnel") => t.kind == TunnelKind::ClusterTunnel,
                _ => t.kind == TunnelKind::Tunnel && t.namespace == namespace,
            }
    });
    let tunnel_id = tunnel.map(|t| {
        t.status
            .as_ref()
            .and_then(|s| s.tunnel_id.clone())
            .filter(|id| !id.is_empty())
            .unwrap_or_else(|| PLACEHOLDER_TUNNEL_ID.to_string())
    });
    let virtual_network_id = route.spec.virtual_network_ref.as_ref().map(|r| {
        networks
            .iter()
            .find(|n| n.metadata.name.as_deref() == Some(r.name.as_str()))
            .and_then(|n| n.status.as_ref().and_then(|s| s.id.clone()))
            .unwrap_or_else(|| format!("<VirtualNetwork {}>", r.name))
    });
    let service_ips: BTreeMap<String, Vec<String>> = route
        .spec
        .services
        .iter()
        .filter_map(|s| {
            let service = services.iter().find(|svc| {
                svc.metadata.name.as_deref() == Some(s.name.as_str())
                    && svc.metadata.namespace.as_deref() == Some(namespace)
            })?;
            let ips = service
                .spec
                .as_ref()
                .and_then(|spec| spec.cluster_ips.clone())
                .unwrap_or_default();
            Some((s.name.clone(), ips))
        })
        .collect();
    NetworkRouteSource {
        owner_kind: OwnerKind::NetworkRoute,
        namespace: namespace.to_string(),
        name,
        created: route.metadata.creation_timestamp.as_ref().map(|t| t.0),
        spec: route.spec.clone(),
        tunnel_id,
        virtual_network_id,
        service_ips,
    }
}
