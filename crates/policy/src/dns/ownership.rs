//! Which records are ours, and for which tunnel (docs/design.md §3.3 "Ownership").
//!
//! A CNAME is ours when it points at a current or previous id of one of the zone's tunnels
//! **and** its comment is that operator's marker for one of them; or, without any cftunnel
//! marker, when a `_managed` TXT in the Go format names one of our ids (not for wildcards: there
//! the CNAME alone proves ownership). Two checks the Go format allows beyond that: the CNAME
//! must still point at one of our ids (one edited to point elsewhere is not ours any more), and
//! the TXT's `DnsId` must be the CNAME's record id — the Go operator always writes it so, and
//! without it `_managed.wildcard.x` (the TXT of `*.x`) would vouch for a stranger's
//! `wildcard.x`. A TXT is ours when its comment is our marker or, without any cftunnel marker,
//! when its payload names one of our ids.
use std::collections::{BTreeMap, BTreeSet, HashMap};

use cftunnel_cloudflare::DnsRecord;

use super::change::ConflictReason;
use super::desired::{TunnelDns, normalize_name, tunnel_target};
use super::marker::{ClusterId, is_cftunnel_marker, ownership_marker};
use super::txt::ManagedTxt;

/// The owner of one record, as far as this zone's tunnels are concerned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Owner {
    /// Index of the tunnel in the zone's input.
    Tunnel(usize),
    Foreign(ConflictReason),
}

/// The zone's tunnels, indexed for ownership questions.
pub struct Ours {
    markers: Vec<String>,
    by_marker: HashMap<String, usize>,
    /// Current ids first, so a tunnel's current id beats another's previous one.
    by_id: BTreeMap<String, usize>,
    targets: BTreeSet<String>,
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
        Self {
            markers,
            by_marker,
            by_id,
            targets,
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

    fn tunnel_of_id(&self, id: &str) -> Option<usize> {
        self.by_id.get(&normalize_id(id)).copied()
    }

    /// Owner of a CNAME; `txts` are the TXT records at its `_managed` name.
    pub fn cname_owner(&self, record: &DnsRecord, txts: &[&DnsRecord], wildcard: bool) -> Owner {
        let points_at_us = self.targets.contains(&normalize_name(&record.content));
        match record.comment.as_deref() {
            Some(comment) if self.by_marker.contains_key(comment) => match points_at_us {
                true => Owner::Tunnel(self.by_marker[comment]),
                false => Owner::Foreign(ConflictReason::PointsElsewhere),
            },
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
                        Owner::Tunnel(index) => Some(index),
                        Owner::Foreign(_) => None,
                    });
                vouched.map_or(
                    Owner::Foreign(ConflictReason::NoOwnershipProof),
                    Owner::Tunnel,
                )
            }
        }
    }

    /// Owner of a `_managed` TXT.
    pub fn txt_owner(&self, record: &DnsRecord) -> Owner {
        match record.comment.as_deref() {
            Some(comment) if self.by_marker.contains_key(comment) => {
                Owner::Tunnel(self.by_marker[comment])
            }
            Some(comment) if is_cftunnel_marker(comment) => {
                Owner::Foreign(ConflictReason::OtherOwner {
                    marker: comment.to_string(),
                })
            }
            _ => match ManagedTxt::parse(&record.content) {
                Some(value) => match self.tunnel_of_id(&value.tunnel_id) {
                    Some(index) => Owner::Tunnel(index),
                    None => Owner::Foreign(ConflictReason::TxtNamesOtherTunnel {
                        tunnel_id: value.tunnel_id,
                        tunnel_name: value.tunnel_name,
                    }),
                },
                None => Owner::Foreign(ConflictReason::TxtNotManaged),
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
