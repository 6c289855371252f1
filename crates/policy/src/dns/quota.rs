//! A zone at its record quota (docs/design.md §3.3): which hostnames get the zone's room, and
//! what a hostname left without records is told.
//!
//! Every record of a zone counts toward Cloudflare's quota, cftunnel's or not; a hostname costs
//! two (its CNAME and its `_managed` TXT), one with `--no-dns-txt-records`. Choices:
//! - **Oldest route first.** The writes of a sync go out in this order: hostnames whose changes
//!   add no record (deletes make room, updates cost none), in plan order, then those that add
//!   records by the age of the oldest route serving them (creation time, then namespace, name,
//!   uid and kind, as the hostname authority decides; then the hostname). Records that exist are
//!   never removed to make room: a new route waits for room, it never takes an older one's.
//! - **First fit.** A hostname that does not fit the room left does not stop a later one that
//!   does (one needing a single record where two are left over).
//! - **Known room only.** Hostnames are held back only when the zone's records were counted
//!   against a quota figure. A figure reported for the zone's plan but not confirmed by
//!   Cloudflare yet is tried once: the hostnames beyond it go out last, and the first refusal
//!   (81045) confirms it and holds back the rest (a zone whose plan figure is wrong, an older
//!   Free zone, gets its records).
use std::collections::BTreeMap;
use std::fmt;

use cftunnel_types::TunnelIdentity;

use super::change::{DnsAction, DnsChange};
use crate::routes::Age;

/// How the quota figure a sync fits hostnames into is known.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum QuotaBasis {
    /// Reported for the zone's plan (`plan`: its name); Cloudflare has not confirmed it yet.
    Reported { plan: String },
    /// Reported for the zone's plan, and Cloudflare refused records past it.
    Confirmed { plan: String },
    /// Cloudflare refused a record (81045) while the zone held `held` records: the quota is
    /// at most the figure (what was held plus the refused write's records, less one).
    Refused { held: usize },
}

impl QuotaBasis {
    /// Cloudflare's own answer backs the figure: hostnames beyond it are not tried.
    pub fn is_confirmed(&self) -> bool {
        !matches!(self, Self::Reported { .. })
    }
}

/// A zone's quota and its records when a sync plans its writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZoneRoom {
    /// Most records the zone may hold, as far as known.
    pub limit: usize,
    pub basis: QuotaBasis,
    /// Records the zone holds: every record, not only cftunnel's.
    pub held: usize,
}

impl ZoneRoom {
    /// Records that may still be added (before the sync's deletes).
    pub fn free(&self) -> usize {
        self.limit.saturating_sub(self.held)
    }
}

/// Records a hostname's changes add to the zone: creates less deletes (updates add none).
pub fn records_added(group: &[DnsChange]) -> isize {
    group
        .iter()
        .map(|c| match c.action {
            DnsAction::Create(_) => 1,
            DnsAction::Delete { .. } => -1,
            DnsAction::Update { .. } => 0,
        })
        .sum()
}

/// Records a hostname needs that it does not have yet (its creates).
pub fn records_needed(group: &[DnsChange]) -> usize {
    group
        .iter()
        .filter(|c| matches!(c.action, DnsAction::Create(_)))
        .count()
}

/// A sync's writes, whole hostnames each, in the order they go out.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Fitted {
    /// What fits: hostnames that add no record, then those that add records, oldest first.
    pub send: Vec<Vec<DnsChange>>,
    /// Hostnames the room has no place for, oldest first (empty when the room is unknown).
    pub beyond: Vec<Vec<DnsChange>>,
}

/// Orders a zone's changes (grouped by hostname) and splits off the hostnames that do not fit
/// `room` (`None`: the room is unknown, every hostname is sent). `since` holds the age of the
/// oldest route of each routed hostname; one without an age sorts first.
pub fn fit(
    groups: Vec<Vec<DnsChange>>,
    since: &BTreeMap<String, Age>,
    room: Option<&ZoneRoom>,
) -> Fitted {
    let (mut send, mut adding): (Vec<_>, Vec<_>) =
        groups.into_iter().partition(|g| records_added(g) <= 0);
    let freed: usize = send.iter().map(|g| records_added(g).unsigned_abs()).sum();
    adding.sort_by(|a, b| {
        let key = |g: &Vec<DnsChange>| {
            let hostname = g.first().map(|c| c.hostname.as_str()).unwrap_or_default();
            (since.get(hostname), hostname.to_string())
        };
        key(a).cmp(&key(b))
    });
    let Some(room) = room else {
        send.extend(adding);
        return Fitted {
            send,
            beyond: Vec::new(),
        };
    };
    let mut left = room.free().saturating_add(freed);
    let mut beyond = Vec::new();
    for group in adding {
        let cost = records_added(&group).unsigned_abs();
        if cost <= left {
            left -= cost;
            send.push(group);
        } else {
            beyond.push(group);
        }
    }
    Fitted { send, beyond }
}

/// A routed hostname that gets no record because its zone is at its record quota.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OverQuota {
    pub tunnel: TunnelIdentity,
    pub hostname: String,
    pub zone_name: String,
    /// Records the hostname needs: its CNAME, and its `_managed` TXT unless turned off.
    pub records: usize,
    /// Records the zone holds (`None`: not counted).
    pub held: Option<usize>,
    /// The quota figure and how it is known (`None`: only Cloudflare's refusal is known).
    pub quota: Option<(usize, QuotaBasis)>,
}

impl fmt::Display for OverQuota {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "no DNS record for {}: zone {} is at its Cloudflare record quota (",
            self.hostname, self.zone_name
        )?;
        match (&self.quota, self.held) {
            (
                Some((limit, QuotaBasis::Reported { plan } | QuotaBasis::Confirmed { plan })),
                held,
            ) => {
                if let Some(held) = held {
                    write!(f, "it holds {held} records; ")?;
                }
                write!(
                    f,
                    "{limit} records is the quota reported for its plan, {plan}"
                )?;
            }
            (Some((_, QuotaBasis::Refused { .. })) | None, Some(held)) => write!(
                f,
                "it holds {held} records and Cloudflare refuses more, code 81045"
            )?,
            (_, None) => f.write_str("Cloudflare refuses more records, code 81045")?,
        }
        let needs = match self.records {
            1 => "1 record, its CNAME".to_string(),
            2 => "2 records, its CNAME and its _managed TXT".to_string(),
            n => format!("{n} records"),
        };
        write!(
            f,
            ") and the hostname needs {needs}. The zone's room goes to the oldest routes first; \
             this hostname gets its records once there is room, looked at when the zone's \
             routes change and at each drift check. To make room: move the zone to a paid plan \
             (3,500 records), route fewer hostnames through it"
        )?;
        if self.records >= 2 {
            f.write_str(
                ", or run cftunnel with --no-dns-txt-records (one record per hostname instead of two)",
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "quota_tests.rs"]
mod tests;
