//! Which records are ours, and for which tunnel (docs/design.md §3.3 "Ownership").
//!
//! cftunnel changes or deletes a record only when it can prove the record is this cluster's, or
//! adopts one for a hostname a local route wants:
//! - **Ours** ([`Owner::Tunnel`]): the comment is this cluster's marker for one of the zone's
//!   tunnels (`cftunnel <identity> cluster=<id>`) and the record points at (or, for a TXT,
//!   names) one of its current or previous ids. Only these are deleted when no route wants
//!   them.
//! - **Adoptable** ([`Owner::Adoptable`]): points at one of our ids but proves no cluster: the
//!   Go operator's records (a CNAME without marker that its `_managed` TXT vouches for) and
//!   those cftunnel wrote before markers named a cluster (`cftunnel <identity>`). Taken over for
//!   a hostname a route here wants (one PATCH adds the marker); otherwise left alone, because
//!   another cluster connected to the same tunnel may be serving it.
//! - **Sibling** ([`Owner::Sibling`]): this cluster's marker for a tunnel that is not in this
//!   zone's input (one synced with another API credential). Taken over for a hostname a route
//!   here wants (the route model gives each hostname one owner in the cluster, so the sibling
//!   no longer routes it), never deleted from here.
//! - **Foreign**: anything else, another cluster's marker included.
//!
//! One exception: a tunnel cftunnel itself deletes ([`TunnelDns::sweep`]) takes every CNAME that
//! points at it, and the TXT naming it, with it: they would dangle.
//!
//! Checks the Go format allows beyond that: the CNAME must still point at one of our ids (one
//! edited to point elsewhere is not ours any more), and the TXT's `DnsId` must be the CNAME's
//! record id (the Go operator always writes it so; without it `_managed.wildcard.x`, the TXT of
//! `*.x`, would vouch for a stranger's `wildcard.x`). Wildcards carry no TXT: there the marker
//! alone proves ownership.
use std::collections::{BTreeMap, BTreeSet, HashMap};

use cftunnel_cloudflare::DnsRecord;

use super::change::ConflictReason;
use super::desired::TunnelDns;
use super::marker::{ClusterId, is_cftunnel_marker, marker_cluster, ownership_marker};
use super::names::{normalize_name, normalized, tunnel_target};
use super::txt::ManagedTxt;

/// The owner of one record, as far as this zone's tunnels are concerned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Owner {
    /// Provably this cluster's, for the tunnel at this index of the zone's input.
    Tunnel(usize),
    /// Points at that tunnel but proves no cluster (Go-written, or cftunnel before cluster
    /// markers): ours only for a hostname a route here wants.
    Adoptable(usize),
    /// This cluster's, for a tunnel synced in another group of the zone.
    Sibling,
    Foreign(ConflictReason),
}

impl Owner {
    /// The tunnel a record may be used for when a route wants its hostname.
    pub fn wanted_by(&self) -> Option<usize> {
        match self {
            Owner::Tunnel(index) | Owner::Adoptable(index) => Some(*index),
            Owner::Sibling | Owner::Foreign(_) => None,
        }
    }

    /// The tunnel whose record this provably is (deleted when nothing wants it).
    pub fn proven(&self) -> Option<usize> {
        match self {
            Owner::Tunnel(index) => Some(*index),
            _ => None,
        }
    }
}

/// The zone's tunnels, indexed for ownership questions.
pub struct Ours {
    markers: Vec<String>,
    by_marker: HashMap<String, usize>,
    /// Markers written before cluster ids (`cftunnel <identity>`), when this cluster has one.
    by_legacy_marker: HashMap<String, usize>,
    /// Current ids first, so a tunnel's current id beats another's previous one.
    by_id: BTreeMap<String, usize>,
    targets: BTreeSet<String>,
    /// Targets of tunnels being swept by their deletion.
    swept: HashMap<String, usize>,
    cluster: Option<String>,
}

impl Ours {
    pub fn new(tunnels: &[TunnelDns], cluster: Option<&ClusterId>) -> Self {
        let markers: Vec<String> = tunnels
            .iter()
            .map(|t| ownership_marker(&t.identity, cluster))
            .collect();
        let mut by_marker = HashMap::new();
        for (i, marker) in markers.iter().enumerate() {
            by_marker.entry(marker.clone()).or_insert(i);
        }
        let mut by_legacy_marker = HashMap::new();
        if cluster.is_some() {
            for (i, t) in tunnels.iter().enumerate() {
                by_legacy_marker
                    .entry(ownership_marker(&t.identity, None))
                    .or_insert(i);
            }
        }
        let mut by_id = BTreeMap::new();
        for (i, t) in tunnels.iter().enumerate() {
            by_id.entry(normalize_id(&t.tunnel_id)).or_insert(i);
        }
        for (i, t) in tunnels.iter().enumerate() {
            for id in &t.previous_tunnel_ids {
                by_id.entry(normalize_id(id)).or_insert(i);
            }
        }
        by_id.remove("");
        let targets = by_id.keys().map(|id| tunnel_target(id)).collect();
        let mut swept = HashMap::new();
        for (i, t) in tunnels.iter().enumerate().filter(|(_, t)| t.sweep) {
            for id in std::iter::once(&t.tunnel_id).chain(&t.previous_tunnel_ids) {
                if !id.trim().is_empty() {
                    swept.entry(tunnel_target(id)).or_insert(i);
                }
            }
        }
        Self {
            markers,
            by_marker,
            by_legacy_marker,
            by_id,
            targets,
            swept,
            cluster: cluster.map(|c| c.as_str().to_string()),
        }
    }

    /// The marker written for tunnel `index`.
    pub fn marker(&self, index: usize) -> &str {
        self.markers.get(index).map_or("", String::as_str)
    }

    /// Every `<id>.cfargotunnel.com` of the zone's tunnels, current and previous.
    pub fn targets(&self) -> &BTreeSet<String> {
        &self.targets
    }

    /// Is `comment` this cluster's marker (of a tunnel not in this input: those are matched
    /// before)?
    fn is_sibling(&self, comment: &str) -> bool {
        self.cluster.is_some() && marker_cluster(comment) == self.cluster.as_deref()
    }

    /// The cluster another installation's record names when it points at the current id of
    /// one of the zone's tunnels: `(tunnel index, cluster)`.
    pub(crate) fn other_cluster_on(
        &self,
        record: &DnsRecord,
        tunnels: &[TunnelDns],
    ) -> Option<(usize, String)> {
        let comment = record.comment.as_deref()?;
        let cluster = marker_cluster(comment)?;
        if Some(cluster) == self.cluster.as_deref() {
            return None;
        }
        let target = normalize_name(&record.content);
        let index = tunnels.iter().position(|t| {
            !t.tunnel_id.trim().is_empty() && tunnel_target(&t.tunnel_id) == target
        })?;
        Some((index, cluster.to_string()))
    }

    fn tunnel_of_id(&self, id: &str) -> Option<usize> {
        self.by_id.get(&normalize_id(id)).copied()
    }

    /// Owner of a CNAME; `txts` are the TXT records at its `_managed` name.
    pub fn cname_owner(&self, record: &DnsRecord, txts: &[&DnsRecord], wildcard: bool) -> Owner {
        let target = normalized(&record.content);
        if let Some(&index) = self.swept.get(target.as_ref()) {
            return Owner::Tunnel(index);
        }
        let points_at_us = self.targets.contains(target.as_ref());
        match record.comment.as_deref() {
            Some(comment) if self.by_marker.contains_key(comment) => match points_at_us {
                true => Owner::Tunnel(self.by_marker[comment]),
                false => Owner::Foreign(ConflictReason::PointsElsewhere),
            },
            Some(comment) if points_at_us && self.by_legacy_marker.contains_key(comment) => {
                Owner::Adoptable(self.by_legacy_marker[comment])
            }
            Some(comment) if self.is_sibling(comment) => Owner::Sibling,
            Some(comment) if is_cftunnel_marker(comment) => {
                Owner::Foreign(ConflictReason::OtherOwner {
                    marker: comment.to_string(),
                })
            }
            _ if !points_at_us => Owner::Foreign(ConflictReason::Unmanaged),
            _ => {
                let vouched = txts
                    .iter()
                    .filter(|_| !wildcard)
                    .filter(|txt| {
                        ManagedTxt::parse(&txt.content)
                            .is_some_and(|v| v.dns_id.trim().eq_ignore_ascii_case(&record.id))
                    })
                    .find_map(|txt| match self.txt_owner(txt) {
                        // Our own TXT proves the CNAME it names; a Go one only lets it be adopted.
                        Owner::Tunnel(index) => Some(Owner::Tunnel(index)),
                        Owner::Adoptable(index) => Some(Owner::Adoptable(index)),
                        Owner::Sibling | Owner::Foreign(_) => None,
                    });
                vouched.unwrap_or(Owner::Foreign(ConflictReason::NoOwnershipProof))
            }
        }
    }

    /// Owner of a `_managed` TXT.
    pub fn txt_owner(&self, record: &DnsRecord) -> Owner {
        let payload = ManagedTxt::parse(&record.content);
        let named = payload
            .as_ref()
            .and_then(|v| self.tunnel_of_id(&v.tunnel_id));
        if let Some(index) = payload
            .as_ref()
            .and_then(|v| self.swept.get(&tunnel_target(&v.tunnel_id)))
        {
            return Owner::Tunnel(*index);
        }
        match record.comment.as_deref() {
            Some(comment) if self.by_marker.contains_key(comment) => {
                Owner::Tunnel(self.by_marker[comment])
            }
            Some(comment) if named.is_some() && self.by_legacy_marker.contains_key(comment) => {
                Owner::Adoptable(self.by_legacy_marker[comment])
            }
            Some(comment) if self.is_sibling(comment) => Owner::Sibling,
            Some(comment) if is_cftunnel_marker(comment) => {
                Owner::Foreign(ConflictReason::OtherOwner {
                    marker: comment.to_string(),
                })
            }
            _ => match (payload, named) {
                (Some(value), Some(index)) => match value.owner.as_deref() {
                    Some(owner) if Some(owner) == self.cluster.as_deref() => Owner::Tunnel(index),
                    Some(owner) => Owner::Foreign(ConflictReason::OtherCluster {
                        cluster: owner.to_string(),
                    }),
                    None => Owner::Adoptable(index),
                },
                (Some(value), None)
                    if value.owner.is_some()
                        && value.owner.as_deref() == self.cluster.as_deref() =>
                {
                    Owner::Sibling
                }
                (Some(value), None) => Owner::Foreign(ConflictReason::TxtNamesOtherTunnel {
                    tunnel_id: value.tunnel_id,
                    tunnel_name: value.tunnel_name,
                }),
                (None, _) => Owner::Foreign(ConflictReason::TxtNotManaged),
            },
        }
    }

    /// Why a record of another type standing where a CNAME should be is not ours.
    pub(crate) fn other_owner(&self, record: &DnsRecord) -> ConflictReason {
        match record.comment.as_deref() {
            Some(comment) if is_cftunnel_marker(comment) => ConflictReason::OtherOwner {
                marker: comment.to_string(),
            },
            _ => ConflictReason::Unmanaged,
        }
    }
}

fn normalize_id(id: &str) -> String {
    id.trim().to_ascii_lowercase()
}
