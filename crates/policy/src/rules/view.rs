//! The read-only snapshot the rules consult: tunnels, namespace labels, claimed hostnames,
//! AccessPolicies, NetworkRoutes and VirtualNetworks. The webhook fills it from watch caches,
//! `cftunnel validate` from the files it was given.
use std::collections::{BTreeMap, HashMap};

use cftunnel_types::{TunnelIdentity, TunnelKind};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// Which namespaces may bind routes to a tunnel.
#[derive(Clone, Debug, PartialEq)]
pub enum RouteNamespacePolicy {
    All,
    Same,
    Selector(LabelSelector),
}

/// What the rules need to know of a tunnel.
#[derive(Clone, Debug, PartialEq)]
pub struct TunnelFacts {
    pub identity: TunnelIdentity,
    pub domain: String,
    pub allowed: RouteNamespacePolicy,
    pub has_origin_ca_pool: bool,
    /// The Cloudflare account as the spec names it: `id:<accountId>` (lower case) or
    /// `name:<accountName>`; empty when neither is set.
    pub account: String,
    /// Other zones this tunnel's account is known to hold: the domains of the other tunnels of
    /// the same account (lower case, sorted), filled by [`super::facts::link_account_zones`].
    pub account_zones: Vec<String>,
}

/// A hostname (and path) already routed by some object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostnameClaim {
    pub fqdn: String,
    pub path: String,
    pub tunnel: TunnelIdentity,
    /// The claiming object, e.g. `TunnelBinding shop/web (subject web)` or `Service shop/api`.
    pub owner: String,
    /// `<Kind> <namespace>/<name>` of the claiming object, to skip an object's own claims.
    pub object: String,
}

#[derive(Clone, Debug, Default)]
pub struct AdmissionView {
    pub tunnels: Vec<TunnelFacts>,
    pub namespace_labels: BTreeMap<String, BTreeMap<String, String>>,
    /// Every IngressClass: which Ingresses are cftunnel's, and their tunnel.
    pub ingress_classes: Vec<std::sync::Arc<k8s_openapi::api::networking::v1::IngressClass>>,
    /// Claims by lowercase fqdn: admission looks up a few hostnames among thousands.
    claims: HashMap<String, Vec<HostnameClaim>>,
    /// Every AccessPolicy: a target named by two is protected by the older only, which
    /// admission warns of.
    pub access_policies: Vec<std::sync::Arc<cftunnel_types::access_policy::AccessPolicy>>,
    /// Every NetworkRoute: the CIDRs and private hostnames they claim, and how many routes
    /// they ask of each account.
    pub network_routes: Vec<std::sync::Arc<cftunnel_types::NetworkRoute>>,
    /// Every VirtualNetwork: the networks NetworkRoutes name, and the names taken per account.
    pub virtual_networks: Vec<std::sync::Arc<cftunnel_types::VirtualNetwork>>,
}

impl AdmissionView {
    pub fn tunnel(&self, kind: TunnelKind, namespace: &str, name: &str) -> Option<&TunnelFacts> {
        find_tunnel(&self.tunnels, kind, namespace, name)
    }

    pub fn new(
        tunnels: Vec<TunnelFacts>,
        namespace_labels: BTreeMap<String, BTreeMap<String, String>>,
        claims: impl IntoIterator<Item = HostnameClaim>,
    ) -> Self {
        let mut view = AdmissionView {
            tunnels,
            namespace_labels,
            ingress_classes: Vec::new(),
            claims: HashMap::new(),
            access_policies: Vec::new(),
            network_routes: Vec::new(),
            virtual_networks: Vec::new(),
        };
        view.add_claims(claims);
        view
    }

    pub(crate) fn add_claims(&mut self, claims: impl IntoIterator<Item = HostnameClaim>) {
        for claim in claims {
            let entry = self
                .claims
                .entry(claim.fqdn.to_ascii_lowercase())
                // Nearly every hostname has one claim: a first push would make room for four.
                .or_insert_with(|| Vec::with_capacity(1));
            if !entry.contains(&claim) {
                entry.push(claim);
            }
        }
    }

    /// Claims on `fqdn` by objects other than `object`, in the order they were added.
    pub(crate) fn claims_on<'a>(
        &'a self,
        fqdn: &str,
        object: &'a str,
    ) -> impl Iterator<Item = &'a HostnameClaim> + 'a {
        // Hostnames are nearly always lowercase already: allocate only when they are not.
        let key: std::borrow::Cow<'_, str> = if fqdn.bytes().any(|b| b.is_ascii_uppercase()) {
            fqdn.to_ascii_lowercase().into()
        } else {
            fqdn.into()
        };
        self.claims
            .get(key.as_ref())
            .into_iter()
            .flatten()
            .filter(move |c| c.object != object)
    }
}

/// The tunnel a route of `namespace` refers to: a Tunnel in that namespace, or a ClusterTunnel.
pub(crate) fn find_tunnel<'a>(
    tunnels: &'a [TunnelFacts],
    kind: TunnelKind,
    namespace: &str,
    name: &str,
) -> Option<&'a TunnelFacts> {
    tunnels.iter().find(|t| {
        t.identity.kind == kind
            && t.identity.name == name
            && (kind == TunnelKind::ClusterTunnel || t.identity.namespace == namespace)
    })
}

/// Does `policy` admit routes from `namespace` into a tunnel living in `tunnel_namespace`?
pub(crate) fn admits(
    view: &AdmissionView,
    policy: &RouteNamespacePolicy,
    tunnel_namespace: &str,
    namespace: &str,
) -> bool {
    admits_namespace(&view.namespace_labels, policy, tunnel_namespace, namespace)
}

/// [`admits`] against a map of namespace labels (a namespace missing from it has no labels).
pub(crate) fn admits_namespace(
    namespace_labels: &BTreeMap<String, BTreeMap<String, String>>,
    policy: &RouteNamespacePolicy,
    tunnel_namespace: &str,
    namespace: &str,
) -> bool {
    match policy {
        RouteNamespacePolicy::All => true,
        RouteNamespacePolicy::Same => tunnel_namespace == namespace,
        RouteNamespacePolicy::Selector(selector) => {
            let empty = BTreeMap::new();
            let labels = namespace_labels.get(namespace).unwrap_or(&empty);
            selector_matches(selector, labels)
        }
    }
}

fn selector_matches(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let by_labels = selector
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    let by_expressions = selector.match_expressions.iter().flatten().all(|e| {
        let values = e.values.as_deref().unwrap_or_default();
        match e.operator.as_str() {
            "In" => labels.get(&e.key).is_some_and(|v| values.contains(v)),
            "NotIn" => labels.get(&e.key).is_none_or(|v| !values.contains(v)),
            "Exists" => labels.contains_key(&e.key),
            "DoesNotExist" => !labels.contains_key(&e.key),
            _ => false,
        }
    });
    by_labels && by_expressions
}
