//! The policy-level facts the pure status functions (`cftunnel_policy::plan::statuses`, the
//! Gateway API statuses) read, taken from the tunnel records, the DNS view and the edge view.
use std::collections::{BTreeMap, BTreeSet};

use crate::dns_sync::{DnsView, TunnelRecord};
use crate::edge_health::EdgeView;
use cftunnel_policy::edge_certificates::REASON_EDGE_CERTIFICATE_MISSING;
use cftunnel_policy::routes::gateway::status::DnsNote;
use cftunnel_types::TunnelIdentity;

/// The ids of the live tunnels that have one (an Ingress's or a Gateway's address).
pub(super) fn tunnel_ids(records: &[TunnelRecord]) -> BTreeMap<TunnelIdentity, String> {
    records
        .iter()
        .filter(|r| !r.deleting)
        .filter_map(|r| {
            let id = r.status.tunnel_id.clone().filter(|id| !id.is_empty())?;
            Some((r.identity.clone(), id))
        })
        .collect()
}

/// Every id, current or previous, of every tunnel cftunnel knows (deleting ones too).
pub(super) fn all_tunnel_ids(records: &[TunnelRecord]) -> BTreeSet<String> {
    records
        .iter()
        .filter_map(|r| r.status.tunnel_id.clone())
        .chain(
            records
                .iter()
                .flat_map(|r| r.status.previous_tunnel_ids.iter().flatten().cloned()),
        )
        .collect()
}

/// What the DNS sync and the edge health task found about `tunnel`'s hostnames, as the pure
/// functions read them: the DNS problems, then each hostname no active edge certificate covers
/// (`EdgeCertificateMissing`; its record is published all the same).
pub(super) fn notes(dns: &DnsView, edge: &EdgeView, tunnel: &TunnelIdentity) -> Vec<DnsNote> {
    let certificates = edge.certificates.get(tunnel).into_iter().flatten();
    dns.problems(tunnel)
        .iter()
        .map(|p| DnsNote {
            hostname: p.hostname.clone(),
            reason: p.reason.to_string(),
            message: p.message.clone(),
        })
        .chain(certificates.map(|f| DnsNote {
            hostname: Some(f.hostname.clone()),
            reason: REASON_EDGE_CERTIFICATE_MISSING.to_string(),
            message: f.message.clone(),
        }))
        .collect()
}
