//! TCPRoutes and UDPRoutes (Gateway API v1, standard channel since v1.6) on Gateways of
//! cftunnel's classes. A tunnel has no port of its own to listen on: such a route makes no
//! ingress rule and no DNS record; its backend Services become private routes of the Gateway's
//! tunnel (their cluster IPs and cluster DNS names, for WARP clients), which
//! `crate::private::gateway` gives the private network planner.
//!
//! - **Attachment** as for HTTPRoutes (`attach::parents`): `sectionName` and `port` select
//!   listeners; a TCP listener takes TCPRoutes, a UDP listener UDPRoutes (`protocols`); there are
//!   no hostnames to intersect.
//! - **Backends:** every backend of the rule with a weight above 0 is routed (weights split
//!   nothing: each Service is reached at its own addresses). A backend resolves when it is a
//!   core Service, in the route's namespace or granted by a ReferenceGrant there, with the port
//!   the backendRef names in the route's protocol, and a cluster IP. One that does not gets no
//!   route and makes the parents' `ResolvedRefs` False with the specification's reason
//!   (`InvalidKind`, `RefNotPermitted`, `BackendNotFound`, `UnsupportedProtocol`); the route
//!   stays `Accepted` (TCPRouteRule.backendRefs: connections to an invalid backend MUST be
//!   rejected, and one without a route is).
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::attach::{self, ParentOutcome};
use super::rules::{RouteAnalysis, granted};
use crate::routes::source::ServiceIndex;
use crate::routes::world::RouteWorld;
use cftunnel_types::ServicePorts;
use cftunnel_types::gateway::{
    BackendRef, L4RouteRule, ParentReference, RouteParentStatus, RouteStatus, TCPRoute, UDPRoute,
};

/// The kind of a Layer 4 route.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum L4Kind {
    TCPRoute,
    UDPRoute,
}

impl L4Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            L4Kind::TCPRoute => "TCPRoute",
            L4Kind::UDPRoute => "UDPRoute",
        }
    }

    /// The protocol of its listeners and of the Service ports it reaches.
    pub fn protocol(self) -> &'static str {
        match self {
            L4Kind::TCPRoute => "TCP",
            L4Kind::UDPRoute => "UDP",
        }
    }
}

/// Every TCPRoute and UDPRoute (empty while their CRDs are not installed). Objects being
/// deleted are left out by the caller, as for the world's routes.
#[derive(Clone, Debug, Default)]
pub struct L4Routes {
    pub tcp: Vec<Arc<TCPRoute>>,
    pub udp: Vec<Arc<UDPRoute>>,
}

/// One route of either kind, as cftunnel reads it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct L4Route<'w> {
    pub kind: L4Kind,
    pub metadata: &'w ObjectMeta,
    pub parent_refs: &'w [ParentReference],
    pub rules: &'w [L4RouteRule],
    pub status: Option<&'w RouteStatus>,
}

impl L4Routes {
    /// Every route, TCPRoutes first.
    pub(crate) fn iter(&self) -> impl Iterator<Item = L4Route<'_>> {
        let tcp = self.tcp.iter().map(|r| L4Route {
            kind: L4Kind::TCPRoute,
            metadata: &r.metadata,
            parent_refs: &r.spec.parent_refs,
            rules: &r.spec.rules,
            status: r.status.as_ref(),
        });
        let udp = self.udp.iter().map(|r| L4Route {
            kind: L4Kind::UDPRoute,
            metadata: &r.metadata,
            parent_refs: &r.spec.parent_refs,
            rules: &r.spec.rules,
            status: r.status.as_ref(),
        });
        tcp.chain(udp)
    }
}

/// A backend Service that resolved.
#[derive(Clone, Copy, Debug)]
pub(crate) struct L4Backend<'w> {
    pub namespace: &'w str,
    pub name: &'w str,
    pub service: &'w ServicePorts,
}

/// One TCPRoute or UDPRoute read: its parents resolved and its backends.
pub(crate) struct L4Read<'w> {
    pub route: L4Route<'w>,
    pub parents: Vec<ParentOutcome<'w>>,
    /// The backends that resolved, each once.
    pub backends: Vec<L4Backend<'w>>,
    /// Only `unresolved` is set: the backends that do not resolve, (reason, message).
    pub analysis: RouteAnalysis<'w>,
}

impl<'w> L4Read<'w> {
    /// Its current `status.parents`.
    pub(crate) fn previous(&self) -> &'w [RouteParentStatus] {
        self.route
            .status
            .map(|s| s.parents.as_slice())
            .unwrap_or_default()
    }
}

/// Reads one route: which parents take it, which backends resolve.
pub(crate) fn read_l4<'w>(
    world: &'w RouteWorld,
    services: &ServiceIndex<'w>,
    route: L4Route<'w>,
) -> L4Read<'w> {
    let namespace = route.metadata.namespace.as_deref().unwrap_or("");
    let parents = attach::parents(
        world,
        route.kind.as_str(),
        namespace,
        route.parent_refs,
        &[],
    );
    let mut analysis = RouteAnalysis::default();
    let mut backends: Vec<L4Backend<'w>> = Vec::new();
    for (i, rule) in route.rules.iter().enumerate() {
        for (k, backend) in rule.backend_refs.iter().enumerate() {
            if backend.weight == Some(0) {
                continue;
            }
            let field = format!("spec.rules[{i}].backendRefs[{k}]");
            match resolve(world, services, (route.kind, namespace), &field, backend) {
                Ok(found) => {
                    if !backends
                        .iter()
                        .any(|b| (b.namespace, b.name) == (found.namespace, found.name))
                    {
                        backends.push(found);
                    }
                }
                Err(problem) => analysis.unresolved.push(problem),
            }
        }
    }
    L4Read {
        route,
        parents,
        backends,
        analysis,
    }
}

/// One backend of a route of `kind` in `namespace`, resolved, or why it is not: (reason,
/// message).
fn resolve<'w>(
    world: &'w RouteWorld,
    services: &ServiceIndex<'w>,
    (kind, namespace): (L4Kind, &'w str),
    field: &str,
    backend: &'w BackendRef,
) -> Result<L4Backend<'w>, (&'static str, String)> {
    const UNROUTED: &str = "it gets no private route";
    let group = backend.group.as_deref().unwrap_or("");
    let backend_kind = backend.kind.as_deref().unwrap_or("Service");
    if !group.is_empty() || backend_kind != "Service" {
        return Err((
            "InvalidKind",
            format!(
                "{field}: {backend_kind} ({group:?}) is not a kind cftunnel routes to; use a Service ({UNROUTED})"
            ),
        ));
    }
    let name = backend.name.as_str();
    let backend_namespace = backend.namespace.as_deref().unwrap_or(namespace);
    if backend_namespace != namespace
        && !granted(world, kind.as_str(), namespace, backend_namespace, name)
    {
        return Err((
            "RefNotPermitted",
            format!(
                "{field}: Service {backend_namespace}/{name} is in another namespace and no ReferenceGrant there allows {}s of {namespace} to use it; add one ({UNROUTED})",
                kind.as_str()
            ),
        ));
    }
    let Some(service) = services.get(&(backend_namespace, name)).copied() else {
        return Err((
            "BackendNotFound",
            format!(
                "{field}: Service {backend_namespace}/{name} does not exist; create it or fix the name ({UNROUTED})"
            ),
        ));
    };
    let Some(port) = backend.port else {
        return Err((
            "BackendNotFound",
            format!("{field}.port: not set; a Service backend needs its port ({UNROUTED})"),
        ));
    };
    let protocol = kind.protocol();
    let numbered: Vec<&str> = service
        .ports()
        .iter()
        .filter(|p| p.port == port)
        .map(|p| p.protocol.as_deref().unwrap_or("TCP"))
        .collect();
    if numbered.is_empty() {
        return Err((
            "BackendNotFound",
            format!(
                "{field}.port: Service {backend_namespace}/{name} has no port {port}; use one of its ports ({UNROUTED})"
            ),
        ));
    }
    if !numbered.contains(&protocol) {
        return Err((
            "UnsupportedProtocol",
            format!(
                "{field}.port: port {port} of Service {backend_namespace}/{name} is {}, and a {} reaches {protocol} ports; use a {protocol} port or a {}",
                numbered.join(", "),
                kind.as_str(),
                match kind {
                    L4Kind::TCPRoute => "UDPRoute",
                    L4Kind::UDPRoute => "TCPRoute",
                }
            ),
        ));
    }
    if service.cluster_ips().next().is_none() {
        return Err((
            "BackendNotFound",
            format!(
                "{field}: Service {backend_namespace}/{name} has no cluster IP (a headless Service): there is no address to route; give it a cluster IP ({UNROUTED})"
            ),
        ));
    }
    Ok(L4Backend {
        namespace: backend_namespace,
        name,
        service,
    })
}
