//! The cost model (docs/design.md §3.12): the fewest Cloudflare calls that converging a state
//! needs, its floor. The convergence benchmark divides the calls a run made by it, and the time
//! a run took by the floor's time at cftunnel's pace.
//!
//! From nothing at Cloudflare, converging needs:
//! - one create per tunnel cftunnel creates (`newTunnel`);
//! - one configuration push per remotely-managed tunnel (`configSource: Cloudflare`): its first
//!   push carries every route, with no read before it;
//! - per zone, its record writes in batches of the zone's batch limit: a CNAME per hostname, and
//!   with the `_managed` TXT records a TXT and the patch that sets its `DnsId` (the CNAME's id,
//!   which exists only once the CNAME does, so it is a write of its own);
//! - per account the zone list, and per zone one read of its candidate records: a page of each
//!   type it reads (CNAMEs, `_managed` TXTs) per page size of what it holds at the start. The
//!   records cftunnel writes afterwards are known from the answers, never read again.

/// Cloudflare's limits the floor is counted with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Records per batch request (200 on the Free plan, 3,500 on paid plans).
    pub batch: u64,
    /// Records per list page (1,000 at most for DNS records).
    pub page: u64,
}

impl Default for Limits {
    /// The Free plan's batch limit and the largest DNS page.
    fn default() -> Limits {
        Limits {
            batch: 200,
            page: 1_000,
        }
    }
}

/// The work of one zone: hostnames whose records are to be written there.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ZoneWork {
    pub hostnames: u64,
    /// Whether each hostname gets its `_managed` TXT (`--no-dns-txt-records` off).
    pub txt_records: bool,
    /// Candidate records (CNAMEs, `_managed` TXTs) the zone holds when converging starts: what
    /// its one read lists.
    pub held: u64,
}

impl ZoneWork {
    /// Record writes: creates and the TXTs' `DnsId` patches.
    pub fn writes(&self) -> u64 {
        match self.txt_records {
            true => 3 * self.hostnames,
            false => self.hostnames,
        }
    }
}

/// What converging a state from nothing at Cloudflare is made of.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Work {
    pub accounts: u64,
    pub tunnels_created: u64,
    pub tunnels_pushed: u64,
    pub zones: Vec<ZoneWork>,
}

/// The floor, by kind of call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Floor {
    pub creates: u64,
    pub pushes: u64,
    pub batches: u64,
    pub reads: u64,
}

impl Floor {
    pub fn total(&self) -> u64 {
        self.creates + self.pushes + self.batches + self.reads
    }
}

/// The fewest calls `work` needs within `limits`.
pub fn floor(work: &Work, limits: Limits) -> Floor {
    let batch = limits.batch.max(1);
    let page = limits.page.max(1);
    let batches = work.zones.iter().map(|z| z.writes().div_ceil(batch)).sum();
    let zone_reads: u64 = work
        .zones
        .iter()
        .map(|z| z.held.div_ceil(page).max(2))
        .sum();
    Floor {
        creates: work.tunnels_created,
        pushes: work.tunnels_pushed,
        batches,
        reads: work.accounts + zone_reads,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one_zone(tunnels: u64, hostnames: u64, remote: bool) -> Work {
        Work {
            accounts: 1,
            tunnels_created: tunnels,
            tunnels_pushed: if remote { tunnels } else { 0 },
            zones: vec![ZoneWork {
                hostnames,
                txt_records: true,
                held: 0,
            }],
        }
    }

    #[test]
    fn three_hundred_remote_tunnels_of_five_routes() {
        let floor = floor(&one_zone(300, 1_500, true), Limits::default());
        // 4,500 writes (1,500 CNAMEs, TXTs and DnsId patches) in batches of 200.
        assert_eq!(
            floor,
            Floor {
                creates: 300,
                pushes: 300,
                batches: 23,
                reads: 1 + 2
            }
        );
        assert_eq!(floor.total(), 626);
    }

    #[test]
    fn a_thousand_local_tunnels_of_ten_routes() {
        let floor = floor(&one_zone(1_000, 10_000, false), Limits::default());
        assert_eq!(floor.batches, 150);
        assert_eq!(floor.reads, 1 + 2);
        assert_eq!(floor.total(), 1_153);
    }

    #[test]
    fn without_txt_records_a_hostname_is_one_write_and_paid_plans_batch_more() {
        // A zone holding records already (a restart that routes 10,000 new hostnames there).
        let zone = ZoneWork {
            hostnames: 10_000,
            txt_records: false,
            held: 20_000,
        };
        let work = Work {
            accounts: 1,
            tunnels_created: 0,
            tunnels_pushed: 0,
            zones: vec![zone],
        };
        let paid = Limits {
            batch: 3_500,
            page: 1_000,
        };
        assert_eq!(floor(&work, paid).batches, 3);
        assert_eq!(
            floor(&work, paid).reads,
            1 + 20,
            "a zone holding 20,000 is read once"
        );
        assert_eq!(floor(&work, Limits::default()).batches, 50);
    }
}
