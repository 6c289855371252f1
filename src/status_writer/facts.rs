//! The policy-level facts the pure status functions (`cftunnel_policy::plan::statuses`, the
//! Gateway API statuses) read, taken from the tunnel records and the DNS view.
use std::collections::{BTreeMap, BTreeSet};

use crate::dns_sync::{DnsProblem, TunnelRecord};
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

/// The DNS sync's problems as the pure functions read them.
pub(super) fn dns_notes(problems: &[DnsProblem]) -> Vec<DnsNote> {
    problems
        .iter()
        .map(|p| DnsNote {
            hostname: p.hostname.clone(),
            reason: p.reason.to_string(),
            message: p.message.clone(),
        })
        .collect()
}
