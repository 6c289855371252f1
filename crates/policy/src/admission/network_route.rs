//! The rules of a NetworkRoute (docs/design.md §2.6), each a plain function with its message.
//! They read the canonical forms of `crate::private` (which sits above `rules`, so they live
//! here, beside the other kinds whose rules need more than `rules`):
//!
//! - its entries: canonical CIDRs, private hostnames, Service names, each listed once, at
//!   least one of the three;
//! - its tunnel: `Tunnel` (of its namespace) or `ClusterTunnel`, exactly so written, that
//!   admits its namespace; one not known yet is a warning, as for bindings;
//! - its claims against the other NetworkRoutes of the view: a CIDR another one routes in the
//!   same network, a range overlapping one it routes there, a hostname it routes in the same
//!   account;
//! - a warning when the NetworkRoutes would ask an account for more routes than Cloudflare
//!   holds.
//!
//! Two routes are in the same network when they name the same VirtualNetwork, or both use the
//! default network of an account that may be the same: their tunnels' accounts are equal, or
//! one of them is not known. Hostnames are claimed per account, whatever the network. A
//! NetworkRoute being deleted claims nothing (its routes go before it does), and an UPDATE is
//! not judged against the object it replaces. A Service's cluster IP is not known here: the
//! network reconciler settles what its address overlaps (the older route keeps it).
use std::fmt;

use crate::private::{
    ACCOUNT_ROUTE_LIMIT, Cidr, Relation, normalize_hostname, spec_cidr, spec_hostname,
};
use crate::rules::facts::referenced;
use crate::rules::route::deny_not_admitted;
use crate::rules::syntax::is_service_name;
use crate::rules::view::{AdmissionView, admits};
use crate::rules::{TunnelFacts, Verdict, Violation};
use cftunnel_types::{NetworkRoute, NetworkRouteSpec, TunnelKind};

/// All rules of the NetworkRoute `namespace/name` against the view.
pub fn validate(
    spec: &NetworkRouteSpec,
    namespace: &str,
    name: &str,
    view: &AdmissionView,
) -> Verdict {
    let mut v = Verdict::default();
    let entries = check_entries(spec, &mut v);
    let tunnel = check_tunnel(spec, namespace, view, &mut v);
    check_virtual_network(spec, tunnel, view, &mut v);
    let own = Placed {
        namespace,
        name,
        spec,
        account: tunnel.and_then(account),
    };
    let others = others(namespace, name, view);
    check_claims(&own, &entries, &others, &mut v);
    warn_route_limit(&own, &others, &mut v);
    v
}

/// The valid entries of a NetworkRoute, by their index in the spec.
#[derive(Debug, Default)]
struct Entries {
    cidrs: Vec<(usize, Cidr)>,
    /// Normalised as Cloudflare stores them.
    hostnames: Vec<(usize, String)>,
}

/// Each CIDR canonical, each hostname a private hostname, each Service a Service name, none
/// listed twice; at least one entry.
fn check_entries(spec: &NetworkRouteSpec, v: &mut Verdict) -> Entries {
    let mut entries = Entries::default();
    if spec.cidrs.is_empty() && spec.services.is_empty() && spec.hostnames.is_empty() {
        v.deny(
            "spec",
            "routes nothing; list at least one of spec.cidrs, spec.services and spec.hostnames",
        );
    }
    for (i, text) in spec.cidrs.iter().enumerate() {
        match spec_cidr(i, text) {
            Ok(cidr) => match entries.cidrs.iter().find(|(_, c)| *c == cidr) {
                Some((first, _)) => v.deny(
                    format!("spec.cidrs[{i}]"),
                    format!(
                        "{cidr} is listed twice (also spec.cidrs[{first}]); list each CIDR once"
                    ),
                ),
                None => entries.cidrs.push((i, cidr)),
            },
            Err(message) => v.violations.push(Violation::from_message(&message)),
        }
    }
    for (i, service) in spec.services.iter().enumerate() {
        let name = &service.name;
        if !is_service_name(name) {
            v.deny(
                format!("spec.services[{i}].name"),
                format!("{name:?} is not a valid Service name; use lowercase letters, digits and '-', starting with a letter"),
            );
        } else if let Some(first) = spec.services[..i].iter().position(|s| s.name == *name) {
            v.deny(
                format!("spec.services[{i}].name"),
                format!("Service {name} is listed twice (also spec.services[{first}]); list each Service once"),
            );
        }
    }
    for (i, text) in spec.hostnames.iter().enumerate() {
        match spec_hostname(i, text) {
            Ok(hostname) => match entries.hostnames.iter().find(|(_, h)| *h == hostname) {
                Some((first, _)) => v.deny(
                    format!("spec.hostnames[{i}]"),
                    format!("{text:?} is the hostname {hostname} again (also spec.hostnames[{first}]): Cloudflare routes it once, without a leading `*.` or trailing dot, in any case; list it once"),
                ),
                None => entries.hostnames.push((i, hostname)),
            },
            Err(message) => v.violations.push(Violation::from_message(&message)),
        }
    }
    entries
}

/// `spec.tunnelRef.kind` as the network reconciler reads it: unset or `Tunnel`, or
/// `ClusterTunnel`, in this case only.
pub fn tunnel_kind(kind: Option<&str>) -> Option<TunnelKind> {
    match kind {
        None | Some("Tunnel") => Some(TunnelKind::Tunnel),
        Some("ClusterTunnel") => Some(TunnelKind::ClusterTunnel),
        Some(_) => None,
    }
}

/// The tunnel, when the view knows it: it must admit the namespace. One not known yet is
/// admitted with a warning, as a binding's is.
fn check_tunnel<'v>(
    spec: &NetworkRouteSpec,
    namespace: &str,
    view: &'v AdmissionView,
    v: &mut Verdict,
) -> Option<&'v TunnelFacts> {
    let written = spec.tunnel_ref.kind.as_deref();
    let Some(kind) = tunnel_kind(written) else {
        v.deny(
            "spec.tunnelRef.kind",
            format!("{:?} is not a tunnel kind; use Tunnel (a tunnel of this namespace) or ClusterTunnel, written so", written.unwrap_or_default()),
        );
        return None;
    };
    let name = &spec.tunnel_ref.name;
    match view.tunnel(kind, namespace, name) {
        Some(t) => {
            if !admits(view, &t.allowed, &t.identity.namespace, namespace) {
                deny_not_admitted("spec.tunnelRef", t, namespace, v);
            }
            Some(t)
        }
        None => {
            v.warn(
                "spec.tunnelRef",
                format!("{} is not known yet: whether it admits this namespace, and its account, cannot be checked; the NetworkRoute reports TunnelNotFound until it exists", referenced(kind, namespace, name)),
            );
            None
        }
    }
}

/// The tunnel's account as the view keys it (`id:<accountId>` or `name:<accountName>`).
fn account(tunnel: &TunnelFacts) -> Option<&str> {
    Some(tunnel.account.as_str()).filter(|a| !a.is_empty())
}

/// Warnings on `spec.virtualNetworkRef`: a VirtualNetwork not known yet, or one in another
/// account than the tunnel (the reconciler refuses such a route, `AccountsDiffer`).
fn check_virtual_network(
    spec: &NetworkRouteSpec,
    tunnel: Option<&TunnelFacts>,
    view: &AdmissionView,
    v: &mut Verdict,
) {
    let Some(reference) = &spec.virtual_network_ref else {
        return;
    };
    let name = &reference.name;
    let found = view
        .virtual_networks
        .iter()
        .find(|n| n.metadata.name.as_deref() == Some(name.as_str()));
    let Some(network) = found else {
        v.warn(
            "spec.virtualNetworkRef",
            format!("VirtualNetwork {name} is not known yet; the NetworkRoute reports VirtualNetworkNotFound until it exists"),
        );
        return;
    };
    let theirs = network.spec.cloudflare.account_id.trim();
    if let Some(t) = tunnel
        && let Some(id) = t.account.strip_prefix("id:")
        && !theirs.eq_ignore_ascii_case(id)
    {
        v.warn(
            "spec.virtualNetworkRef",
            format!("VirtualNetwork {name} is in account {theirs} and {} in account {id}: a route goes through a tunnel of its network's account, so the NetworkRoute reports AccountsDiffer; use a tunnel and a network of one account", t.identity),
        );
    }
}

/// A NetworkRoute as its claims are compared: where it is, and its tunnel's account when the
/// view knows it.
struct Placed<'a> {
    namespace: &'a str,
    name: &'a str,
    spec: &'a NetworkRouteSpec,
    account: Option<&'a str>,
}

impl Placed<'_> {
    fn network(&self) -> Network<'_> {
        match &self.spec.virtual_network_ref {
            Some(r) => Network::Named(&r.name),
            None => Network::Default,
        }
    }

    /// Could the two be routed in one account? Unless both accounts are known and differ.
    fn same_account(&self, other: &Placed<'_>) -> bool {
        match (self.account, other.account) {
            (Some(a), Some(b)) => a == b,
            _ => true,
        }
    }

    fn same_network(&self, other: &Placed<'_>) -> bool {
        match (self.network(), other.network()) {
            (Network::Named(a), Network::Named(b)) => a == b,
            (Network::Default, Network::Default) => self.same_account(other),
            _ => false,
        }
    }

    /// The routes it asks for: one per CIDR, Service and hostname (a dual-stack Service asks
    /// for two, so this is a floor).
    fn route_count(&self) -> usize {
        self.spec.cidrs.len() + self.spec.services.len() + self.spec.hostnames.len()
    }
}

impl fmt::Display for Placed<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "NetworkRoute {}/{}", self.namespace, self.name)
    }
}

/// The virtual network of a route's IP routes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Network<'a> {
    Named(&'a str),
    Default,
}

impl fmt::Display for Network<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Network::Named(name) => write!(f, "VirtualNetwork {name}"),
            Network::Default => f.write_str("the account's default network"),
        }
    }
}

/// The other NetworkRoutes of the view that claim routes: not this one, not being deleted.
fn others<'v>(namespace: &str, name: &str, view: &'v AdmissionView) -> Vec<Placed<'v>> {
    view.network_routes
        .iter()
        .map(AsRef::as_ref)
        .filter(|r| r.metadata.deletion_timestamp.is_none())
        .filter_map(|r: &'v NetworkRoute| {
            let namespace_of = r.metadata.namespace.as_deref().unwrap_or_default();
            let name_of = r.metadata.name.as_deref().unwrap_or_default();
            if namespace_of == namespace && name_of == name {
                return None;
            }
            let tunnel = tunnel_kind(r.spec.tunnel_ref.kind.as_deref())
                .and_then(|kind| view.tunnel(kind, namespace_of, &r.spec.tunnel_ref.name));
            Some(Placed {
                namespace: namespace_of,
                name: name_of,
                spec: &r.spec,
                account: tunnel.and_then(account),
            })
        })
        .collect()
}

/// A CIDR another NetworkRoute routes in the same network, or a range overlapping one it
/// routes there; a hostname another NetworkRoute routes in the same account. Each entry is
/// refused once, naming the first holder.
fn check_claims(own: &Placed<'_>, entries: &Entries, others: &[Placed<'_>], v: &mut Verdict) {
    let network = own.network();
    for (i, cidr) in &entries.cidrs {
        let held = others.iter().filter(|o| own.same_network(o)).find_map(|o| {
            o.spec
                .cidrs
                .iter()
                .filter_map(|text| Cidr::parse(text).ok())
                .find(|theirs| cidr.overlaps(theirs))
                .map(|theirs| (o, theirs))
        });
        let Some((holder, theirs)) = held else {
            continue;
        };
        let field = format!("spec.cidrs[{i}]");
        match cidr.relation(&theirs) {
            Relation::Equal => v.deny(
                field,
                format!("{cidr} is already routed by {holder} in {network}; remove it there first"),
            ),
            relation => {
                let (narrower, wider) = if relation == Relation::Within {
                    (cidr, &theirs)
                } else {
                    (&theirs, cidr)
                };
                v.deny(
                    field,
                    format!("{cidr} overlaps {theirs}, routed by {holder} in {network}: Cloudflare routes by longest prefix, so {narrower} would take the traffic of its addresses from the route of {wider}; route ranges that do not overlap, or put one in another VirtualNetwork"),
                );
            }
        }
    }
    for (i, hostname) in &entries.hostnames {
        let holder = others.iter().filter(|o| own.same_account(o)).find(|o| {
            o.spec
                .hostnames
                .iter()
                .any(|theirs| normalize_hostname(theirs) == *hostname)
        });
        if let Some(holder) = holder {
            v.deny(
                format!("spec.hostnames[{i}]"),
                format!("{hostname} is already routed by {holder}: a private hostname is routed once per account, in every network; remove it there first"),
            );
        }
    }
}

/// Warns when the NetworkRoutes would ask for more routes than one account holds. With the
/// tunnel's account known, the NetworkRoutes whose tunnels are known to be in that account
/// are counted; otherwise every NetworkRoute of the view, whatever its account.
fn warn_route_limit(own: &Placed<'_>, others: &[Placed<'_>], v: &mut Verdict) {
    let counted = others
        .iter()
        .filter(|o| own.account.is_none() || o.account == own.account);
    let total = own.route_count() + counted.map(Placed::route_count).sum::<usize>();
    if total <= ACCOUNT_ROUTE_LIMIT {
        return;
    }
    let whose = match own.account {
        Some(account) => {
            let shown = match account.split_once(':') {
                Some(("name", name)) => format!("named {name}"),
                Some((_, id)) => id.to_string(),
                None => account.to_string(),
            };
            format!("the NetworkRoutes through tunnels of account {shown}")
        }
        None => "the NetworkRoutes known here (their accounts are not known, so all are counted)"
            .to_string(),
    };
    v.warn(
        "spec",
        format!("{whose} ask for {total} private routes (one per CIDR, Service and hostname), more than the {ACCOUNT_ROUTE_LIMIT} Cloudflare holds in one account: the routes past the limit are refused and their NetworkRoutes report CloudflareError; route wider CIDRs, fewer entries, or use tunnels of another account"),
    );
}

#[cfg(test)]
#[path = "network_route_tests.rs"]
mod tests;
