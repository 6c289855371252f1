//! The snapshot the route model reads: owned, cheap to fill from watch caches (`Arc`s straight
//! out of a reflector store) or from the files `cftunnel render` reads.
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use k8s_openapi::api::networking::v1::{Ingress, IngressClass};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use crate::rules::TunnelFacts;
use cftunnel_types::gateway::{GRPCRoute, Gateway, GatewayClass, HTTPRoute, ReferenceGrant};
use cftunnel_types::{ServicePorts, TunnelBinding};

/// Everything routes are computed from. Object identities (kind, namespace, name) are unique,
/// as in a cluster; the order of each list does not matter.
#[derive(Clone, Debug, Default)]
pub struct RouteWorld {
    /// The Tunnels and ClusterTunnels that exist (`admission::facts::tunnel_facts` builds one
    /// from a spec): identity, domain, `allowedRoutes`, whether `originCaPool` is set.
    pub tunnels: Vec<TunnelFacts>,
    /// Labels of namespaces, for `allowedRoutes.namespaces.from: Selector`.
    pub namespace_labels: BTreeMap<String, BTreeMap<String, String>>,
    /// Every TunnelBinding; `metadata.namespace` must be set.
    pub bindings: Vec<Arc<TunnelBinding>>,
    /// Services: those carrying an expose label are route sources, and any of them may be the
    /// Service a binding subject names. A Service a subject names but missing here is a valid
    /// state (the route answers 404).
    pub services: Vec<Arc<ServicePorts>>,
    /// Every Ingress; those of an IngressClass of cftunnel's are route sources.
    pub ingresses: Vec<Arc<Ingress>>,
    /// Every IngressClass (to find an Ingress's class, its controller and its tunnel).
    pub ingress_classes: Vec<Arc<IngressClass>>,
    /// Gateway API objects (empty while its CRDs are not installed).
    pub gateway_classes: Vec<Arc<GatewayClass>>,
    pub gateways: Vec<Arc<Gateway>>,
    pub http_routes: Vec<Arc<HTTPRoute>>,
    pub grpc_routes: Vec<Arc<GRPCRoute>>,
    pub reference_grants: Vec<Arc<ReferenceGrant>>,
}

/// The kind of object that declares routes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SourceKind {
    TunnelBinding,
    /// A Service labelled `cfargotunnel.com/expose-tunnel` or `…/expose-cluster-tunnel`.
    Service,
    /// An Ingress of an IngressClass of cftunnel's.
    Ingress,
    /// An HTTPRoute attached to a Gateway of cftunnel's.
    HTTPRoute,
    /// A GRPCRoute attached to a Gateway of cftunnel's.
    GRPCRoute,
}

impl SourceKind {
    pub fn as_str(self) -> &'static str {
        match self {
            SourceKind::TunnelBinding => "TunnelBinding",
            SourceKind::Service => "Service",
            SourceKind::Ingress => "Ingress",
            SourceKind::HTTPRoute => "HTTPRoute",
            SourceKind::GRPCRoute => "GRPCRoute",
        }
    }
}

/// The object a route comes from.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SourceRef {
    pub kind: SourceKind,
    pub namespace: String,
    pub name: String,
    /// `metadata.uid`; empty when the input carries none (`cftunnel render`).
    pub uid: String,
}

impl SourceRef {
    /// The source `metadata` describes (the key of [`super::RouteTable::sources`]).
    pub fn of(kind: SourceKind, metadata: &ObjectMeta) -> SourceRef {
        SourceRef {
            kind,
            namespace: metadata.namespace.clone().unwrap_or_default(),
            name: metadata.name.clone().unwrap_or_default(),
            uid: metadata.uid.clone().unwrap_or_default(),
        }
    }
}

impl fmt::Display for SourceRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}/{}", self.kind.as_str(), self.namespace, self.name)
    }
}

/// Who owns a contested hostname: the oldest claim, as Gateway API decides (docs/design.md §3.2).
/// Field order is the comparison order; a missing timestamp sorts first. DNS gives a full
/// zone's room in the same order (`dns::quota`). Shared: a table keeps one per hostname
/// (`TunnelRoutes::dns_since`), a clone of its source's.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Age(Arc<AgeParts>);

/// The creation time and the source itself, shared with the source's status key and its routes'
/// entries (not a copy of its names).
#[derive(Debug, PartialEq, Eq)]
struct AgeParts {
    created: Option<Time>,
    source: Arc<SourceRef>,
}

impl AgeParts {
    fn key(&self) -> AgeKey<'_> {
        AgeKey {
            created: self.created.as_ref(),
            namespace: &self.source.namespace,
            name: &self.source.name,
            uid: &self.source.uid,
            kind: self.source.kind,
        }
    }
}

impl Ord for AgeParts {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.key().cmp(&other.key())
    }
}

impl PartialOrd for AgeParts {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// An [`Age`] borrowed from an object's metadata, ordered as ages are (an `Age` compares by
/// this key): the model orders objects by it before it reads any of their routes.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct AgeKey<'a> {
    created: Option<&'a Time>,
    namespace: &'a str,
    name: &'a str,
    uid: &'a str,
    kind: SourceKind,
}

impl<'a> AgeKey<'a> {
    /// The key of the object `metadata` describes, a source of `kind`: the one
    /// [`Age::of`] gives its source.
    pub(super) fn of(kind: SourceKind, metadata: &'a ObjectMeta) -> AgeKey<'a> {
        AgeKey {
            created: metadata.creation_timestamp.as_ref(),
            namespace: metadata.namespace.as_deref().unwrap_or_default(),
            name: metadata.name.as_deref().unwrap_or_default(),
            uid: metadata.uid.as_deref().unwrap_or_default(),
            kind,
        }
    }
}

impl Age {
    /// The age of the object `metadata` describes, sharing its `source`.
    pub(super) fn of(source: &Arc<SourceRef>, metadata: &ObjectMeta) -> Age {
        Age(Arc::new(AgeParts {
            created: metadata.creation_timestamp.clone(),
            source: source.clone(),
        }))
    }

    /// The age of `source`, created at `created`.
    pub fn new(created: Option<Time>, source: &SourceRef) -> Age {
        Age(Arc::new(AgeParts {
            created,
            source: Arc::new(source.clone()),
        }))
    }
}
