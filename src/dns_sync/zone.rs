//! The executor: read the zone's candidates once, plan, apply, report per tunnel.
//!
//! Writes go out in batches (`batched.rs`: a hostname's records in one transaction, as few
//! requests as the zone plan's limit allows) or, with `--dns-batch=never` or where the batch call
//! is unavailable, one record per request (`single.rs`). The executor keeps an in-memory copy of
//! the candidates and updates it from every answer, so nothing is read twice.
//!
//! Single-record writes run one hostname at a time, in plan order; a failed change stops the rest
//! of its hostname (a TXT is never written for a CNAME that failed, a Go-operator TXT never
//! deleted before its CNAME carries our marker).
//!
//! **"Record exists" (81053/81054/81057/81058) on a create**, and 404 on an update: the name was
//! taken or freed behind our back (a record the candidate reads cannot see — an A/AAAA record,
//! a CNAME pointing elsewhere — or a concurrent writer). The executor re-reads that name (in a
//! batch: every name of the hostname; all types), replaces it in its copy, plans the zone again
//! and runs the new changes of that hostname once: a record that turns out to be ours is fixed, a
//! foreign one becomes a `DNSConflict` (or is taken over with `overwrite_unmanaged`). A second
//! failure is reported as an error, never retried in a loop. A 404 on delete counts as done.
//!
//! **A zone at its record quota** (`quota.rs`): the changes go out in the order
//! [`cftunnel_policy::dns::fit`] gives (hostnames that add no record first, then the oldest
//! routes'), hostnames beyond a known quota are held back, and a create refused with 81045
//! leaves its hostname without records, reported as `QuotaExceeded`, never as an error.
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use cftunnel_cloudflare::{
    CloudflareClient, CloudflareError, DnsRecord, DnsRecordType, MAX_DNS_PER_PAGE, NewDnsRecord,
};
use cftunnel_types::TunnelIdentity;

use std::time::Instant;

use super::candidates::Reader;
use super::known::{KnownRecords, tunnel_ids};
use super::quota_run::QuotaRun;
use super::report::{DnsWriteError, TunnelDnsReport, WriteKind, WrittenRecord, ZoneDnsReport};
use cftunnel_policy::dns::{DesiredRecord, DnsAction, DnsChange, RecordRef};
use cftunnel_policy::dns::{DnsOptions, ZoneDns, normalized};
use cftunnel_policy::dns::{Fitted, fit, plan_zone};
use cftunnel_policy::dns::{Ours, Owner};
use cftunnel_policy::dns::{TXT_PREFIX, managed_txt_name};

/// The sync could not start: the candidate records could not be read (nothing was written).
#[derive(Debug, thiserror::Error)]
#[error("reading the DNS records of zone {zone_id}: {source}")]
pub struct DnsSyncError {
    pub zone_id: String,
    #[source]
    pub source: CloudflareError,
}

impl DnsSyncError {
    pub fn metric_label(&self) -> &'static str {
        self.source.metric_label()
    }
}

/// Syncs the DNS records of one zone with `zone.tunnels`' routed hostnames (docs/design.md §3.3).
///
/// Reads: the candidate pages once (see [`super::candidates`]), plus one read per name found
/// taken on create. Writes: only what differs. With nothing changed it costs only the reads.
pub async fn sync_zone(
    client: &CloudflareClient,
    zone_id: &str,
    zone: &ZoneDns,
    options: &DnsOptions,
) -> Result<ZoneDnsReport, DnsSyncError> {
    Ok(
        sync_zone_from(client, zone_id, zone, options, None, &|| false)
            .await?
            .0,
    )
}

/// [`sync_zone`], starting from the records the group's last sync left (`known`, when it
/// serves this sync: [`KnownRecords::serves`]) instead of reading them. Returns, with the
/// report, what this sync leaves for the next: its records as its writes left them, when no
/// write failed. `more_coming` answers whether another sync of the group is
/// already on its way (the input changed since this one began): the `DnsId` patches of the
/// TXTs this sync created are then left to it, to travel with its first batch.
pub async fn sync_zone_from(
    client: &CloudflareClient,
    zone_id: &str,
    zone: &ZoneDns,
    options: &DnsOptions,
    known: Option<KnownRecords>,
    more_coming: &(dyn Fn() -> bool + Sync),
) -> Result<(ZoneDnsReport, Option<KnownRecords>), DnsSyncError> {
    if zone.tunnels.is_empty() {
        // Nothing can be ours: no read at all.
        let report = ZoneDnsReport {
            tunnels: Vec::new(),
            reads: 0,
            writes: 0,
            deferred_dns_ids: 0,
            left_to_next: 0,
        };
        return Ok((report, None));
    }
    let ours = Ours::new(&zone.tunnels, options.cluster_id.as_ref());
    let hostnames = routed_hostnames(zone);
    let mut reader = Reader {
        client,
        zone_id,
        page_size: options.page_size.clamp(1, MAX_DNS_PER_PAGE),
        reads: 0,
    };
    let (actual, read_at) = match known {
        Some(known) => (known.records, known.read_at),
        None => {
            let read_at = Instant::now();
            let read = reader
                .candidates(ours.targets(), &hostnames)
                .await
                .map_err(|source| DnsSyncError {
                    zone_id: zone_id.to_string(),
                    source,
                })?;
            (read, read_at)
        }
    };
    let plan = plan_zone(zone, &actual, options);
    let mut run = Run {
        reader,
        zone,
        options,
        mirror: actual,
        batch_off: false,
        pending_dns_ids: BTreeSet::new(),
        more_coming,
        deferred_dns_ids: 0,
        turn: None,
        left_to_next: 0,
        reread: false,
        quota: QuotaRun::default(),
        reports: zone
            .tunnels
            .iter()
            .map(|t| TunnelDnsReport::new(t.identity.clone()))
            .collect(),
        writes: 0,
    };
    for conflict in plan.conflicts {
        if let Some(report) = run.report_of(&conflict.tunnel) {
            report.conflicts.push(conflict);
        }
    }
    for invalid in plan.invalid {
        if let Some(report) = run.report_of(&invalid.tunnel) {
            report.invalid.push(invalid);
        }
    }
    for shared in plan.shared {
        if let Some(report) = run.report_of(&shared.tunnel) {
            report.shared.push(shared);
        }
    }
    let groups = group_by_hostname(plan.changes);
    run.quota.room = run.zone_room(&groups).await;
    let fitted = fit(groups, &zone.since, run.quota.room.as_ref());
    run.apply_all(fitted).await;
    run.settle_quota();
    let left = records_left(zone, &run.mirror, options);
    for (report, left) in run.reports.iter_mut().zip(left) {
        report.records_left = left;
    }
    tracing::debug!(
        zone_id,
        reads = run.reader.reads,
        writes = run.writes,
        "DNS sync done"
    );
    let failed = run.reports.iter().any(|r| !r.errors.is_empty());
    // Kept whether or not it wrote: at rest too, the next route's sync starts from it
    // (`known.rs`).
    let known = (!failed).then(|| KnownRecords {
        records: std::mem::take(&mut run.mirror),
        tunnel_ids: tunnel_ids(zone),
        read_at,
    });
    let report = ZoneDnsReport {
        tunnels: run.reports,
        reads: run.reader.reads,
        writes: run.writes,
        deferred_dns_ids: run.deferred_dns_ids,
        left_to_next: run.left_to_next,
    };
    Ok((report, known))
}

pub(super) fn group_by_hostname(changes: Vec<DnsChange>) -> Vec<Vec<DnsChange>> {
    let mut groups: Vec<Vec<DnsChange>> = Vec::new();
    for change in changes {
        match groups.last_mut() {
            Some(group) if group[0].hostname == change.hostname => group.push(change),
            _ => groups.push(vec![change]),
        }
    }
    groups
}

/// Every hostname the zone's tunnels route, normalised (borrowed where it is already).
pub(super) fn routed_hostnames(zone: &ZoneDns) -> BTreeSet<Cow<'_, str>> {
    zone.tunnels
        .iter()
        .flat_map(|t| t.hostnames.iter().map(|h| normalized(h)))
        .collect()
}

/// CNAME and TXT records each tunnel owns in `records`.
fn records_left(zone: &ZoneDns, records: &[DnsRecord], options: &DnsOptions) -> Vec<usize> {
    let ours = Ours::new(&zone.tunnels, options.cluster_id.as_ref());
    let mut txts: BTreeMap<Cow<'_, str>, Vec<&DnsRecord>> = BTreeMap::new();
    for record in records.iter().filter(|r| r.is_type(DnsRecordType::Txt)) {
        txts.entry(normalized(&record.name))
            .or_default()
            .push(record);
    }
    let mut left = vec![0; zone.tunnels.len()];
    for record in records {
        let name = normalized(&record.name);
        let owner = if record.is_type(DnsRecordType::Cname) {
            let vouching = txts
                .get(managed_txt_name(&name).as_str())
                .map_or(&[][..], Vec::as_slice);
            ours.cname_owner(record, vouching, name.starts_with("*."))
        } else if record.is_type(DnsRecordType::Txt) && name.starts_with(TXT_PREFIX) {
            ours.txt_owner(record)
        } else {
            continue;
        };
        if let Owner::Tunnel(index) = owner
            && let Some(count) = left.get_mut(index)
        {
            *count += 1;
        }
    }
    left
}

/// State of one sync while it applies changes.
pub(super) struct Run<'a> {
    pub reader: Reader<'a>,
    pub zone: &'a ZoneDns,
    pub options: &'a DnsOptions,
    /// The candidates as they are now, updated from every write answer.
    pub mirror: Vec<DnsRecord>,
    pub reports: Vec<TunnelDnsReport>,
    pub writes: u32,
    /// The batch call turned out unavailable during this sync: single-record calls from here.
    pub batch_off: bool,
    /// Hostnames whose TXT was batched with an empty `DnsId` (set once the batches are done).
    pub pending_dns_ids: BTreeSet<String>,
    /// Is another sync of the group on its way (see [`sync_zone_from`])?
    pub more_coming: &'a (dyn Fn() -> bool + Sync),
    /// Patches left to that sync.
    pub deferred_dns_ids: usize,
    /// A turn at the pacer taken for the next batch (`batched.rs`): that batch's call spends it.
    pub turn: Option<CloudflareClient>,
    /// Hostnames whose creates were left to that sync.
    pub left_to_next: usize,
    /// The candidates were read again during this sync (at most once: see `batched.rs`).
    pub reread: bool,
    /// The zone's record quota as this sync knows and finds it (`quota.rs`).
    pub quota: QuotaRun,
}

/// Why a change did not go through.
pub(super) enum Failure {
    /// Worth one re-read of this record name and a new plan.
    NameChanged(CloudflareError),
    Failed(CloudflareError),
}

impl Run<'_> {
    fn report_of(&mut self, identity: &TunnelIdentity) -> Option<&mut TunnelDnsReport> {
        self.reports.iter_mut().find(|r| &r.identity == identity)
    }

    /// Applies the plan's changes, hostname by hostname, in the order `fit` gave: in batches
    /// unless batching is off or unavailable for the zone. Hostnames beyond a confirmed quota
    /// are not sent; those beyond a reported one go last.
    async fn apply_all(&mut self, fitted: Fitted) {
        let Fitted { send, beyond } = fitted;
        let confirmed = self
            .quota
            .room
            .as_ref()
            .is_some_and(|r| r.basis.is_confirmed());
        let beyond = if confirmed {
            for group in &beyond {
                self.hold(group);
            }
            Vec::new()
        } else {
            beyond
        };
        if send.is_empty() && beyond.is_empty() {
            return;
        }
        match self.batch_limit().await {
            Some(limit) => self.apply_batched(send, beyond, limit).await,
            None => {
                for group in send {
                    self.apply_group(group, true).await;
                }
                self.quota.probing = !beyond.is_empty();
                for group in beyond {
                    self.apply_group(group, true).await;
                }
                self.quota.probing = false;
            }
        }
    }

    /// Replaces what the mirror holds at `name` with `fresh` (a re-read of that name).
    pub(super) fn mirror_replace(&mut self, name: &str, fresh: Vec<DnsRecord>) {
        self.mirror.retain(|r| normalized(&r.name) != name);
        self.mirror.extend(fresh);
    }

    /// Plans the zone again from the mirror; reports the hostname's new conflicts and returns
    /// its changes.
    pub(super) fn replanned(&mut self, hostname: &str) -> Vec<DnsChange> {
        let plan = plan_zone(self.zone, &self.mirror, self.options);
        for conflict in plan
            .conflicts
            .into_iter()
            .filter(|c| c.hostname == hostname)
        {
            if let Some(report) = self.report_of(&conflict.tunnel)
                && !report.conflicts.contains(&conflict)
            {
                report.conflicts.push(conflict);
            }
        }
        plan.changes
            .into_iter()
            .filter(|c| c.hostname == hostname)
            .collect()
    }

    /// Reports `error` on the first change of a hostname's changes; the rest count as skipped.
    pub(super) fn report_failed(&mut self, group: &[DnsChange], error: CloudflareError) {
        let Some(first) = group.first() else { return };
        if let Some(report) = self.report_of(&first.tunnel) {
            report.errors.push(DnsWriteError {
                hostname: first.hostname.clone(),
                kind: write_kind(&first.action),
                record: target_of(first),
                error,
                skipped: group.len() - 1,
            });
        }
    }

    /// Reports a successful write.
    pub(super) fn report_written(&mut self, change: &DnsChange, record: Option<&DnsRecord>) {
        let kind = write_kind(&change.action);
        let record = match (&change.action, record) {
            (DnsAction::Delete { .. }, _) | (_, None) => target_of(change),
            (_, Some(record)) => RecordRef::of(record),
        };
        match kind {
            WriteKind::Create => self.quota.written(1),
            WriteKind::Delete => self.quota.written(-1),
            WriteKind::Update | WriteKind::TakeOver => {}
        }
        if let Some(report) = self.report_of(&change.tunnel) {
            report.written.push(WrittenRecord { kind, record });
        }
    }
}

pub(super) fn body_of(
    desired: &DesiredRecord,
    created_cname: Option<&str>,
) -> Result<NewDnsRecord, Failure> {
    desired.body(created_cname).ok_or_else(|| {
        Failure::Failed(CloudflareError::InvalidInput(format!(
            "the TXT {} needs the id of a CNAME that was not created",
            desired.name()
        )))
    })
}

pub(super) fn write_kind(action: &DnsAction) -> WriteKind {
    match action {
        DnsAction::Create(_) => WriteKind::Create,
        DnsAction::Update {
            take_over: true, ..
        } => WriteKind::TakeOver,
        DnsAction::Update { .. } => WriteKind::Update,
        DnsAction::Delete { .. } => WriteKind::Delete,
    }
}

/// The record a change is about, as messages name it.
pub(super) fn target_of(change: &DnsChange) -> RecordRef {
    match &change.action {
        DnsAction::Create(desired) => desired.to_ref(),
        DnsAction::Update { current, .. } | DnsAction::Delete { current, .. } => current.clone(),
    }
}

pub(super) fn record_name(action: &DnsAction) -> String {
    match action {
        DnsAction::Create(desired) | DnsAction::Update { desired, .. } => {
            desired.name().to_string()
        }
        DnsAction::Delete { current, .. } => current.name.clone(),
    }
}
