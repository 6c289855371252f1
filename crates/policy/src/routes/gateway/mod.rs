//! Gateway API v1 as route sources: HTTPRoutes and GRPCRoutes attached to Gateways of cftunnel's
//! GatewayClasses become routes of the Gateways' tunnels, on the same model as bindings and
//! Ingresses (docs/design.md §3.2).
//!
//! - **Whose:** a GatewayClass with `controllerName: cfargotunnel.com/cftunnel`; a Gateway of
//!   such a class; a route's parent references to such Gateways (other parents are left to
//!   their controllers).
//! - **Which tunnel:** the Gateway's `spec.infrastructure.parametersRef` (a Tunnel in its
//!   namespace or a ClusterTunnel), else its class's `spec.parametersRef` (a ClusterTunnel, or a
//!   Tunnel with its namespace). The tunnel's `allowedRoutes` is asked about the Gateway's
//!   namespace; the listeners' `allowedRoutes` about the route's.
//! - **Every parent on its own:** each parent reference is judged with its own Gateway, tunnel
//!   and listener hostnames; a tunnel gets a route's rules only through the parents it serves,
//!   and each `status.parents[]` entry says what became of that parent alone.
//! - **Attachment:** `sectionName` and `port` select listeners; HTTP and HTTPS listeners serve
//!   (the edge terminates TLS); hostnames are the intersection of listener and route hostnames.
//! - **Rules:** `Exact` and `PathPrefix` become typed matches, `RegularExpression` a checked
//!   cloudflared regex; a GRPCRoute's service and method become exact or prefix paths with an
//!   HTTP/2 origin over TLS (`https://`); a gRPC backend that is not TLS (`rules::speaks_tls`)
//!   is `UnsupportedProtocol`. One backend per rule: a Service (a ReferenceGrant in its
//!   namespace when it is in another), else the rule answers 500 (a GRPCRoute's 503, which gRPC
//!   clients read as `UNAVAILABLE`).
//! - **Refused, never dropped:** header, query and method matches, filters, timeouts and a
//!   split over several backends: the route is not served and says so (`Accepted=False`,
//!   `UnsupportedValue`, naming the field).
//! - Hostname authority is the model's: one owner per hostname(+path) across every kind, the
//!   oldest object first, then namespace and name.
//! - **TCPRoutes and UDPRoutes** (`l4`) attach to TCP and UDP listeners and have statuses of
//!   their own; they make no route of the model (no ingress rule, no DNS record): their
//!   backends are private routes of the Gateway's tunnel (`private_backends`).
pub(crate) mod attach;
mod conditions;
#[cfg(test)]
mod grpc_tests;
mod l4;
#[cfg(test)]
pub(crate) mod l4_tests;
mod listener_status;
mod parent_status;
#[cfg(test)]
mod parent_tests;
mod private_backends;
mod protocols;
pub(crate) mod rules;
pub mod status;
#[cfg(test)]
mod tests;

pub use l4::{L4Kind, L4Routes};
pub use private_backends::{PrivateBackends, private_backends};

use std::collections::BTreeMap;
use std::sync::Arc;

use super::route::PathKind;
use super::source::{Declared, ServiceIndex, Source};
use super::world::{Age, RouteWorld, SourceKind, SourceRef};
use crate::rules::Verdict;
use crate::rules::route::{Field, PortRef, RouteInput};
use attach::ParentOutcome;
use cftunnel_types::TunnelIdentity;
use cftunnel_types::gateway::{
    GRPCRoute, HTTPRoute, ParentReference, RouteParentStatus, RouteStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use rules::{RouteAnalysis, Target};

/// Every Service of the world by (namespace, name).
pub(super) fn service_index(world: &RouteWorld) -> ServiceIndex<'_> {
    world
        .services
        .iter()
        .filter_map(|s| {
            Some((
                (
                    s.metadata.namespace.as_deref()?,
                    s.metadata.name.as_deref()?,
                ),
                s.as_ref(),
            ))
        })
        .collect()
}

/// One HTTPRoute or GRPCRoute read once: its parents resolved and its rules as a tunnel can
/// serve them. Sources and statuses are both made from this.
pub(crate) struct RouteRead<'w> {
    pub kind: SourceKind,
    pub metadata: &'w ObjectMeta,
    pub parents: Vec<ParentOutcome<'w>>,
    pub analysis: RouteAnalysis<'w>,
    /// Its current `status.parents`.
    pub previous: &'w [RouteParentStatus],
}

/// One HTTPRoute, read.
pub(super) fn read_http<'w>(
    world: &'w RouteWorld,
    services: &ServiceIndex<'w>,
    route: &'w HTTPRoute,
) -> RouteRead<'w> {
    let spec = (
        route.spec.parent_refs.as_slice(),
        route.spec.hostnames.as_slice(),
    );
    let analysis = rules::analyze_http(world, services, route);
    reading(
        world,
        SourceKind::HTTPRoute,
        &route.metadata,
        spec,
        analysis,
        route.status.as_ref(),
    )
}

/// One GRPCRoute, read.
pub(super) fn read_grpc<'w>(
    world: &'w RouteWorld,
    services: &ServiceIndex<'w>,
    route: &'w GRPCRoute,
) -> RouteRead<'w> {
    let spec = (
        route.spec.parent_refs.as_slice(),
        route.spec.hostnames.as_slice(),
    );
    let analysis = rules::analyze_grpc(world, services, route);
    reading(
        world,
        SourceKind::GRPCRoute,
        &route.metadata,
        spec,
        analysis,
        route.status.as_ref(),
    )
}

/// A route of either kind, read: its parents (`spec`: its parent references and hostnames)
/// and its rules' `analysis`.
fn reading<'w>(
    world: &'w RouteWorld,
    kind: SourceKind,
    metadata: &'w ObjectMeta,
    (parent_refs, hostnames): (&'w [ParentReference], &'w [String]),
    analysis: RouteAnalysis<'w>,
    status: Option<&'w RouteStatus>,
) -> RouteRead<'w> {
    let namespace = metadata.namespace.as_deref().unwrap_or("");
    RouteRead {
        kind,
        metadata,
        parents: attach::parents(world, kind.as_str(), namespace, parent_refs, hostnames),
        analysis,
        previous: status.map(|s| s.parents.as_slice()).unwrap_or_default(),
    }
}

/// The sources of one HTTPRoute or GRPCRoute: one per tunnel its accepted parents run on.
/// They borrow the world, not `read`: the model reads a route, takes its sources and drops
/// the reading.
pub(super) fn sources_of_read<'w>(read: &RouteRead<'w>) -> Vec<Source<'w>> {
    sources_of(read.kind, read.metadata, &read.parents, &read.analysis)
}

/// Hostnames with the field each came from.
type Hostnames<'w> = Vec<(Field, &'w str)>;

/// Which source of a route a parent feeds. The parents a tunnel serves merge into one source
/// per tunnel (their hostnames, each once), so hostnames shared by two of them are claimed once.
/// A parent whose tunnel is missing or refuses its Gateway's namespace feeds a source of its own,
/// judged by the model with that namespace: it records why (`TunnelNotFound`,
/// `NamespaceNotAllowed`), claims nothing and never reaches the served parents' rules.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Feed {
    Served(TunnelIdentity),
    Refused(TunnelIdentity, String),
}

fn sources_of<'w>(
    kind: SourceKind,
    metadata: &'w ObjectMeta,
    parents: &[ParentOutcome<'w>],
    analysis: &RouteAnalysis<'w>,
) -> Vec<Source<'w>> {
    if !analysis.unsupported.is_empty() {
        return Vec::new();
    }
    let reference = Arc::new(SourceRef::of(kind, metadata));
    let mut feeds: BTreeMap<Feed, (String, Hostnames<'w>)> = BTreeMap::new();
    for parent in parents {
        let (Ok(tunnel), Ok(hosts)) = (&parent.tunnel, &parent.hostnames) else {
            continue;
        };
        let gateway_namespace = parent
            .gateway
            .metadata
            .namespace
            .clone()
            .unwrap_or_default();
        let feed = match parent.tunnel_problem {
            None => Feed::Served(tunnel.clone()),
            Some(_) => Feed::Refused(tunnel.clone(), gateway_namespace.clone()),
        };
        let entry = feeds
            .entry(feed)
            .or_insert_with(|| (gateway_namespace, Vec::new()));
        for (field, host) in hosts {
            if !entry.1.iter().any(|(_, h)| h.eq_ignore_ascii_case(host)) {
                entry.1.push((*field, host));
            }
        }
    }
    feeds
        .into_iter()
        .map(|(feed, (gateway_namespace, hosts))| Source {
            age: Age::of(&reference, metadata),
            tunnel: Some(match feed {
                Feed::Served(tunnel) | Feed::Refused(tunnel, _) => tunnel,
            }),
            tunnel_field: "spec.parentRefs".into(),
            tunnel_user_namespace: Some(gateway_namespace),
            disable_dns: false,
            problems: Verdict::default(),
            routes: declared_routes(&reference, analysis, &hosts),
            reference: reference.clone(),
        })
        .collect()
}

fn declared_routes<'w>(
    reference: &SourceRef,
    analysis: &RouteAnalysis<'w>,
    hosts: &[(Field, &'w str)],
) -> Vec<Declared<'w>> {
    let named: Vec<(Field, &'w str)> = hosts
        .iter()
        .filter(|(_, h)| *h != super::ANY_HOST)
        .copied()
        .collect();
    let any_host = named.len() < hosts.len();
    let mut out = Vec::new();
    for rule in &analysis.rules {
        let i = rule.index;
        let (input, service) = match &rule.target {
            Target::Service {
                namespace,
                name,
                port,
                service,
            } => (
                RouteInput {
                    namespace,
                    service: name,
                    port: Some((
                        Field::RouteRule(i, "backendRefs[0].port"),
                        PortRef::Number(i64::from(*port)),
                    )),
                    // A gRPC backend got here only by speaking TLS (`rules::speaks_tls`), which
                    // its port name alone may not tell the model's own protocol inference.
                    protocol: analysis
                        .http2
                        .then_some((Field::RouteRule(i, "backendRefs[0].port"), "https")),
                    http2_origin: analysis.http2,
                    ..RouteInput::default()
                },
                Some(*service),
            ),
            Target::Invalid => (
                RouteInput {
                    target: Some((Field::RouteRule(i, "backendRefs"), analysis.invalid_backend)),
                    ..RouteInput::default()
                },
                None,
            ),
        };
        for m in &rule.matches {
            let with_hosts = |fqdns: Vec<(Field, &'w str)>, every_host: bool| Declared {
                input: RouteInput {
                    fqdns,
                    path: m.regex_input,
                    ..input.clone()
                },
                path: m.regex.clone(),
                path_kind: if m.regex.is_some() {
                    m.kind
                } else {
                    PathKind::Regex
                },
                any_host: every_host,
                problems: Verdict::default(),
                legacy: Vec::new(),
                service,
                owner: format!("{reference} (rule {i})"),
                fqdn_field: "spec.hostnames".into(),
                service_field: format!("spec.rules[{i}].backendRefs[0].name"),
                port_field: format!("spec.rules[{i}].backendRefs[0].port"),
            };
            if !named.is_empty() {
                out.push(with_hosts(named.clone(), false));
            }
            if any_host {
                out.push(with_hosts(Vec::new(), true));
            }
        }
    }
    out
}
