//! When and with what the DNS records are synced (docs/design.md §3.3): one sync per group of tunnels
//! sharing a zone and an API credential (`dns_credentials`), run when the group's routed hostnames, tunnel ids or
//! previous ids change, retried with backoff while it has problems, and repeated on the slow
//! drift interval. A group whose input did not change makes no Cloudflare call.
//!
//! Choice: after a restart, a group is synced once if it routes any hostname or holds a zone a
//! tunnel left (`status.previousZones`, see `previous_zones`) (its paged candidate reads cost
//! O(pages), never one call per hostname); any other group with no hostname at all
//! waits for the drift interval, so restarting cftunnel with route-less tunnels costs nothing.
//! Records left by a labelled Service deleted while cftunnel was down are removed then.
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cftunnel_cloudflare::Priority;
use tokio::sync::watch;

use crate::dns_sync::TunnelRecord;
use crate::dns_sync::credentials::Resolved;
use crate::dns_sync::group_sync::{GroupOutcome, GroupReading, sync_once};
use crate::dns_sync::groups::{
    Directory, Elsewhere, GroupKey, Listed, Wanted, directory, refresh, wanted, wants_nothing,
};
use crate::dns_sync::known::KnownRecords;
use crate::dns_sync::problem::{
    DnsProblem, REASON_DNS_ERROR, REASON_DNS_OTHER_CLUSTER, REASON_QUOTA_EXCEEDED,
};
use crate::term::Context;
use crate::term::dns_guard::DnsWriters;
use cftunnel_policy::dns::{AccountZone, DnsOptions, SharedHostname, ZoneDns};
use cftunnel_policy::routes::RouteTable;
use cftunnel_types::TunnelIdentity;

/// How long a drift sync is put off while changes of its credential wait at the pacer.
const DRIFT_PUT_OFF: Duration = Duration::from_secs(15);

struct GroupState {
    /// Shared with the views published since (each holds every group's input).
    input: Arc<ZoneDns>,
    clean: bool,
    /// Problems of its last sync, per tunnel.
    problems: BTreeMap<TunnelIdentity, Vec<DnsProblem>>,
    /// Other clusters' hostnames on its tunnels, as its last sync that read the zone found.
    shared: Vec<SharedHostname>,
    failures: u32,
    /// Next retry (after problems) or drift sync.
    due: Option<Instant>,
    /// The records its last sync left for the next (`known.rs`).
    known: Option<KnownRecords>,
    /// Its last sync left `DnsId` patches or creates to the next: due in the next round,
    /// whatever its input (`batched.rs`).
    deferred: bool,
    /// Its last sync left creates to the next: not in step with its input, whatever `clean`.
    unfinished: bool,
}

/// A snapshot of the syncs for status writers: problems per tunnel, and which groups synced
/// cleanly with which input.
#[derive(Clone, Debug, Default)]
pub struct DnsView {
    txt_records: bool,
    directory: Arc<Directory>,
    elsewhere: Arc<Elsewhere>,
    resolved: Arc<Resolved>,
    held: Arc<BTreeSet<String>>,
    groups: HashMap<GroupKey, (Arc<ZoneDns>, bool)>,
    /// Every group's problems and the unplaced hostnames, per tunnel.
    problems: BTreeMap<TunnelIdentity, Vec<DnsProblem>>,
    /// Hostnames other clusters route through each tunnel that this cluster does not.
    shared: BTreeMap<TunnelIdentity, BTreeSet<SharedHostname>>,
}

impl DnsView {
    /// Every tunnel through which other clusters route hostnames this cluster does not.
    pub fn shared(&self) -> &BTreeMap<TunnelIdentity, BTreeSet<SharedHostname>> {
        &self.shared
    }

    /// Every problem of `tunnel`'s DNS, in every zone it is in (its own, one its hostnames are
    /// placed in, one it left), and its hostnames placed in none.
    pub fn problems(&self, tunnel: &TunnelIdentity) -> &[DnsProblem] {
        self.problems
            .get(tunnel)
            .map(Vec::as_slice)
            .unwrap_or_default()
    }

    /// Every tunnel's problems counted by reason (a problem names one hostname, or all of a
    /// group's when Cloudflare failed for the group): what `cftunnel_dns_problems` serves.
    pub fn problem_counts(&self) -> BTreeMap<String, u64> {
        let mut counts = BTreeMap::new();
        for problem in self.problems.values().flatten() {
            *counts.entry(problem.reason.to_string()).or_default() += 1;
        }
        counts
    }

    /// Is `tunnel`'s DNS in step with `table` (each of its groups synced cleanly with the
    /// current input, or it has no DNS at all)?
    pub fn settled(
        &self,
        tunnel: &TunnelIdentity,
        table: &RouteTable,
        records: &[TunnelRecord],
    ) -> bool {
        self.groups_of(tunnel, table, records)
            .iter()
            .all(|(key, zone)| {
                self.groups
                    .get(key)
                    .is_some_and(|(input, clean)| *clean && **input == *zone)
            })
    }

    /// The groups `tunnel` belongs to now, with their current input (none: it has no DNS).
    fn groups_of(
        &self,
        tunnel: &TunnelIdentity,
        table: &RouteTable,
        records: &[TunnelRecord],
    ) -> Vec<(GroupKey, ZoneDns)> {
        wanted(
            table,
            records,
            self.txt_records,
            &self.directory,
            &self.elsewhere,
            &self.resolved,
        )
        .hold(&self.held)
        .groups
        .into_iter()
        .filter(|(_, z)| z.tunnels.iter().any(|t| &t.identity == tunnel))
        .collect()
    }

    /// May a deleting source that routed `hostnames` let go? Each group of its tunnel has
    /// synced the current input (which no longer wants them) and no problem of those syncs
    /// concerns one of them: a conflict on another hostname does not hold it.
    pub fn released(
        &self,
        tunnel: &TunnelIdentity,
        hostnames: &[String],
        table: &RouteTable,
        records: &[TunnelRecord],
    ) -> bool {
        let synced = self
            .groups_of(tunnel, table, records)
            .iter()
            .all(|(key, zone)| {
                self.groups
                    .get(key)
                    .is_some_and(|(input, _)| **input == *zone)
            });
        let blocked = self.problems(tunnel).iter().any(|p| {
            p.hostname
                .as_deref()
                .is_none_or(|h| hostnames.iter().any(|mine| mine.eq_ignore_ascii_case(h)))
        });
        synced && !blocked
    }
}

/// Memory of the syncs, owned by the DNS task of the route reconciler.
pub struct DnsSync {
    /// Shared with tunnel deletions: the zone locks and retired tunnel ids, and the zones
    /// other than their own where tunnels' records were placed (added and dropped here).
    dns: DnsWriters,
    options: DnsOptions,
    txt_records: bool,
    drift: Option<Duration>,
    retry_base: Duration,
    retry_max: Duration,
    /// Longest wait after a sync whose every problem is a Cloudflare error (`DNSError`): those
    /// are 5xx, 429 and lost answers far more often than anything lasting.
    transient_retry_max: Duration,
    groups: HashMap<GroupKey, GroupState>,
    /// The account zone lists hostnames are placed with.
    listed: Listed,
    /// Zones other than their own where tunnels may still have records.
    elsewhere: Elsewhere,
    /// The credentials of the last round.
    resolved: Arc<Resolved>,
    /// Hostnames of the last round that get no new record (see [`Wanted::hold`]).
    held: Arc<BTreeSet<String>>,
    /// Hostnames of the current input placed in no zone, per tunnel.
    unplaced: BTreeMap<TunnelIdentity, Vec<DnsProblem>>,
    /// Hostnames waiting in a parent zone for their pending zone, already told in an Event.
    pending_told: BTreeSet<(TunnelIdentity, String, String)>,
}

impl GroupState {
    /// Was its last sync's due time its drift check with hostnames over the zone's quota (every
    /// problem one that waits, at least one of them a quota problem)?
    fn at_drift_for_quota(&self) -> bool {
        let mut problems = self.problems.values().flatten();
        problems.clone().any(|p| p.reason == REASON_QUOTA_EXCEEDED) && problems.all(waits)
    }
}

/// A problem that is looked at again at the drift interval, not retried: a hostname another
/// cluster holds, or one over its zone's quota.
fn waits(p: &DnsProblem) -> bool {
    p.reason == REASON_DNS_OTHER_CLUSTER || p.reason == REASON_QUOTA_EXCEEDED
}

impl DnsSync {
    pub fn new(ctx: &Context, dns: DnsWriters) -> DnsSync {
        let o = &ctx.options;
        DnsSync {
            dns,
            options: ctx.dns_options(),
            txt_records: o.dns_txt_records,
            drift: (!o.drift_interval.is_zero()).then_some(o.drift_interval),
            retry_base: o.retry_base,
            retry_max: o.retry_max,
            transient_retry_max: o.transient_retry_max.min(o.retry_max),
            groups: HashMap::new(),
            listed: Listed::new(),
            elsewhere: Elsewhere::new(),
            resolved: Arc::new(Resolved::default()),
            held: Arc::default(),
            unplaced: BTreeMap::new(),
            pending_told: BTreeSet::new(),
        }
    }

    /// When the next retry or drift sync is due.
    pub(crate) fn next_due(&self) -> Option<Instant> {
        self.groups.values().filter_map(|g| g.due).min()
    }

    /// Did a group's last sync leave creates to the next round (`batched.rs`)?
    pub(crate) fn unfinished(&self) -> bool {
        self.groups.values().any(|g| g.unfinished)
    }

    /// What statuses read of the syncs so far.
    pub fn view(&self) -> DnsView {
        let mut problems = self.unplaced.clone();
        let mut keys: Vec<&GroupKey> = self.groups.keys().collect();
        keys.sort();
        for key in keys {
            for (tunnel, list) in &self.groups[key].problems {
                problems
                    .entry(tunnel.clone())
                    .or_default()
                    .extend(list.iter().cloned());
            }
        }
        let mut shared: BTreeMap<TunnelIdentity, BTreeSet<SharedHostname>> = BTreeMap::new();
        for group in self.groups.values() {
            for hostname in &group.shared {
                shared
                    .entry(hostname.tunnel.clone())
                    .or_default()
                    .insert(hostname.clone());
            }
        }
        DnsView {
            shared,
            txt_records: self.txt_records,
            directory: Arc::new(directory(&self.listed)),
            elsewhere: Arc::new(self.elsewhere.clone()),
            resolved: self.resolved.clone(),
            held: self.held.clone(),
            groups: self
                .groups
                .iter()
                .map(|(k, g)| (k.clone(), (g.input.clone(), g.clean && !g.unfinished)))
                .collect(),
            problems,
        }
    }

    /// Syncs every group seen for the first time (so what changed while no one ran is found
    /// at once), and every group whose input changed or whose retry or drift time has come.
    /// `more_coming` answers whether the DNS task's input changed since this round began (a
    /// next round is on its way).
    pub async fn run(
        &mut self,
        ctx: &Context,
        table: &RouteTable,
        records: &[TunnelRecord],
        held: &Arc<BTreeSet<String>>,
        publish: &watch::Sender<Arc<DnsView>>,
        more_coming: &(dyn Fn() -> bool + Sync),
    ) {
        self.resolved = Arc::new(Resolved::read(ctx, records).await);
        self.held = held.clone();
        refresh(ctx, table, records, &self.resolved, &mut self.listed).await;
        let live: BTreeSet<&TunnelIdentity> = records
            .iter()
            .filter(|r| !r.deleting)
            .map(|r| &r.identity)
            .collect();
        self.elsewhere.retain(|id, _| live.contains(id));
        let Wanted {
            groups,
            unplaced,
            pending,
        } = wanted(
            table,
            records,
            self.txt_records,
            &directory(&self.listed),
            &self.elsewhere,
            &self.resolved,
        )
        .hold(&self.held);
        self.tell_pending(ctx, &pending).await;
        let unplaced_changed = self.unplaced != unplaced;
        self.unplaced = unplaced;
        self.groups.retain(|key, _| groups.contains_key(key));
        let owners = own_zones(records);
        // Groups with a zone not yet recorded in a tunnel's status wait for the next round.
        let mut unrecorded: BTreeSet<GroupKey> = BTreeSet::new();
        for (key, zone) in &groups {
            for t in zone.tunnels.iter().filter(|t| !t.hostnames.is_empty()) {
                if owners.get(&t.identity) != Some(&key.zone_id) {
                    let placed = AccountZone::active(key.zone_id.clone(), zone.zone_name.clone());
                    // Before any record goes there: a restart or a deletion must find the zone.
                    let record = records.iter().find(|r| r.identity == t.identity);
                    if let Some(record) = record
                        && let Err(error) =
                            super::previous_zones::record(ctx, record, &placed).await
                    {
                        tracing::warn!(tunnel = %t.identity, zone = %placed.name, %error, "zone not recorded in status yet; its records wait");
                        unrecorded.insert(key.clone());
                    }
                    self.dns.zones.add(&t.tunnel_id, &placed);
                    self.elsewhere
                        .entry(t.identity.clone())
                        .or_default()
                        .insert(placed);
                }
            }
        }
        // Each group's input is shared from here on: with the state it syncs into and the
        // views published since (a copy per sync was the largest allocation of a round).
        let groups: BTreeMap<GroupKey, Arc<ZoneDns>> =
            groups.into_iter().map(|(k, z)| (k, Arc::new(z))).collect();
        let now = Instant::now();
        tracing::debug!(
            groups = groups.len(),
            unrecorded = unrecorded.len(),
            held = self.held.len(),
            unplaced = self.unplaced.len(),
            zone_lists = self.listed.len(),
            "DNS round"
        );
        for (key, zone) in &groups {
            let (key, zone) = (key.clone(), zone.clone());
            if unrecorded.contains(&key) {
                continue;
            }
            let due = match self.groups.get(&key) {
                None => first_sight_due(&zone, records, &owners, &key.zone_id),
                Some(state) => {
                    let timed = state.due.is_some_and(|d| d <= now);
                    if timed && state.at_drift_for_quota() {
                        // The drift check of a full zone: its plan is read again and its
                        // quota tried again (a plan upgraded, records removed elsewhere). A
                        // retry after an error keeps what is known, so it writes nothing
                        // that must fail.
                        self.options.quota_memory.forget(&key.zone_id);
                    }
                    state.input != zone || timed || state.deferred
                }
            };
            // A clean group whose input did not change is synced for drift: behind every change.
            // Any other sync publishes or removes what users asked for (a route created, edited
            // or deleted): it goes in the interactive lane (docs/design.md §3.8).
            let priority = match self.groups.get(&key) {
                Some(state) if state.clean && state.input == zone && !state.deferred => {
                    Priority::Background
                }
                _ => Priority::Interactive,
            };
            if due && priority == Priority::Background && self.changes_wait(ctx, &key) {
                // A drift sync would hold the zone (and this task) behind every change waiting
                // at the pacer: it is put off instead, and other groups' changes go on.
                if let Some(state) = self.groups.get_mut(&key) {
                    state.due = Some(now + DRIFT_PUT_OFF);
                }
                continue;
            }
            if due {
                self.sync_group(ctx, key, zone, &owners, priority, more_coming)
                    .await;
                publish.send_replace(Arc::new(self.view()));
            }
        }
        if unplaced_changed {
            publish.send_replace(Arc::new(self.view()));
        }
        self.release_previous_zones(ctx, &groups, records).await;
    }

    /// An Event on each tunnel with a hostname written into a parent zone because its own zone
    /// is not active on Cloudflare yet (once per hostname and zone in a term).
    async fn tell_pending(
        &mut self,
        ctx: &Context,
        pending: &BTreeMap<TunnelIdentity, BTreeSet<(String, String, String)>>,
    ) {
        let now: BTreeSet<(TunnelIdentity, String, String)> = pending
            .iter()
            .flat_map(|(t, set)| {
                set.iter()
                    .map(|(z, h, _)| (t.clone(), z.clone(), h.clone()))
            })
            .collect();
        for (tunnel, set) in pending {
            for (zone, host, written) in set {
                let key = (tunnel.clone(), zone.clone(), host.clone());
                if self.pending_told.contains(&key) {
                    continue;
                }
                let note = format!(
                    "zone {zone} is not active on Cloudflare yet: the DNS record of {host} is written into {written} until it is"
                );
                tracing::info!(%tunnel, %zone, %host, "hostname waits in a parent zone for a pending zone");
                crate::term::events::warning_on(ctx, tunnel, "ZonePending", note).await;
            }
        }
        self.pending_told = now;
    }

    /// Drops from `status.previousZones` every zone whose group synced cleanly, with its
    /// current input, while the tunnel in it wanted nothing there: that zone holds no record of
    /// it any more. A previous zone that some routed hostname of the tunnel is placed in stays
    /// listed (its records there are still the tunnel's).
    async fn release_previous_zones(
        &self,
        ctx: &Context,
        groups: &BTreeMap<GroupKey, Arc<ZoneDns>>,
        records: &[TunnelRecord],
    ) {
        for record in records.iter().filter(|r| !r.deleting) {
            let Some(previous) = record.status.previous_zones.as_ref() else {
                continue;
            };
            let cleared: Vec<&str> = previous
                .iter()
                .filter(|z| {
                    groups.iter().any(|(key, zone)| {
                        key.zone_id == z.zone_id
                            && wants_nothing(zone, &record.identity)
                            && self
                                .groups
                                .get(key)
                                .is_some_and(|g| g.clean && g.input == *zone)
                    })
                })
                .map(|z| z.zone_id.as_str())
                .collect();
            if cleared.is_empty() {
                continue;
            }
            if let Err(error) = super::previous_zones::release(ctx, record, &cleared).await {
                tracing::warn!(tunnel = %record.identity, %error, "previous zone not released from status yet");
            }
        }
    }
}

/// Each live tunnel's own zone id.
/// Whether a group seen for the first time (a start, a new leader) is synced at once: when a
/// tunnel of it routes a hostname, when its zone is not the one its status records, or when
/// its status still lists routes (its last route went while no one ran, so records of it may
/// be left). A group of tunnels that route nothing and never did costs no call; a record
/// left behind by a leader that died between clearing the routes and deleting the records
/// is found by the drift check.
fn first_sight_due(
    zone: &ZoneDns,
    records: &[TunnelRecord],
    owners: &BTreeMap<TunnelIdentity, String>,
    zone_id: &str,
) -> bool {
    zone.tunnels.iter().any(|t| {
        let routed_before = records
            .iter()
            .find(|r| r.identity == t.identity)
            .is_none_or(|r| r.deleting || r.routed);
        !t.hostnames.is_empty()
            || routed_before
            || owners.get(&t.identity).map(String::as_str) != Some(zone_id)
    })
}

fn own_zones(records: &[TunnelRecord]) -> BTreeMap<TunnelIdentity, String> {
    records
        .iter()
        .filter(|r| !r.deleting)
        .filter_map(|r| Some((r.identity.clone(), r.status.zone_id.clone()?)))
        .collect()
}

impl DnsSync {
    /// Do changes of the group's credential wait at its pacer now?
    fn changes_wait(&self, ctx: &Context, key: &GroupKey) -> bool {
        let Ok(credentials) = self.resolved.for_group(&key.credential) else {
            return false;
        };
        ctx.cloudflare
            .client(credentials.clone())
            .is_ok_and(|client| client.limiter().changes_waiting())
    }

    async fn sync_group(
        &mut self,
        ctx: &Context,
        key: GroupKey,
        zone: Arc<ZoneDns>,
        owners: &BTreeMap<TunnelIdentity, String>,
        priority: Priority,
        more_coming: &(dyn Fn() -> bool + Sync),
    ) {
        let reading = GroupReading {
            options: &self.options,
            resolved: &self.resolved,
            owners,
            priority,
            more_coming,
        };
        // Only a sync for a change of the group's input (or for the patches its last sync left
        // it) starts from the records its last sync left: a drift sync and a retry after
        // problems read what others did.
        let known = match self.groups.get_mut(&key) {
            Some(state) if state.input != zone || state.deferred => state.known.take(),
            _ => None,
        };
        let GroupOutcome {
            problems: outcome,
            shared,
            known,
            deferred,
            unfinished,
        } = sync_once(ctx, &self.dns.guard, &key, &zone, &reading, known).await;
        // A sync that could not read the zone knows nothing new of other clusters' hostnames.
        let shared = shared.unwrap_or_else(|| {
            self.groups
                .get(&key)
                .map(|g| g.shared.clone())
                .unwrap_or_default()
        });
        let clean = outcome.values().all(Vec::is_empty);
        if clean {
            // A zone other than its own that holds nothing of a tunnel any more is let go.
            for t in zone.tunnels.iter().filter(|t| t.hostnames.is_empty()) {
                if owners.get(&t.identity) == Some(&key.zone_id) {
                    continue;
                }
                self.dns.zones.remove(&t.tunnel_id, &key.zone_id);
                if let Some(set) = self.elsewhere.get_mut(&t.identity) {
                    set.retain(|z| z.id != key.zone_id);
                    if set.is_empty() {
                        self.elsewhere.remove(&t.identity);
                    }
                }
            }
        }
        // Hostnames another cluster holds, or a zone at its quota, are no failure: looked at
        // again at the drift interval (or when the input changes).
        let waits_for_others = !clean && outcome.values().flatten().all(waits);
        let for_another_cluster = outcome
            .values()
            .flatten()
            .any(|p| p.reason == REASON_DNS_OTHER_CLUSTER);
        let failures = match self.groups.get(&key) {
            _ if waits_for_others => 0,
            Some(state) if !clean => state.failures.saturating_add(1),
            None if !clean => 1,
            _ => 0,
        };
        let due = if clean {
            self.drift
                .map(|_| Instant::now() + ctx.options.jittered_drift_interval())
        } else if waits_for_others {
            // Without drift checks, another cluster's hostname is looked at every retry_max;
            // a full zone only when the input changes.
            match (self.drift, for_another_cluster) {
                (Some(_), _) => Some(Instant::now() + ctx.options.jittered_drift_interval()),
                (None, true) => Some(Instant::now() + self.retry_max),
                (None, false) => None,
            }
        } else {
            let factor = 2u32.saturating_pow(failures.saturating_sub(1).min(16));
            let api_errors_only = outcome
                .values()
                .flatten()
                .all(|p| p.reason == REASON_DNS_ERROR);
            let max = match api_errors_only {
                true => self.transient_retry_max,
                false => self.retry_max,
            };
            Some(Instant::now() + self.retry_base.saturating_mul(factor).min(max))
        };
        self.groups.insert(
            key,
            GroupState {
                input: zone,
                clean,
                problems: outcome,
                shared,
                failures,
                due,
                known,
                deferred,
                unfinished,
            },
        );
    }
}

#[cfg(test)]
#[path = "schedule_tests.rs"]
mod tests;
