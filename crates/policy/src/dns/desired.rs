//! What the DNS sync is asked for: per zone, every tunnel's routed hostnames, and the options.
use std::collections::{BTreeMap, BTreeSet};

use cftunnel_cloudflare::MAX_DNS_PER_PAGE;
use cftunnel_types::TunnelIdentity;

use super::batching::{BatchMemory, BatchMode};
use super::marker::ClusterId;
use super::names::normalize_name;
use super::quota_memory::QuotaMemory;
use super::txt::managed_txt_name;
use crate::routes::Age;

/// Longest hostname: `_managed.` plus it must still fit in a 255-character record name.
pub const MAX_HOSTNAME_CHARS: usize = 244;

/// One tunnel's wishes in one zone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TunnelDns {
    pub identity: TunnelIdentity,
    /// The tunnel's current Cloudflare id; CNAMEs point at `<tunnel_id>.cfargotunnel.com`.
    pub tunnel_id: String,
    /// Ids this object used before a recreate (`status.previousTunnelIds`): records pointing at
    /// them are still ours and get re-pointed.
    pub previous_tunnel_ids: Vec<String>,
    /// The tunnel's name on Cloudflare (written into the TXT as `TunnelName`).
    pub tunnel_name: String,
    /// Every hostname routed to this tunnel in this zone. Complete: records of this tunnel at
    /// other names are deleted. A tunnel being deleted is passed with an empty set until its
    /// report shows no record left.
    pub hostnames: BTreeSet<String>,
    /// Write the `_managed.` TXT (Go-operator compatibility); off deletes ours.
    pub txt_records: bool,
    /// The tunnel is being deleted by cftunnel, which created it: every CNAME pointing at its
    /// ids (and the `_managed` TXT naming it) would dangle, so each is taken as its own and
    /// removed, whoever wrote it.
    pub sweep: bool,
}

/// Every tunnel with routes (or records to remove) in one zone. When several tunnels want the
/// same hostname, the one whose record it already is keeps it, otherwise the first in this list.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ZoneDns {
    /// The zone's name: hostnames outside it are refused, never written.
    pub zone_name: String,
    pub tunnels: Vec<TunnelDns>,
    /// Hostnames (normalised) routed by this cluster's tunnels of the same zone that are synced
    /// apart (another API credential): a record of ours there that no tunnel here wants is left
    /// for them to take over, never deleted, so a hostname moved between tunnels with different
    /// credentials keeps a record throughout.
    pub routed_elsewhere: BTreeSet<String>,
    /// Per routed hostname (normalised), the age of the oldest route serving it: a zone at its
    /// record quota gives its room to the oldest first (`quota.rs`).
    pub since: BTreeMap<String, Age>,
    /// Routed hostnames (normalised) that keep the records they have but get no new one: an
    /// AccessPolicy protects them and their application does not exist yet, so the world
    /// learns of them only once they are served behind Access.
    pub held: BTreeSet<String>,
}

/// Operator-wide settings of the sync.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DnsOptions {
    /// `--overwrite-unmanaged-dns`: replace or delete records that are not ours when they stand
    /// in the way of a routed hostname.
    pub overwrite_unmanaged: bool,
    /// Goes into the ownership marker and the TXT's `Owner`.
    pub cluster_id: Option<ClusterId>,
    /// Page size of the candidate reads (executor only), 1..=1000.
    pub page_size: u32,
    /// Batch calls or single-record calls (executor only).
    pub batch: BatchMode,
    /// Per-zone batch limits and fallbacks, kept across syncs (executor only).
    pub batch_memory: BatchMemory,
    /// Per-zone record quota facts, kept across syncs (executor only).
    pub quota_memory: QuotaMemory,
}

impl Default for DnsOptions {
    fn default() -> Self {
        Self {
            overwrite_unmanaged: false,
            cluster_id: None,
            page_size: MAX_DNS_PER_PAGE,
            batch: BatchMode::default(),
            batch_memory: BatchMemory::default(),
            quota_memory: QuotaMemory::default(),
        }
    }
}

/// Why a hostname cannot be given a record in this zone; `None` if it can.
pub(crate) fn hostname_problem(hostname: &str, zone_name: &str) -> Option<String> {
    let zone = normalize_name(zone_name);
    if hostname.is_empty() {
        return Some("the hostname is empty".into());
    }
    if hostname.len() > MAX_HOSTNAME_CHARS {
        return Some(format!(
            "the hostname has {} characters; at most {MAX_HOSTNAME_CHARS} leave room for {}",
            hostname.len(),
            managed_txt_name("")
        ));
    }
    if hostname != zone && !hostname.ends_with(&format!(".{zone}")) {
        return Some(format!("the hostname is outside the zone {zone}"));
    }
    let bad_label = hostname.split('.').enumerate().any(|(i, label)| {
        let wildcard = i == 0 && label == "*";
        !wildcard
            && (label.is_empty()
                || label.len() > 63
                || !label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'))
    });
    bad_label.then(|| "the hostname is not a valid DNS name".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostnames_are_checked_against_the_zone() {
        let zone = "example.com";
        assert_eq!(hostname_problem("app.example.com", zone), None);
        assert_eq!(hostname_problem("*.apps.example.com", zone), None);
        assert_eq!(hostname_problem("example.com", zone), None);
        assert_eq!(
            hostname_problem("app.example.org", zone).as_deref(),
            Some("the hostname is outside the zone example.com")
        );
        assert_eq!(
            hostname_problem("badexample.com", zone).as_deref(),
            Some("the hostname is outside the zone example.com")
        );
        assert_eq!(
            hostname_problem("a..example.com", zone).as_deref(),
            Some("the hostname is not a valid DNS name")
        );
        assert_eq!(
            hostname_problem("a.*.example.com", zone).as_deref(),
            Some("the hostname is not a valid DNS name")
        );
        let long = format!("{}.example.com", vec!["a".repeat(60); 4].join("."));
        assert!(
            hostname_problem(&long, zone)
                .unwrap()
                .contains("at most 244 leave room for _managed.")
        );
    }
}
