//! The statuses Gateway API defines, as the route model's outcome gives them: GatewayClass
//! `Accepted` and `supportedFeatures`; Gateway `Accepted`, `Programmed`, `addresses` and per
//! listener `Accepted`, `ResolvedRefs`, `Programmed`, `Conflicted` and `attachedRoutes`
//! (`listener_status.rs`); per route one `status.parents` entry per parent reference of
//! cftunnel's, each judged on its own (`parent_status.rs`). TCPRoutes and UDPRoutes are judged
//! the same way, less what only hostnames and rules make: nothing of theirs is in the route
//! table, and their backends resolve or not. A Gateway whose tunnel is missing or refuses its
//! namespace is not `Accepted` (`InvalidParameters`).
//!
//! Conditions carry the object's generation; `lastTransitionTime` is kept from the current
//! condition when its status is unchanged, else `now` (`conditions.rs`).
use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::attach;
use super::conditions::conditions;
pub use super::conditions::{DNS_CONDITION, DnsNote};
use super::l4::{L4Kind, L4Routes, read_l4};
use super::listener_status::{Attached, listener_statuses};
use super::parent_status::{Judged, parent_status, served_entries};
use crate::routes::source::ServiceIndex;
use crate::routes::table::RouteTable;
use crate::routes::world::{RouteWorld, SourceKind, SourceRef};
use cftunnel_types::TunnelIdentity;
use cftunnel_types::gateway::{
    Gateway, GatewayClassStatus, GatewayStatus, GatewayStatusAddress, RouteParentStatus,
    SupportedFeature,
};
use cftunnel_types::names::CONTROLLER_NAME;

/// The features a GatewayClass of cftunnel's reports: "the set of features the GatewayClass
/// support", named as the conformance suite names them (`pkg/features`) and sorted, as
/// `supportedFeatures` requires. Only those whose conformance cases pass here (docs/routing.md,
/// Conformance); GRPCRoute is served but not listed: no conformance case of it runs, its
/// header matches are refused, and Cloudflare does not support gRPC on public hostnames.
/// TCPRoute and UDPRoute are served but not listed either: none of their cases runs here (they
/// send traffic to a Gateway's address; here a Gateway's TCPRoutes and UDPRoutes are private
/// routes to each backend's own address).
pub const SUPPORTED_FEATURES: &[&str] = &["Gateway", "HTTPRoute", "ReferenceGrant"];

/// Every status cftunnel writes on Gateway API objects, by object.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GatewayApiStatus {
    /// By GatewayClass name.
    pub classes: BTreeMap<String, GatewayClassStatus>,
    /// By (namespace, name).
    pub gateways: BTreeMap<(String, String), GatewayStatus>,
    /// By (kind, namespace, name): only the parents that are cftunnel's.
    pub routes: BTreeMap<(SourceKind, String, String), Vec<RouteParentStatus>>,
    /// TCPRoutes and UDPRoutes, as `routes`.
    pub l4_routes: BTreeMap<(L4Kind, String, String), Vec<RouteParentStatus>>,
}

/// What the status needs besides the world and the route table.
pub struct StatusInput<'a> {
    /// Tunnel ids of the tunnels that have one (the address of their Gateways).
    pub tunnel_ids: &'a BTreeMap<TunnelIdentity, String>,
    /// The DNS sync's problems per tunnel (none offline).
    pub dns: &'a BTreeMap<TunnelIdentity, Vec<DnsNote>>,
    pub now: Time,
    /// Leave out the routes whose `status.parents` already carry cftunnel's entries as they
    /// should be ([`merged_parents`] changes nothing): what a status writer needs, and all a
    /// large cluster's routes would otherwise be held at once on every recomputation.
    pub changed_routes_only: bool,
}

/// A route's parents: the other controllers' entries as they are, then cftunnel's (`ours`).
pub fn merged_parents(
    current: &[RouteParentStatus],
    ours: &[RouteParentStatus],
) -> Vec<RouteParentStatus> {
    let mut out: Vec<RouteParentStatus> = current
        .iter()
        .filter(|p| p.controller_name != CONTROLLER_NAME)
        .cloned()
        .collect();
    out.extend(ours.iter().cloned());
    out
}

/// The statuses of the world's Gateway API objects, with no TCPRoute or UDPRoute.
pub fn gateway_statuses(
    world: &RouteWorld,
    table: &RouteTable,
    input: &StatusInput<'_>,
) -> GatewayApiStatus {
    gateway_statuses_with_l4(world, &L4Routes::default(), table, input)
}

/// The statuses of the world's Gateway API objects and of the TCPRoutes and UDPRoutes `l4`:
/// their parents, and the listeners they attach to.
pub fn gateway_statuses_with_l4(
    world: &RouteWorld,
    l4: &L4Routes,
    table: &RouteTable,
    input: &StatusInput<'_>,
) -> GatewayApiStatus {
    let services: ServiceIndex<'_> = super::service_index(world);
    let mut out = GatewayApiStatus::default();
    for class in &world.gateway_classes {
        if class.spec.controller_name != CONTROLLER_NAME {
            continue;
        }
        let previous = class
            .status
            .as_ref()
            .map(|s| s.conditions.as_slice())
            .unwrap_or_default();
        let mut c = conditions(previous, &class.metadata, &input.now);
        match attach::class_problem(class) {
            None => c.set("Accepted", true, "Accepted", "served by cftunnel"),
            Some(problem) => c.set("Accepted", false, "InvalidParameters", problem),
        }
        out.classes.insert(
            class.metadata.name.clone().unwrap_or_default(),
            GatewayClassStatus {
                conditions: c.out,
                supported_features: SUPPORTED_FEATURES
                    .iter()
                    .map(|n| SupportedFeature {
                        name: n.to_string(),
                    })
                    .collect(),
            },
        );
    }

    // Every route's parents, resolved once: route statuses and listener counts both need them.
    // One route is read at a time: a read holds the route's parents and rules as a tunnel
    // serves them, a kilobyte or more, and a cluster may have tens of thousands.
    let mut attached = Attached::new();
    let http = (world.http_routes.iter()).map(|r| super::read_http(world, &services, r));
    let grpc = (world.grpc_routes.iter()).map(|r| super::read_grpc(world, &services, r));
    for read in http.chain(grpc) {
        let (kind, metadata, parents, analysis, previous) = (
            &read.kind,
            read.metadata,
            &read.parents,
            &read.analysis,
            read.previous,
        );
        // A route counts once per listener it attached to with a hostname in common; a route
        // refused for what a tunnel cannot express is attached nowhere.
        let mut counted = std::collections::BTreeSet::new();
        for parent in parents.iter().filter(|_| analysis.unsupported.is_empty()) {
            let gateway = &parent.gateway.metadata;
            for listener in &parent.listeners {
                let key = (
                    gateway.namespace.clone().unwrap_or_default(),
                    gateway.name.clone().unwrap_or_default(),
                    *listener,
                );
                if counted.insert(key.clone()) {
                    *attached.entry(key).or_default() += 1;
                }
            }
        }
        let source = SourceRef::of(*kind, metadata);
        let statuses: Vec<RouteParentStatus> = parents
            .iter()
            .map(|parent| {
                let dns = parent
                    .served()
                    .and_then(|(tunnel, _)| input.dns.get(tunnel))
                    .map(Vec::as_slice)
                    .unwrap_or_default();
                parent_status(
                    &Judged {
                        parent,
                        analysis,
                        served: served_entries(parent, table, &source),
                        dns,
                    },
                    previous,
                    metadata,
                    &input.now,
                )
            })
            .collect();
        if input.changed_routes_only && merged_parents(previous, &statuses) == previous {
            continue;
        }
        out.routes.insert(
            (
                *kind,
                metadata.namespace.clone().unwrap_or_default(),
                metadata.name.clone().unwrap_or_default(),
            ),
            statuses,
        );
    }

    l4_statuses(world, &services, l4, input, &mut attached, &mut out);

    for gateway in &world.gateways {
        let Some(class) = attach::our_class(world, &gateway.spec.gateway_class_name) else {
            continue;
        };
        let key = (
            gateway.metadata.namespace.clone().unwrap_or_default(),
            gateway.metadata.name.clone().unwrap_or_default(),
        );
        let status = gateway_status(
            world,
            gateway,
            attach::gateway_tunnel(gateway, class),
            &attached,
            input,
        );
        out.gateways.insert(key, status);
    }
    out
}

fn gateway_status(
    world: &RouteWorld,
    gateway: &Gateway,
    tunnel: Result<TunnelIdentity, String>,
    attached: &Attached,
    input: &StatusInput<'_>,
) -> GatewayStatus {
    let current = gateway.status.clone().unwrap_or_default();
    let mut c = conditions(&current.conditions, &gateway.metadata, &input.now);
    let namespace = gateway.metadata.namespace.as_deref().unwrap_or("");
    // A tunnel that is missing or refuses this Gateway's namespace serves none of its routes.
    let problem = tunnel
        .as_ref()
        .ok()
        .and_then(|t| attach::tunnel_problem(world, t, namespace));
    let usable = tunnel.as_ref().ok().filter(|_| problem.is_none());
    let id = usable.and_then(|t| input.tunnel_ids.get(t));
    match (&tunnel, &problem, id) {
        (Err(problem), _, _) => {
            c.set("Accepted", false, "InvalidParameters", problem.clone());
            c.set(
                "Programmed",
                false,
                "Invalid",
                "the Gateway names no tunnel",
            );
        }
        (Ok(t), Some(problem), _) => {
            c.set("Accepted", false, "InvalidParameters", problem.clone());
            c.set(
                "Programmed",
                false,
                "Invalid",
                format!("{t} serves no route of this Gateway"),
            );
        }
        (Ok(t), None, None) => {
            c.set("Accepted", true, "Accepted", format!("served through {t}"));
            c.set(
                "Programmed",
                false,
                "Pending",
                format!("{t} has no Cloudflare tunnel yet"),
            );
        }
        (Ok(t), None, Some(_)) => {
            c.set("Accepted", true, "Accepted", format!("served through {t}"));
            c.set(
                "Programmed",
                true,
                "Programmed",
                format!("routes are in the configuration of {t}"),
            );
        }
    }
    let programmed = id.is_some();
    let listeners = listener_statuses(gateway, &current, programmed, attached, &input.now);
    GatewayStatus {
        addresses: id
            .map(|id| {
                vec![GatewayStatusAddress {
                    type_: Some("Hostname".to_string()),
                    value: format!("{id}.cfargotunnel.com"),
                }]
            })
            .unwrap_or_default(),
        conditions: c.out,
        listeners,
    }
}

/// The parents of every TCPRoute and UDPRoute, into `out`, and the listeners each attached to,
/// into `attached`: once per listener of a parent that accepts it ("Routes with any other value
/// for the Accepted condition MUST NOT be included in this count").
fn l4_statuses(
    world: &RouteWorld,
    services: &ServiceIndex<'_>,
    l4: &L4Routes,
    input: &StatusInput<'_>,
    attached: &mut Attached,
    out: &mut GatewayApiStatus,
) {
    for route in l4.iter() {
        let read = read_l4(world, services, route);
        let metadata = read.route.metadata;
        let mut counted = std::collections::BTreeSet::new();
        for parent in read.parents.iter().filter(|p| p.served().is_some()) {
            let gateway = &parent.gateway.metadata;
            for listener in &parent.listeners {
                let key = (
                    gateway.namespace.clone().unwrap_or_default(),
                    gateway.name.clone().unwrap_or_default(),
                    *listener,
                );
                if counted.insert(key.clone()) {
                    *attached.entry(key).or_default() += 1;
                }
            }
        }
        let previous = read.previous();
        let statuses: Vec<RouteParentStatus> = read
            .parents
            .iter()
            .map(|parent| {
                let judged = Judged {
                    parent,
                    analysis: &read.analysis,
                    served: Vec::new(),
                    dns: &[],
                };
                parent_status(&judged, previous, metadata, &input.now)
            })
            .collect();
        if input.changed_routes_only && merged_parents(previous, &statuses) == previous {
            continue;
        }
        out.l4_routes.insert(
            (
                read.route.kind,
                metadata.namespace.clone().unwrap_or_default(),
                metadata.name.clone().unwrap_or_default(),
            ),
            statuses,
        );
    }
}
