//! From the stores to what the planner reads: each NetworkRoute with its tunnel, virtual
//! network and Services resolved, grouped by the account (and API Secret) its tunnel is in,
//! and the verdict on what could not be resolved.
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;

use crate::caches::ProcessCaches;
use crate::term::adapters::TunnelKindAdapter;
use cftunnel_policy::private::{
    NetworkRouteSource, Owner, OwnerDigest, OwnerKind, gateway_network_sources,
};
use cftunnel_policy::rules::facts::tunnel_admits;
use cftunnel_types::network::{NetworkRoute, VirtualNetwork};
use cftunnel_types::{CloudflareDetails, ClusterTunnel, Tunnel, TunnelKind};

/// Where an account's calls go: the account and the API Secret that pays for them.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct AccountKey {
    pub account: String,
    /// The Secret's namespace and name, and the keys read in it.
    pub secret: (String, String, String, String, Option<String>),
}

/// One account's NetworkRoutes.
#[derive(Clone, Debug)]
pub(crate) struct Group {
    pub details: CloudflareDetails,
    pub secret_namespace: String,
    pub sources: Vec<NetworkRouteSource>,
    /// Owners whose routes go: NetworkRoutes being deleted, or whose tunnel left the account.
    pub departed: Vec<Owner>,
}

/// Where each owner's routes were last placed, and how to reach each account: for the term, so
/// the routes of an owner whose tunnel (or Gateway) is gone are deleted where they are.
#[derive(Debug, Default)]
pub(crate) struct Placed {
    pub owners: HashMap<OwnerDigest, (AccountKey, Owner)>,
    pub accounts: HashMap<AccountKey, (CloudflareDetails, String)>,
}

impl Placed {
    /// Remembers the sources of every group of `resolved`.
    pub(crate) fn remember(&mut self, resolved: &Resolved) {
        for (key, group) in &resolved.groups {
            self.accounts.insert(
                key.clone(),
                (group.details.clone(), group.secret_namespace.clone()),
            );
            for source in &group.sources {
                let owner = source.owner();
                self.owners.insert(owner.digest(), (key.clone(), owner));
            }
        }
    }

    fn at(&self, digest: &OwnerDigest) -> Option<(AccountKey, CloudflareDetails, String)> {
        let (key, _) = self.owners.get(digest)?;
        let (details, namespace) = self.accounts.get(key)?;
        Some((key.clone(), details.clone(), namespace.clone()))
    }
}

/// Why a NetworkRoute is not accepted: the reason and the message.
pub(crate) type Refused = (&'static str, String);

/// The resolved world of one pass.
#[derive(Debug, Default)]
pub(crate) struct Resolved {
    pub groups: BTreeMap<AccountKey, Group>,
    /// NetworkRoutes refused before any call, by (namespace, name).
    pub refused: BTreeMap<(String, String), Refused>,
}

pub(crate) const REASON_TUNNEL_NOT_FOUND: &str = "TunnelNotFound";
pub(crate) const REASON_NOT_ALLOWED: &str = "NotAllowedByTunnel";
pub(crate) const REASON_NETWORK_NOT_FOUND: &str = "VirtualNetworkNotFound";
pub(crate) const REASON_ACCOUNTS_DIFFER: &str = "AccountsDiffer";

/// The tunnel a NetworkRoute names, as the planner and the calls need it.
struct TunnelFound {
    kind: TunnelKind,
    namespace: String,
    name: String,
    spec: cftunnel_types::TunnelSpec,
    tunnel_id: Option<String>,
    account: Option<String>,
    deleting: bool,
}

fn found<K: TunnelKindAdapter>(obj: &K, kind: TunnelKind) -> TunnelFound {
    let status = obj.tunnel_status();
    let text = |s: Option<&String>| s.filter(|s| !s.is_empty()).cloned();
    TunnelFound {
        kind,
        namespace: obj.namespace().unwrap_or_default(),
        name: obj.name_any(),
        spec: obj.tunnel_spec(),
        tunnel_id: text(status.and_then(|s| s.tunnel_id.as_ref())),
        account: text(status.and_then(|s| s.account_id.as_ref()))
            .or_else(|| obj.tunnel_spec().cloudflare.account_id.clone()),
        deleting: obj.meta().deletion_timestamp.is_some(),
    }
}

fn tunnel_of(caches: &ProcessCaches, route: &NetworkRoute, namespace: &str) -> Option<TunnelFound> {
    let name = &route.spec.tunnel_ref.name;
    match route.spec.tunnel_ref.kind.as_deref() {
        Some("ClusterTunnel") => caches
            .cluster_tunnels
            .store()
            .get(&ObjectRef::<ClusterTunnel>::new(name))
            .map(|t| found(t.as_ref(), TunnelKind::ClusterTunnel)),
        _ => caches
            .tunnels
            .store()
            .get(&ObjectRef::<Tunnel>::new(name).within(namespace))
            .map(|t| found(t.as_ref(), TunnelKind::Tunnel)),
    }
}

fn namespace_labels(caches: &ProcessCaches) -> BTreeMap<String, BTreeMap<String, String>> {
    caches
        .namespaces
        .store()
        .state()
        .iter()
        .map(|ns| (ns.name_any(), ns.labels().clone()))
        .collect()
}

/// Resolves every NetworkRoute, and every Gateway with TCP or UDP routes. `remembered` is where
/// each owner's routes were last placed: an owner whose tunnel or Gateway is gone has its
/// routes deleted there.
pub(crate) fn resolve(
    caches: &ProcessCaches,
    routes: &[Arc<NetworkRoute>],
    networks: &[Arc<VirtualNetwork>],
    cluster_resource_namespace: &str,
    remembered: &Placed,
) -> Resolved {
    let labels = namespace_labels(caches);
    let mut out = Resolved::default();
    for route in routes {
        let namespace = route.namespace().unwrap_or_default();
        let name = route.name_any();
        let owner = Owner::new(OwnerKind::NetworkRoute, &namespace, &name);
        let deleting = route.metadata.deletion_timestamp.is_some();
        let tunnel = tunnel_of(caches, route, &namespace);
        let placed = tunnel.as_ref().and_then(|t| {
            let account = t.account.clone()?;
            let secret_namespace = match t.kind {
                TunnelKind::Tunnel => t.namespace.clone(),
                TunnelKind::ClusterTunnel => cluster_resource_namespace.to_string(),
            };
            let d = &t.spec.cloudflare;
            let key = AccountKey {
                account,
                secret: (
                    secret_namespace.clone(),
                    d.secret.clone(),
                    d.api_token_key.clone(),
                    d.api_key_key.clone(),
                    d.email.clone(),
                ),
            };
            Some((key, d.clone(), secret_namespace))
        });
        let refused = match &tunnel {
            None => Some((
                REASON_TUNNEL_NOT_FOUND,
                format!(
                    "{} {:?} does not exist; create it or fix spec.tunnelRef",
                    route.spec.tunnel_ref.kind.as_deref().unwrap_or("Tunnel"),
                    route.spec.tunnel_ref.name
                ),
            )),
            Some(t)
                if !tunnel_admits(t.kind, &t.namespace, &t.name, &t.spec, &namespace, &labels) =>
            {
                Some((
                    REASON_NOT_ALLOWED,
                    format!(
                        "ClusterTunnel {:?} does not admit routes of namespace {namespace:?}; widen its spec.allowedRoutes or use a Tunnel of this namespace",
                        t.name
                    ),
                ))
            }
            _ => None,
        };
        let network = route.spec.virtual_network_ref.as_ref().map(|r| {
            networks
                .iter()
                .find(|n| n.name_any() == r.name)
                .map(|n| n.as_ref())
        });
        let refused = refused.or_else(|| match (&network, &placed) {
            (Some(None), _) => Some((
                REASON_NETWORK_NOT_FOUND,
                format!(
                    "VirtualNetwork {:?} named by spec.virtualNetworkRef does not exist; create it or remove the reference (the account's default network)",
                    route.spec.virtual_network_ref.as_ref().map(|r| r.name.as_str()).unwrap_or_default()
                ),
            )),
            (Some(Some(n)), Some((key, _, _))) if n.spec.cloudflare.account_id != key.account => Some((
                REASON_ACCOUNTS_DIFFER,
                format!(
                    "VirtualNetwork {:?} is in account {} and the tunnel in account {}: a route goes through a tunnel of the network's account",
                    n.name_any(),
                    n.spec.cloudflare.account_id,
                    key.account
                ),
            )),
            _ => None,
        });
        let departing =
            deleting || refused.is_some() || tunnel.as_ref().is_some_and(|t| t.deleting);
        if let Some(why) = refused.clone() {
            out.refused.insert((namespace.clone(), name.clone()), why);
        }
        match (placed, departing) {
            (Some((key, details, secret_namespace)), false) => {
                let service_ips = route
                    .spec
                    .services
                    .iter()
                    .filter_map(|s| {
                        let service = caches
                            .services
                            .store()
                            .get(&ObjectRef::new(&s.name).within(&namespace))?;
                        let ips: Vec<String> = service.cluster_ips().map(str::to_string).collect();
                        Some((s.name.clone(), ips))
                    })
                    .collect();
                let virtual_network_id = network
                    .flatten()
                    .and_then(|n| n.status.as_ref())
                    .and_then(|s| s.id.clone());
                let source = NetworkRouteSource {
                    owner_kind: OwnerKind::NetworkRoute,
                    namespace: namespace.clone(),
                    name: name.clone(),
                    created: route.metadata.creation_timestamp.as_ref().map(|t| t.0),
                    spec: route.spec.clone(),
                    tunnel_id: tunnel.as_ref().and_then(|t| t.tunnel_id.clone()),
                    virtual_network_id,
                    service_ips,
                };
                group_of(&mut out, key, details, secret_namespace)
                    .sources
                    .push(source);
            }
            (placed, _) => {
                // Its routes go: from the account its tunnel is in, else from the one they were
                // last placed in.
                let at = placed.or_else(|| remembered.at(&owner.digest()));
                if let Some((key, details, secret_namespace)) = at {
                    group_of(&mut out, key, details, secret_namespace)
                        .departed
                        .push(owner);
                }
            }
        }
    }
    gateways(
        caches,
        networks,
        cluster_resource_namespace,
        remembered,
        &mut out,
    );
    out
}

/// The private routes of Gateways' TCPRoutes and UDPRoutes (`cftunnel_policy::private::
/// gateway`), each Gateway an owner of its own; a Gateway placed before that asks for nothing
/// now (deleted, or without TCP or UDP routes) has its routes deleted.
fn gateways(
    caches: &ProcessCaches,
    networks: &[Arc<VirtualNetwork>],
    cluster_resource_namespace: &str,
    remembered: &Placed,
    out: &mut Resolved,
) {
    let l4 = caches.gateway_api.l4_routes();
    let placed_before = remembered
        .owners
        .values()
        .any(|(_, owner)| owner.kind == OwnerKind::Gateway);
    let sources = match l4.tcp.is_empty() && l4.udp.is_empty() {
        // The route world is computed only when a Gateway may ask for something.
        true => Vec::new(),
        false => {
            let world = crate::world::RouteCache::new(caches, cluster_resource_namespace).world();
            gateway_network_sources(&world, &l4)
        }
    };
    if sources.is_empty() && !placed_before {
        return;
    }
    let mut present = std::collections::HashSet::new();
    for gateway in sources {
        let id = &gateway.tunnel;
        let tunnel = match id.kind {
            TunnelKind::ClusterTunnel => caches
                .cluster_tunnels
                .store()
                .get(&ObjectRef::<ClusterTunnel>::new(&id.name))
                .map(|o| found(o.as_ref(), TunnelKind::ClusterTunnel)),
            TunnelKind::Tunnel => caches
                .tunnels
                .store()
                .get(&ObjectRef::<Tunnel>::new(&id.name).within(&id.namespace))
                .map(|o| found(o.as_ref(), TunnelKind::Tunnel)),
        };
        let Some(tunnel) = tunnel.filter(|t| !t.deleting) else {
            continue;
        };
        let Some(account) = tunnel.account.clone() else {
            continue;
        };
        let secret_namespace = match tunnel.kind {
            TunnelKind::Tunnel => tunnel.namespace.clone(),
            TunnelKind::ClusterTunnel => cluster_resource_namespace.to_string(),
        };
        let d = &tunnel.spec.cloudflare;
        let key = AccountKey {
            account,
            secret: (
                secret_namespace.clone(),
                d.secret.clone(),
                d.api_token_key.clone(),
                d.api_key_key.clone(),
                d.email.clone(),
            ),
        };
        let mut source = gateway.source;
        source.tunnel_id = tunnel.tunnel_id.clone();
        // A network of another account than the tunnel's is not used: its IP routes are held.
        source.virtual_network_id = source
            .spec
            .virtual_network_ref
            .as_ref()
            .and_then(|r| networks.iter().find(|n| n.name_any() == r.name))
            .filter(|n| n.spec.cloudflare.account_id == key.account)
            .and_then(|n| n.status.as_ref())
            .and_then(|s| s.id.clone());
        present.insert(source.owner().digest());
        group_of(out, key, d.clone(), secret_namespace)
            .sources
            .push(source);
    }
    for (digest, (_, owner)) in &remembered.owners {
        if owner.kind != OwnerKind::Gateway || present.contains(digest) {
            continue;
        }
        if let Some((key, details, secret_namespace)) = remembered.at(digest) {
            group_of(out, key, details, secret_namespace)
                .departed
                .push(owner.clone());
        }
    }
}

fn group_of(
    out: &mut Resolved,
    key: AccountKey,
    details: CloudflareDetails,
    secret_namespace: String,
) -> &mut Group {
    out.groups.entry(key).or_insert_with(|| Group {
        details,
        secret_namespace,
        sources: Vec::new(),
        departed: Vec::new(),
    })
}
