//! The records a group's last sync left, kept for its next sync (docs/design.md §3.12).
//!
//! A sync reads the zone's candidate records (every page of them: at 10,000 hostnames twenty
//! pages), plans and writes, and keeps its copy in step with every answer. Reading the same
//! pages again for the group's next sync would tell it only what its own writes said: while
//! routes keep arriving (a first sync) that next sync follows seconds later, and at rest a
//! single route added to a zone of 10,000 hostnames paid twenty reads (about 6 s at the default
//! pace) for one batch. So a sync without a failed write hands its copy to the next, which
//! starts from it instead of reading, as long as:
//! - the next sync is for a change of the group's input (a drift sync, and a retry after
//!   problems, read the zone: they look for what others did);
//! - the group lost no tunnel (a deletion cleans records apart from the DNS task) and every
//!   tunnel it gained is one this term created (nothing points at a new tunnel id but what
//!   cftunnel writes; an adopted or existing tunnel may have records to find);
//! - the copy was read less than one drift interval ago (ten minutes with drift checks off):
//!   between drift checks a clean group trusts its records as written, and so does the copy.
//!   Each drift sync reads afresh and leaves its own copy, so with drift checks on a route at
//!   rest is mostly served from one.
//!
//! What the copy cannot see stays handled as in a sync that read: a name taken meanwhile by
//! someone else fails its create with "record exists", and the sync reads that name and plans
//! it again (`zone.rs`); a record deleted meanwhile answers 404, which counts as done.
//!
//! The price is memory at rest: each group holds its tunnels' candidate records between syncs
//! (20,000 records in all at 1,000 tunnels × 10 routes, 7–8 MiB of resident memory after a
//! restart; BENCHMARKS.md, "What the copy costs at rest"). A first sync, whose every group
//! wrote, holds them all at its end already.
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use crate::term::options::copy_max_age;
use cftunnel_cloudflare::DnsRecord;
use cftunnel_policy::dns::ZoneDns;

/// A group's candidate records as its last sync's writes left them.
#[derive(Debug)]
pub struct KnownRecords {
    pub records: Vec<DnsRecord>,
    /// The tunnel ids (current and previous) of the input the records were read and kept for.
    pub tunnel_ids: BTreeSet<String>,
    /// When they were read from Cloudflare (a copy handed on keeps its first read's time).
    pub read_at: Instant,
}

/// Every tunnel id (current and previous) of `zone`'s input.
pub(super) fn tunnel_ids(zone: &ZoneDns) -> BTreeSet<String> {
    zone.tunnels
        .iter()
        .flat_map(|t| std::iter::once(&t.tunnel_id).chain(&t.previous_tunnel_ids))
        .cloned()
        .collect()
}

impl KnownRecords {
    /// May a sync of `zone` for a change of its input start from this copy? `created` tells a
    /// tunnel id this term created; `drift` is the drift interval (zero: off).
    pub fn serves(
        &self,
        zone: &ZoneDns,
        created: impl Fn(&str) -> bool,
        drift: Duration,
        now: Instant,
    ) -> bool {
        let max_age = copy_max_age(drift);
        let ids = tunnel_ids(zone);
        now.saturating_duration_since(self.read_at) < max_age
            && self.tunnel_ids.is_subset(&ids)
            && ids
                .iter()
                .all(|id| self.tunnel_ids.contains(id) || created(id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::term::options::WITHOUT_DRIFT;
    use cftunnel_policy::dns::TunnelDns;
    use cftunnel_types::{TunnelIdentity, TunnelKind};

    fn tunnel(name: &str, id: &str, previous: &[&str]) -> TunnelDns {
        TunnelDns {
            identity: TunnelIdentity {
                kind: TunnelKind::Tunnel,
                namespace: "ns".to_string(),
                name: name.to_string(),
            },
            tunnel_id: id.to_string(),
            previous_tunnel_ids: previous.iter().map(|p| p.to_string()).collect(),
            tunnel_name: name.to_string(),
            hostnames: BTreeSet::new(),
            txt_records: true,
            sweep: false,
        }
    }

    fn zone(tunnels: Vec<TunnelDns>) -> ZoneDns {
        ZoneDns {
            zone_name: "example.com".to_string(),
            tunnels,
            routed_elsewhere: BTreeSet::new(),
            since: Default::default(),
            held: BTreeSet::new(),
        }
    }

    fn known(ids: &[&str], read_at: Instant) -> KnownRecords {
        KnownRecords {
            records: Vec::new(),
            tunnel_ids: ids.iter().map(|i| i.to_string()).collect(),
            read_at,
        }
    }

    const DRIFT: Duration = Duration::from_secs(300);

    #[test]
    fn a_copy_serves_the_same_tunnels_and_tunnels_created_since() {
        let now = Instant::now();
        let copy = known(&["a", "a0"], now);
        let same = zone(vec![tunnel("t", "a", &["a0"])]);
        assert!(copy.serves(&same, |_| false, DRIFT, now));
        let grown = zone(vec![tunnel("t", "a", &["a0"]), tunnel("u", "b", &[])]);
        assert!(copy.serves(&grown, |id| id == "b", DRIFT, now));
        assert!(
            !copy.serves(&grown, |_| false, DRIFT, now),
            "a tunnel this term did not create may have records to find"
        );
    }

    #[test]
    fn a_copy_does_not_serve_after_a_tunnel_left_or_once_older_than_the_drift_interval() {
        let now = Instant::now();
        let copy = known(&["a", "b"], now);
        let shrunk = zone(vec![tunnel("t", "a", &[])]);
        assert!(!copy.serves(&shrunk, |_| true, DRIFT, now), "a tunnel left");
        let same = zone(vec![tunnel("t", "a", &[]), tunnel("u", "b", &[])]);
        assert!(!copy.serves(&same, |_| true, DRIFT, now + DRIFT), "too old");
        assert!(copy.serves(&same, |_| true, Duration::ZERO, now + DRIFT));
        assert!(!copy.serves(&same, |_| true, Duration::ZERO, now + WITHOUT_DRIFT));
    }
}
