//! The pure DNS planner: desired hostnames of a zone's tunnels + candidate records → changes and
//! conflicts. Deterministic: the order of `actual` does not matter.
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use cftunnel_cloudflare::{DnsRecord, DnsRecordType};

use super::change::{
    ConflictReason, DesiredRecord, DnsAction, DnsChange, DnsConflict, DnsIdSource, DnsPlan,
    InvalidHostname, RecordRef, SharedHostname,
};
use super::desired::{DnsOptions, ZoneDns, hostname_problem};
use super::names::normalized;
use super::ownership::{Ours, Owner};
use super::txt::{TXT_PREFIX, managed_txt_name};

/// Plans one zone.
///
/// - A routed hostname gets its CNAME created, or the one of ours fixed (re-pointed from a
///   previous id, marker added to a Go-operator record, proxied again); its TXT likewise.
/// - A record of ours that no tunnel of the zone wants any more is deleted (CNAME first, then
///   its TXT, so a Go-operator CNAME never loses its proof before it is gone).
/// - A record that is not ours and stands in the way is reported as a conflict and left alone,
///   unless `overwrite_unmanaged`: then it is taken over (same type) or deleted (A/AAAA).
/// - A foreign `_managed` TXT blocks a hostname that has no CNAME of ours yet (it is another
///   owner's claim) and is never replaced without `overwrite_unmanaged`.
/// - When `*.x` and `wildcard.x` are both routed, `_managed.wildcard.x` is the exact hostname's;
///   the wildcard then goes without TXT (its CNAME alone proves ownership anyway).
pub fn plan_zone(zone: &ZoneDns, actual: &[DnsRecord], options: &DnsOptions) -> DnsPlan {
    let mut records: Vec<&DnsRecord> = actual.iter().collect();
    // By normalized name, type and id, compared in place: a key per comparison was two
    // strings each, hundreds of thousands of them for a zone of twenty thousand records. The
    // sorted list is the index by name too (a name's records are one run of it), so no map
    // holds a copy of every name.
    records.sort_by(|a, b| {
        normalized_bytes(&a.name)
            .cmp(normalized_bytes(&b.name))
            .then_with(|| uppercase_bytes(&a.record_type).cmp(uppercase_bytes(&b.record_type)))
            .then_with(|| a.id.cmp(&b.id))
    });
    records.dedup_by(|a, b| a.id == b.id);
    let mut planner = Planner {
        zone,
        options,
        ours: Ours::new(&zone.tunnels, options.cluster_id.as_ref()),
        records: &records,
        groups: BTreeMap::new(),
        plan: DnsPlan::default(),
    };
    let wanted = planner.wanted();
    for (hostname, wanters) in &wanted {
        planner.plan_hostname(hostname, wanters, owns_txt(hostname, &wanted));
    }
    planner.plan_orphans(&wanted);
    planner.find_shared(&wanted);
    let Planner {
        mut groups,
        mut plan,
        ..
    } = planner;
    for (hostname, changes) in groups.iter_mut() {
        if zone.held.contains(hostname) {
            changes.retain(|c| !matches!(c.action, DnsAction::Create(_)));
        }
    }
    plan.changes = groups.into_values().flatten().collect();
    plan
}

/// Valid routed hostnames (normalised) → the tunnels wanting them, in input order.
type Wanted<'a> = BTreeMap<Cow<'a, str>, Vec<usize>>;

/// The bytes of [`normalized`]`(name)`, without making the string.
pub(super) fn normalized_bytes(name: &str) -> impl Iterator<Item = u8> + '_ {
    name.trim()
        .trim_end_matches('.')
        .bytes()
        .map(|c| c.to_ascii_lowercase())
}

/// The bytes of `text.to_ascii_uppercase()`, without making the string.
fn uppercase_bytes(text: &str) -> impl Iterator<Item = u8> + '_ {
    text.bytes().map(|c| c.to_ascii_uppercase())
}

/// Whether the routed `hostname` owns its `_managed` TXT name: every one does but a wildcard
/// `*.x` when `wildcard.x` is routed too (both map to `_managed.wildcard.x`; the exact one wins).
fn owns_txt(hostname: &str, wanted: &Wanted<'_>) -> bool {
    match hostname.strip_prefix("*.") {
        Some(rest) => !wanted.contains_key(format!("wildcard.{rest}").as_str()),
        None => true,
    }
}

/// Whether `_managed.<base>` is the TXT name of a routed hostname (`base`, or `*.x` for a base
/// `wildcard.x`).
fn txt_name_wanted(base: &str, wanted: &Wanted<'_>) -> bool {
    wanted.contains_key(base)
        || base
            .strip_prefix("wildcard.")
            .is_some_and(|rest| wanted.contains_key(format!("*.{rest}").as_str()))
}

/// The records of `sorted` (sorted by normalised name) at the normalised `name`.
fn records_named<'r, 'a>(sorted: &'r [&'a DnsRecord], name: &str) -> &'r [&'a DnsRecord] {
    let start = sorted.partition_point(|r| normalized_bytes(&r.name).lt(name.bytes()));
    let rest = &sorted[start..];
    &rest[..rest.partition_point(|r| normalized_bytes(&r.name).eq(name.bytes()))]
}

/// `sorted`'s records (sorted by normalised name), one run per name, with that name.
fn by_name<'r, 'a>(
    sorted: &'r [&'a DnsRecord],
) -> impl Iterator<Item = (Cow<'a, str>, &'r [&'a DnsRecord])> {
    sorted
        .chunk_by(|a, b| normalized_bytes(&a.name).eq(normalized_bytes(&b.name)))
        .map(|run| (normalized(&run[0].name), run))
}

/// What a routed hostname finds in place.
#[derive(Default)]
struct Found<'a> {
    /// CNAMEs of ours, with the tunnel each belongs to.
    cnames: Vec<(&'a DnsRecord, usize)>,
    /// A/AAAA/CNAME records that are not ours.
    blockers: Vec<(&'a DnsRecord, ConflictReason)>,
    /// `_managed` TXTs of ours (empty when another hostname owns the TXT name).
    txts: Vec<&'a DnsRecord>,
    foreign_txts: Vec<(&'a DnsRecord, ConflictReason)>,
}

fn blocks_cname(record: &DnsRecord) -> bool {
    [DnsRecordType::A, DnsRecordType::Aaaa, DnsRecordType::Cname]
        .into_iter()
        .any(|t| record.is_type(t))
}

struct Planner<'a> {
    zone: &'a ZoneDns,
    options: &'a DnsOptions,
    ours: Ours,
    /// The candidate records, sorted by normalised name (see [`records_named`]).
    records: &'a [&'a DnsRecord],
    /// Changes per hostname; a group runs in order and stops at its first failure.
    groups: BTreeMap<String, Vec<DnsChange>>,
    plan: DnsPlan,
}

impl<'a> Planner<'a> {
    /// Valid routed hostnames → the tunnels wanting them, in input order.
    fn wanted(&mut self) -> Wanted<'a> {
        let mut wanted: Wanted<'a> = BTreeMap::new();
        let zone = self.zone;
        for (index, tunnel) in zone.tunnels.iter().enumerate() {
            let hostnames: BTreeSet<Cow<'a, str>> =
                tunnel.hostnames.iter().map(|h| normalized(h)).collect();
            for hostname in hostnames {
                match hostname_problem(&hostname, &self.zone.zone_name) {
                    Some(problem) => self.plan.invalid.push(InvalidHostname {
                        tunnel: tunnel.identity.clone(),
                        hostname: hostname.into_owned(),
                        problem,
                    }),
                    None => wanted.entry(hostname).or_default().push(index),
                }
            }
        }
        wanted
    }

    fn records_at(&self, name: &str) -> &'a [&'a DnsRecord] {
        records_named(self.records, name)
    }

    fn txts_at(&self, name: &str) -> Vec<&'a DnsRecord> {
        self.records_at(name)
            .iter()
            .copied()
            .filter(|r| r.is_type(DnsRecordType::Txt))
            .collect()
    }

    fn push(&mut self, tunnel: usize, hostname: &str, action: DnsAction) {
        let change = DnsChange {
            tunnel: self.zone.tunnels[tunnel].identity.clone(),
            hostname: hostname.to_string(),
            action,
        };
        self.groups
            .entry(hostname.to_string())
            .or_default()
            .push(change);
    }

    fn conflict(
        &mut self,
        tunnel: usize,
        hostname: &str,
        record: RecordRef,
        reason: ConflictReason,
    ) {
        self.plan.conflicts.push(DnsConflict {
            tunnel: self.zone.tunnels[tunnel].identity.clone(),
            hostname: hostname.to_string(),
            record,
            reason,
        });
    }

    /// The records at a routed hostname and at its `_managed` name, sorted by owner. A sibling's
    /// record (this cluster's, for a tunnel synced elsewhere) counts as `heir`'s to take over.
    fn found_at(&self, hostname: &str, owns_txt: bool, heir: usize) -> Found<'a> {
        let txts = self.txts_at(&managed_txt_name(hostname));
        let wildcard = hostname.starts_with("*.");
        let mut found = Found::default();
        for &record in self.records_at(hostname) {
            if record.is_type(DnsRecordType::Cname) {
                match self.ours.cname_owner(record, &txts, wildcard) {
                    Owner::Tunnel(t) | Owner::Adoptable(t) => found.cnames.push((record, t)),
                    Owner::Sibling => found.cnames.push((record, heir)),
                    Owner::Foreign(reason) => found.blockers.push((record, reason)),
                }
            } else if blocks_cname(record) {
                found.blockers.push((record, self.ours.other_owner(record)));
            }
        }
        for record in txts.into_iter().filter(|_| owns_txt) {
            match self.ours.txt_owner(record) {
                Owner::Tunnel(_) | Owner::Adoptable(_) | Owner::Sibling => found.txts.push(record),
                Owner::Foreign(reason) => found.foreign_txts.push((record, reason)),
            }
        }
        found
    }

    fn plan_hostname(&mut self, hostname: &str, wanters: &[usize], owns_txt: bool) {
        let found = self.found_at(hostname, owns_txt, wanters[0]);
        let winner = wanters
            .iter()
            .copied()
            .find(|w| found.cnames.iter().any(|(_, t)| t == w))
            .unwrap_or(wanters[0]);
        let tunnel = &self.zone.tunnels[winner];
        let desired_cname = DesiredRecord::Cname {
            name: hostname.to_string(),
            tunnel_id: tunnel.tunnel_id.trim().to_ascii_lowercase(),
            marker: self.ours.marker(winner).to_string(),
        };
        let kept = found
            .cnames
            .first()
            .map_or_else(|| desired_cname.to_ref(), |(r, _)| RecordRef::of(r));
        let routed_by_winner = ConflictReason::RoutedByOtherTunnel {
            winner: tunnel.identity.clone(),
        };
        for &loser in wanters.iter().filter(|w| **w != winner) {
            self.conflict(loser, hostname, kept.clone(), routed_by_winner.clone());
        }
        if !self.options.overwrite_unmanaged {
            // A foreign TXT is a claim on a hostname we hold no CNAME of yet.
            let claim = found
                .foreign_txts
                .first()
                .filter(|_| found.cnames.is_empty());
            if let Some((record, reason)) = found.blockers.first().or(claim) {
                self.conflict(winner, hostname, RecordRef::of(record), reason.clone());
                return;
            }
        }
        let dns_id = self.plan_cname(hostname, winner, desired_cname, &found);
        if owns_txt {
            self.plan_txt(hostname, winner, dns_id, &found);
        }
    }

    /// Deletes what is in the way, then creates or fixes the CNAME; returns where its id comes from.
    fn plan_cname(
        &mut self,
        hostname: &str,
        winner: usize,
        desired: DesiredRecord,
        found: &Found<'_>,
    ) -> DnsIdSource {
        let (owned, blockers) = (&found.cnames, &found.blockers);
        let take_over = match owned.first() {
            Some(_) => None,
            None => blockers
                .iter()
                .map(|(r, _)| *r)
                .find(|r| r.is_type(DnsRecordType::Cname)),
        };
        for (record, _) in blockers {
            if take_over.is_none_or(|t| t.id != record.id) {
                let current = RecordRef::of(record);
                let action = DnsAction::Delete {
                    current,
                    take_over: true,
                };
                self.push(winner, hostname, action);
            }
        }
        for (record, _) in owned.iter().skip(1) {
            let current = RecordRef::of(record);
            let action = DnsAction::Delete {
                current,
                take_over: false,
            };
            self.push(winner, hostname, action);
        }
        let (current, is_take_over) = match (owned.first(), take_over) {
            (Some((record, _)), _) => (*record, false),
            (None, Some(record)) => (record, true),
            (None, None) => {
                self.push(winner, hostname, DnsAction::Create(desired));
                return DnsIdSource::CreatedCname;
            }
        };
        if is_take_over || !desired.is_met_by(current) {
            let action = DnsAction::Update {
                current: RecordRef::of(current),
                desired,
                take_over: is_take_over,
            };
            self.push(winner, hostname, action);
        }
        DnsIdSource::Record(current.id.clone())
    }

    fn plan_txt(&mut self, hostname: &str, winner: usize, dns_id: DnsIdSource, found: &Found<'_>) {
        let (ours, foreign) = (&found.txts, &found.foreign_txts);
        let tunnel = &self.zone.tunnels[winner];
        let overwrite = self.options.overwrite_unmanaged;
        let delete = |record: &DnsRecord, take_over: bool| DnsAction::Delete {
            current: RecordRef::of(record),
            take_over,
        };
        if !tunnel.txt_records {
            for record in ours {
                self.push(winner, hostname, delete(record, false));
            }
            return;
        }
        if let (false, Some((record, reason))) = (overwrite, foreign.first()) {
            self.conflict(winner, hostname, RecordRef::of(record), reason.clone());
            return;
        }
        let desired = DesiredRecord::Txt {
            name: managed_txt_name(hostname),
            tunnel_name: tunnel.tunnel_name.clone(),
            tunnel_id: tunnel.tunnel_id.trim().to_ascii_lowercase(),
            owner: self
                .options
                .cluster_id
                .as_ref()
                .map(|c| c.as_str().to_string()),
            dns_id,
            marker: self.ours.marker(winner).to_string(),
        };
        let (keep, take_over) = match (ours.first(), foreign.first()) {
            (Some(record), _) => (Some(*record), false),
            (None, Some((record, _))) => (Some(*record), true),
            (None, None) => (None, false),
        };
        match keep {
            Some(record) if take_over || !desired.is_met_by(record) => {
                let action = DnsAction::Update {
                    current: RecordRef::of(record),
                    desired,
                    take_over,
                };
                self.push(winner, hostname, action);
            }
            Some(_) => {}
            None => self.push(winner, hostname, DnsAction::Create(desired)),
        }
        let kept_id = keep.map(|r| r.id.as_str());
        for record in ours.iter().filter(|r| Some(r.id.as_str()) != kept_id) {
            self.push(winner, hostname, delete(record, false));
        }
        for (record, _) in foreign
            .iter()
            .filter(|(r, _)| Some(r.id.as_str()) != kept_id)
        {
            self.push(winner, hostname, delete(record, true));
        }
    }

    /// CNAMEs another cluster wrote for one of these tunnels at names no tunnel here routes
    /// (that cluster shares the tunnel with this one, routing other hostnames).
    fn find_shared(&mut self, wanted: &Wanted<'_>) {
        for (name, records) in by_name(self.records) {
            if wanted.contains_key(name.as_ref())
                || self.zone.routed_elsewhere.contains(name.as_ref())
            {
                continue;
            }
            for record in records.iter().filter(|r| r.is_type(DnsRecordType::Cname)) {
                if let Some((index, cluster)) =
                    self.ours.other_cluster_on(record, &self.zone.tunnels)
                {
                    self.plan.shared.push(SharedHostname {
                        tunnel: self.zone.tunnels[index].identity.clone(),
                        hostname: name.to_string(),
                        cluster,
                    });
                }
            }
        }
    }

    /// Records of ours at names no tunnel routes: CNAMEs first, then TXTs (grouped with the
    /// CNAME they vouched for, so a failed CNAME delete keeps its proof).
    fn plan_orphans(&mut self, wanted: &Wanted<'_>) {
        for (name, records) in by_name(self.records) {
            let name = name.as_ref();
            // Another group of this cluster routes it and takes the record over.
            if wanted.contains_key(name) || self.zone.routed_elsewhere.contains(name) {
                continue;
            }
            if !records.iter().any(|r| r.is_type(DnsRecordType::Cname)) {
                continue;
            }
            let txts = self.txts_at(&managed_txt_name(name));
            let wildcard = name.starts_with("*.");
            for record in records {
                if !record.is_type(DnsRecordType::Cname) {
                    continue;
                }
                if let Owner::Tunnel(t) = self.ours.cname_owner(record, &txts, wildcard) {
                    let current = RecordRef::of(record);
                    let action = DnsAction::Delete {
                        current,
                        take_over: false,
                    };
                    self.push(t, name, action);
                }
            }
        }
        for (name, records) in by_name(self.records) {
            let name = name.as_ref();
            let Some(base) = name.strip_prefix(TXT_PREFIX) else {
                continue;
            };
            let wildcard = base
                .strip_prefix("wildcard.")
                .map(|rest| format!("*.{rest}"));
            let elsewhere = |h: &str| self.zone.routed_elsewhere.contains(h);
            if txt_name_wanted(base, wanted)
                || elsewhere(base)
                || wildcard.as_deref().is_some_and(elsewhere)
            {
                continue;
            }
            let group = [Some(base.to_string()), wildcard]
                .into_iter()
                .flatten()
                .find(|g| self.groups.contains_key(g))
                .unwrap_or_else(|| base.to_string());
            for record in records.iter().filter(|r| r.is_type(DnsRecordType::Txt)) {
                if let Owner::Tunnel(t) = self.ours.txt_owner(record) {
                    let current = RecordRef::of(record);
                    let action = DnsAction::Delete {
                        current,
                        take_over: false,
                    };
                    self.push(t, &group, action);
                }
            }
        }
    }
}
