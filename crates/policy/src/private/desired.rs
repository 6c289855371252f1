//! The private routes a set of NetworkRoutes asks for: IP routes keyed by virtual network and
//! canonical CIDR, hostname routes keyed by normalised hostname, each with its tunnel, owner
//! and comment.
//!
//! The caller resolves what needs the cluster or Cloudflare: each NetworkRoute's tunnel id,
//! its virtual network's id, and the cluster IPs of the Services it names. Two NetworkRoutes
//! asking for the same route, or for overlapping ranges in one virtual network, are settled by
//! age: the older (creation time, then namespace and name; an object not yet created is the
//! youngest) keeps it, the other gets a [`Conflict`] naming it. Admission refuses such
//! overlaps, but a reconciler does not rely on admission alone.
//!
//! A NetworkRoute whose tunnel is not resolved yet, or whose virtual network is named but not
//! resolved, is *held*: its routes are neither made nor changed nor deleted until it is.
use std::collections::{BTreeMap, BTreeSet};

use cftunnel_types::NetworkRouteSpec;
use jiff::Timestamp;

use super::conflict::{Conflict, Entry, EntryKind, HeldBy};
use super::marker::{Owner, OwnerDigest, OwnerKind, ownership_comment};
use super::normalize::{Cidr, service_route, spec_cidr, spec_hostname};
use crate::dns::ClusterId;

/// One NetworkRoute with what it refers to, resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct NetworkRouteSource {
    /// What owns the routes: a NetworkRoute, or a Gateway for its TCPRoutes and UDPRoutes.
    pub owner_kind: OwnerKind,
    pub namespace: String,
    pub name: String,
    pub created: Option<Timestamp>,
    pub spec: NetworkRouteSpec,
    /// The tunnel's id at Cloudflare; `None` while it is not known.
    pub tunnel_id: Option<String>,
    /// The id of the VirtualNetwork `spec.virtualNetworkRef` names; `None` for the account's
    /// default network (no reference) or while the named one is not known.
    pub virtual_network_id: Option<String>,
    /// The cluster IPs (`spec.clusterIPs`) of each Service of `spec.services` that exists.
    pub service_ips: BTreeMap<String, Vec<String>>,
}

impl NetworkRouteSource {
    pub fn owner(&self) -> Owner {
        Owner::new(self.owner_kind, &self.namespace, &self.name)
    }

    /// Older first: creation time (not yet created: youngest), then namespace and name.
    fn age(&self) -> (bool, Option<Timestamp>, &str, &str) {
        (
            self.created.is_none(),
            self.created,
            &self.namespace,
            &self.name,
        )
    }

    /// The virtual network of the IP routes: `Some(None)` for the default one, `None` while
    /// the named one is not resolved.
    fn network(&self) -> Option<Option<String>> {
        match (&self.spec.virtual_network_ref, &self.virtual_network_id) {
            (Some(_), None) => None,
            (_, id) => Some(id.clone()),
        }
    }
}

/// Where an IP route is: its virtual network (`None`: the account's default) and its range.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct IpKey {
    pub virtual_network_id: Option<String>,
    pub cidr: Cidr,
}

/// A route as cftunnel wants it at Cloudflare.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DesiredRoute {
    pub owner: Owner,
    pub entry: Entry,
    /// `None` while the owner's tunnel is not resolved: the route is held.
    pub tunnel_id: Option<String>,
    /// The whole comment, marker first.
    pub comment: String,
}

/// An entry that asks for no route: not a valid CIDR or hostname, or a Service without an
/// address (`entry.route` is then empty).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub owner: Owner,
    pub entry: Entry,
    pub reason: String,
}

/// Every private route the NetworkRoutes ask for, and why some entries get none.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DesiredRoutes {
    pub ip: BTreeMap<IpKey, DesiredRoute>,
    /// By normalised hostname: hostnames are claimed account-wide.
    pub hostnames: BTreeMap<String, DesiredRoute>,
    /// The owners known to this installation: only their routes are ever deleted.
    pub owners: BTreeSet<OwnerDigest>,
    /// Owners whose IP routes are held.
    pub held_ip: BTreeSet<OwnerDigest>,
    /// Owners whose hostname routes are held.
    pub held_hostnames: BTreeSet<OwnerDigest>,
    pub conflicts: Vec<Conflict>,
    pub refusals: Vec<Refusal>,
}

impl DesiredRoutes {
    /// Adds owners that are gone or going (a NetworkRoute being deleted): they ask for
    /// nothing, so every route of theirs is deleted.
    pub fn with_departed<'a>(mut self, owners: impl IntoIterator<Item = &'a Owner>) -> Self {
        self.owners.extend(owners.into_iter().map(Owner::digest));
        self
    }

    fn claim_ip(&mut self, key: IpKey, route: DesiredRoute) {
        let held = self.ip.get(&key).or_else(|| {
            self.ip
                .iter()
                .find(|(k, r)| {
                    k.virtual_network_id == key.virtual_network_id
                        && r.owner != route.owner
                        && k.cidr.overlaps(&key.cidr)
                })
                .map(|(_, r)| r)
        });
        match held {
            None => {
                self.ip.insert(key, route);
            }
            Some(held) if held.owner == route.owner => {}
            Some(held) => {
                let held_by = HeldBy::Older {
                    owner: held.owner.clone(),
                    route: held.entry.route.clone(),
                };
                self.conflicts.push(Conflict {
                    owner: route.owner,
                    entry: route.entry,
                    held_by,
                });
            }
        }
    }

    fn claim_hostname(&mut self, hostname: String, route: DesiredRoute) {
        match self.hostnames.get(&hostname) {
            None => {
                self.hostnames.insert(hostname, route);
            }
            Some(held) if held.owner == route.owner => {}
            Some(held) => {
                let held_by = HeldBy::Older {
                    owner: held.owner.clone(),
                    route: held.entry.route.clone(),
                };
                self.conflicts.push(Conflict {
                    owner: route.owner,
                    entry: route.entry,
                    held_by,
                });
            }
        }
    }

    fn refuse(&mut self, owner: &Owner, entry: Entry, reason: String) {
        self.refusals.push(Refusal {
            owner: owner.clone(),
            entry,
            reason,
        });
    }
}

/// The routes `sources` ask for, with `cluster`'s marker in their comments.
pub fn desired_routes(cluster: &ClusterId, sources: &[NetworkRouteSource]) -> DesiredRoutes {
    let mut order: Vec<&NetworkRouteSource> = sources.iter().collect();
    order.sort_by(|a, b| a.age().cmp(&b.age()));
    let mut out = DesiredRoutes::default();
    for source in order {
        add_source(&mut out, cluster, source);
    }
    out
}

fn add_source(out: &mut DesiredRoutes, cluster: &ClusterId, source: &NetworkRouteSource) {
    let owner = source.owner();
    let digest = owner.digest();
    out.owners.insert(digest.clone());
    let network = source.network();
    if source.tunnel_id.is_none() {
        out.held_ip.insert(digest.clone());
        out.held_hostnames.insert(digest);
    } else if network.is_none() {
        out.held_ip.insert(digest);
    }
    let comment = ownership_comment(cluster, &owner, source.spec.comment.as_deref());
    let route = |entry: Entry| DesiredRoute {
        owner: owner.clone(),
        entry,
        tunnel_id: source.tunnel_id.clone(),
        comment: comment.clone(),
    };
    let mut ranges: Vec<(Entry, Cidr)> = Vec::new();
    for (index, text) in source.spec.cidrs.iter().enumerate() {
        match spec_cidr(index, text) {
            Ok(cidr) => ranges.push((entry(EntryKind::Cidr, cidr.to_string(), None), cidr)),
            Err(reason) => out.refuse(&owner, entry(EntryKind::Cidr, text.clone(), None), reason),
        }
    }
    for service in &source.spec.services {
        let name = &service.name;
        let no_address = entry(EntryKind::Service, String::new(), Some(name.clone()));
        let Some(ips) = source.service_ips.get(name) else {
            out.refuse(&owner, no_address, format!("Service {name} not found"));
            continue;
        };
        let addresses: BTreeSet<Cidr> = ips.iter().filter_map(|ip| service_route(ip)).collect();
        if addresses.is_empty() {
            out.refuse(
                &owner,
                no_address,
                format!("Service {name} has no cluster IP"),
            );
        }
        for cidr in addresses {
            let entry = entry(EntryKind::Service, cidr.to_string(), Some(name.clone()));
            ranges.push((entry, cidr));
        }
    }
    if let Some(network) = network {
        for (entry, cidr) in ranges {
            let key = IpKey {
                virtual_network_id: network.clone(),
                cidr,
            };
            out.claim_ip(key, route(entry));
        }
    }
    for (index, text) in source.spec.hostnames.iter().enumerate() {
        match spec_hostname(index, text) {
            Ok(hostname) => {
                let entry = entry(EntryKind::Hostname, hostname.clone(), None);
                out.claim_hostname(hostname, route(entry));
            }
            Err(reason) => {
                let entry = entry(EntryKind::Hostname, text.clone(), None);
                out.refuse(&owner, entry, reason);
            }
        }
    }
}

fn entry(kind: EntryKind, route: String, service: Option<String>) -> Entry {
    Entry {
        kind,
        route,
        service,
    }
}

#[cfg(test)]
#[path = "desired_tests.rs"]
mod tests;
