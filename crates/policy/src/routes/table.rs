//! What the route model computes: per tunnel, its ingress routes and DNS names; per source
//! object, what became of each route it declares and its `Ready` condition.
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use super::world::{Age, SourceRef};
use crate::routes::{ANY_HOST, Route};
use cftunnel_types::TunnelIdentity;

/// Why a route is (not) served. The string form is the condition reason.
/// Variants are ordered by severity: a source's `Ready` reason is its most severe one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RouteReason {
    /// Served as declared.
    Routed,
    /// Served the way the Go operator served it, although admission refuses the object today
    /// (an unknown or differently-cased `protocol`, a subject `kind` in another case): the
    /// message names each such field with today's refusal and how the route is served.
    LegacyRoute,
    /// Served, but the Service port is UDP, which a public hostname cannot carry.
    UdpPort,
    /// Served as `http_status:404`: the Service has no such port.
    PortNotFound,
    /// Served as `http_status:404`: the Service does not exist (yet).
    ServiceNotFound,
    /// Not served: an older object owns the hostname (and path).
    HostnameConflict,
    /// Not served: a field is invalid (the admission rules' own messages).
    InvalidRoute,
    /// Not served: the tunnel's `allowedRoutes` does not admit the source's namespace.
    NamespaceNotAllowed,
    /// Not served: the referenced Tunnel or ClusterTunnel does not exist.
    TunnelNotFound,
}

impl RouteReason {
    pub fn as_str(self) -> &'static str {
        match self {
            RouteReason::Routed => "Routed",
            RouteReason::LegacyRoute => "LegacyRoute",
            RouteReason::UdpPort => "UdpPort",
            RouteReason::PortNotFound => "PortNotFound",
            RouteReason::ServiceNotFound => "ServiceNotFound",
            RouteReason::HostnameConflict => "HostnameConflict",
            RouteReason::InvalidRoute => "InvalidRoute",
            RouteReason::NamespaceNotAllowed => "NamespaceNotAllowed",
            RouteReason::TunnelNotFound => "TunnelNotFound",
        }
    }

    /// The `Ready` condition status this reason gives: `True` while the route works as declared
    /// (a legacy route or a UDP port is a warning), `False` otherwise.
    pub fn ready_status(self) -> &'static str {
        if self <= RouteReason::UdpPort {
            "True"
        } else {
            "False"
        }
    }

    /// Does a route with this reason get an ingress rule (and DNS)?
    pub fn is_served(self) -> bool {
        self <= RouteReason::ServiceNotFound
    }
}

/// One declared route (hostname + path) and what became of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouteEntry {
    /// Lowercase hostname, exact or wildcard.
    pub hostname: String,
    pub path: Option<String>,
    /// The cloudflared service it goes (or would go) to, e.g. `http://web.shop.svc:80`;
    /// `http_status:404` while its Service or port is missing.
    pub service: String,
    /// Shared with its source's key in [`RouteTable::sources`] and its age.
    pub source: Arc<SourceRef>,
    pub reason: RouteReason,
    /// `<field>: <what is wrong>; <how to fix it>`; empty when `reason` is `Routed`.
    pub message: String,
}

/// A hostname one tunnel serves, as DNS needs it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct DnsName {
    /// Lowercase fqdn (a wildcard stays `*.example.com`).
    pub fqdn: String,
    /// True when every object routing this fqdn disables DNS updates
    /// (`tunnelRef.disableDNSUpdates`, `cfargotunnel.com/disable-dns: "true"`).
    pub dns_updates_disabled: bool,
}

/// The routes of one tunnel identity.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TunnelRoutes {
    /// The ingress rules, sorted by hostname then path (the renderer orders by specificity).
    pub routes: Vec<Route>,
    /// One entry per served fqdn, sorted.
    pub dns: Vec<DnsName>,
    /// Per fqdn of `dns`, the age of the oldest source serving it: a zone at its record quota
    /// gives its room to the oldest routes first.
    pub dns_since: BTreeMap<String, Age>,
    /// Every route declared against this tunnel, served or refused, sorted by hostname, path
    /// and source: the tunnel's `status.routes[]`. Each is the one its source's status holds.
    pub entries: Vec<Arc<RouteEntry>>,
}

/// What one TunnelBinding or labelled Service gets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceStatus {
    /// The tunnel it refers to, existing or not; `None` when the reference itself is invalid.
    pub tunnel: Option<TunnelIdentity>,
    /// Its routes in declaration order (subjects, then hostnames of each), shared with its
    /// tunnel's [`TunnelRoutes::entries`].
    pub routes: Vec<Arc<RouteEntry>>,
    /// Reason of the `Ready` condition: the most severe of its routes and of the source itself.
    pub reason: RouteReason,
    /// Message of the `Ready` condition: every problem and warning, joined by `; `.
    pub message: String,
}

impl SourceStatus {
    /// Why what this source declares is refused, each message once: the messages of its
    /// routes that are not served for a reason of their own (invalid, not admitted, an older
    /// owner, no tunnel), else the source's message when the source as a whole is not served.
    pub fn refusals(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for entry in self.routes.iter().filter(|e| !e.reason.is_served()) {
            if !entry.message.is_empty() && !out.contains(&entry.message.as_str()) {
                out.push(&entry.message);
            }
        }
        if out.is_empty() && !self.reason.is_served() && !self.message.is_empty() {
            out.push(&self.message);
        }
        out
    }

    /// Status of the `Ready` condition, `True` or `False`.
    pub fn ready_status(&self) -> &'static str {
        self.reason.ready_status()
    }

    /// Hostnames served for this source, in declaration order, without repeats
    /// (a binding's `status.hostnames`, comma-joined).
    pub fn hostnames(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for entry in self.routes.iter().filter(|e| e.reason.is_served()) {
            if !out.contains(&entry.hostname.as_str()) {
                out.push(&entry.hostname);
            }
        }
        out
    }
}

/// The whole result: every known tunnel (with or without routes) and every source.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RouteTable {
    /// Shared, so a reconcile holds its tunnel's routes without a copy, and a table shares
    /// the routes of every tunnel that did not change with the one before it
    /// ([`RouteTable::share_unchanged`]).
    pub tunnels: BTreeMap<TunnelIdentity, Arc<TunnelRoutes>>,
    pub sources: BTreeMap<Arc<SourceRef>, SourceStatus>,
}

impl RouteTable {
    /// The part DNS reads: each tunnel's `dns` and `dns_since`, without rules, entries or
    /// sources (a fraction of the table). The DNS task holds its input for a whole paced sync,
    /// minutes at the size of a first sync, while the route reconciler computes newer tables.
    /// A tunnel whose part equals its part in `previous` (the DNS part handed over last) is
    /// that one, shared: between two tables only the tunnels whose names changed are copied,
    /// and an input the DNS task still holds costs nothing beside the next one.
    pub fn dns_only(&self, previous: Option<&RouteTable>) -> RouteTable {
        let tunnels = self
            .tunnels
            .iter()
            .map(|(id, routes)| {
                let same = previous
                    .and_then(|p| p.tunnels.get(id))
                    .filter(|p| p.dns == routes.dns && p.dns_since == routes.dns_since);
                let dns = match same {
                    Some(part) => part.clone(),
                    None => Arc::new(TunnelRoutes {
                        dns: routes.dns.clone(),
                        dns_since: routes.dns_since.clone(),
                        ..TunnelRoutes::default()
                    }),
                };
                (id.clone(), dns)
            })
            .collect();
        RouteTable {
            tunnels,
            sources: BTreeMap::new(),
        }
    }

    /// Takes `previous`'s copy of every tunnel whose routes are the same in both, and the
    /// sources' entries with it: between two computations only the tunnels that changed are
    /// held twice, and a reconcile holding an older table's routes of an unchanged tunnel holds
    /// the current ones.
    pub fn share_unchanged(&mut self, previous: &RouteTable) {
        // This table's entries of the tunnels taken over, by address, and `previous`'s equal
        // ones (a tunnel's entries are its sources' entries, in the same order in both).
        let mut taken: HashMap<*const RouteEntry, Arc<RouteEntry>> = HashMap::new();
        for (id, routes) in &mut self.tunnels {
            if let Some(before) = previous.tunnels.get(id)
                && !Arc::ptr_eq(before, routes)
                && before == routes
            {
                for (now, then) in routes.entries.iter().zip(&before.entries) {
                    taken.insert(Arc::as_ptr(now), then.clone());
                }
                *routes = before.clone();
            }
        }
        for status in self.sources.values_mut() {
            for entry in &mut status.routes {
                if let Some(then) = taken.get(&Arc::as_ptr(entry)) {
                    *entry = then.clone();
                }
            }
        }
    }

    /// The ingress rules of `tunnel` (none when it has no routes or is unknown).
    pub fn routes_of(&self, tunnel: &TunnelIdentity) -> Vec<Route> {
        self.tunnels
            .get(tunnel)
            .map(|t| t.routes.clone())
            .unwrap_or_default()
    }
}

impl RouteTable {
    /// The distinct hostnames `source` gets DNS records for in this table: those it serves that its
    /// tunnel writes into DNS.
    pub fn dns_hostnames_of(&self, source: &SourceRef) -> usize {
        let Some(status) = self.sources.get(source) else {
            return 0;
        };
        let written: BTreeSet<&str> = status
            .tunnel
            .as_ref()
            .and_then(|t| self.tunnels.get(t))
            .map(|t| {
                t.dns
                    .iter()
                    .filter(|d| !d.dns_updates_disabled)
                    .map(|d| d.fqdn.as_str())
                    .collect()
            })
            .unwrap_or_default();
        status
            .hostnames()
            .into_iter()
            .filter(|h| *h != ANY_HOST && written.contains(h))
            .count()
    }
}
