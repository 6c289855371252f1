//! The executor: read the zone's candidates once, plan, apply, report per tunnel.
//!
//! Changes run one hostname at a time, in plan order; a failed change stops the rest of its
//! hostname (a TXT is never written for a CNAME that failed, a Go-operator TXT never deleted
//! before its CNAME carries our marker). The executor keeps an in-memory copy of the candidates
//! and updates it from every answer, so nothing is read twice.
//!
//! **"Record exists" (81053/81054/81057/81058) on a create**, and 404 on an update: the name was
//! taken or freed behind our back (a record the candidate reads cannot see — an A/AAAA record,
//! a CNAME pointing elsewhere — or a concurrent writer). The executor re-reads that one name
//! (all types), replaces it in its copy, plans the zone again and runs the new changes of that
//! hostname once: a record that turns out to be ours is fixed, a foreign one becomes a
//! `DNSConflict` (or is taken over with `overwrite_unmanaged`). A second failure is reported as
//! an error, never retried in a loop. A 404 on delete counts as done.
use std::collections::{BTreeMap, BTreeSet};

use crate::admission::TunnelIdentity;
use crate::cloudflare::client::{
    CloudflareClient, CloudflareError, DnsRecord, DnsRecordType, MAX_DNS_PER_PAGE, NewDnsRecord,
};

use super::candidates::Reader;
use super::change::{DesiredRecord, DnsAction, DnsChange, RecordRef};
use super::desired::{DnsOptions, ZoneDns, normalize_name};
use super::ownership::{Ours, Owner};
use super::plan::plan_zone;
use super::report::{DnsWriteError, TunnelDnsReport, WriteKind, WrittenRecord, ZoneDnsReport};
use super::txt::{TXT_PREFIX, managed_txt_name};

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

/// Syncs the DNS records of one zone with `zone.tunnels`' routed hostnames (SPEC §3.3).
///
/// Reads: the candidate pages once (see [`super::candidates`]), plus one read per name found
/// taken on create. Writes: only what differs. With nothing changed it costs only the reads.
pub async fn sync_zone(
    client: &CloudflareClient,
    zone_id: &str,
    zone: &ZoneDns,
    options: &DnsOptions,
) -> Result<ZoneDnsReport, DnsSyncError> {
    if zone.tunnels.is_empty() {
        // Nothing can be ours: no read at all.
        return Ok(ZoneDnsReport {
            tunnels: Vec::new(),
            reads: 0,
            writes: 0,
        });
    }
    let ours = Ours::new(&zone.tunnels, options.cluster_id.as_ref());
    let hostnames: BTreeSet<String> = zone
        .tunnels
        .iter()
        .flat_map(|t| t.hostnames.iter().map(|h| normalize_name(h)))
        .collect();
    let mut reader = Reader {
        client,
        zone_id,
        page_size: options.page_size.clamp(1, MAX_DNS_PER_PAGE),
        reads: 0,
    };
    let actual = reader
        .candidates(ours.targets(), &hostnames)
        .await
        .map_err(|source| DnsSyncError {
            zone_id: zone_id.to_string(),
            source,
        })?;
    let plan = plan_zone(zone, &actual, options);
    let mut run = Run {
        reader,
        zone,
        options,
        mirror: actual,
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
    for group in group_by_hostname(plan.changes) {
        run.apply_group(group, true).await;
    }
    let left = records_left(zone, &run.mirror, options);
    for (report, left) in run.reports.iter_mut().zip(left) {
        report.records_left = left;
    }
    crate::metrics::dns_synced_zone(&run.reports);
    tracing::debug!(
        zone_id,
        reads = run.reader.reads,
        writes = run.writes,
        "DNS sync done"
    );
    Ok(ZoneDnsReport {
        tunnels: run.reports,
        reads: run.reader.reads,
        writes: run.writes,
    })
}

fn group_by_hostname(changes: Vec<DnsChange>) -> Vec<Vec<DnsChange>> {
    let mut groups: Vec<Vec<DnsChange>> = Vec::new();
    for change in changes {
        match groups.last_mut() {
            Some(group) if group[0].hostname == change.hostname => group.push(change),
            _ => groups.push(vec![change]),
        }
    }
    groups
}

/// CNAME and TXT records each tunnel owns in `records`.
fn records_left(zone: &ZoneDns, records: &[DnsRecord], options: &DnsOptions) -> Vec<usize> {
    let ours = Ours::new(&zone.tunnels, options.cluster_id.as_ref());
    let mut txts: BTreeMap<String, Vec<&DnsRecord>> = BTreeMap::new();
    for record in records.iter().filter(|r| r.is_type(DnsRecordType::Txt)) {
        txts.entry(normalize_name(&record.name))
            .or_default()
            .push(record);
    }
    let mut left = vec![0; zone.tunnels.len()];
    for record in records {
        let name = normalize_name(&record.name);
        let owner = if record.is_type(DnsRecordType::Cname) {
            let vouching = txts
                .get(&managed_txt_name(&name))
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
struct Run<'a> {
    reader: Reader<'a>,
    zone: &'a ZoneDns,
    options: &'a DnsOptions,
    /// The candidates as they are now, updated from every write answer.
    mirror: Vec<DnsRecord>,
    reports: Vec<TunnelDnsReport>,
    writes: u32,
}

/// Why a change did not go through.
enum Failure {
    /// Worth one re-read of this record name and a new plan.
    NameChanged(CloudflareError),
    Failed(CloudflareError),
}

impl Run<'_> {
    fn report_of(&mut self, identity: &TunnelIdentity) -> Option<&mut TunnelDnsReport> {
        self.reports.iter_mut().find(|r| &r.identity == identity)
    }

    /// Applies one hostname's changes in order; on a changed name, re-plans it once.
    async fn apply_group(&mut self, group: Vec<DnsChange>, may_replan: bool) {
        let mut created_cname: Option<String> = None;
        let total = group.len();
        for (done, change) in group.iter().enumerate() {
            let kind = write_kind(&change.action);
            let error = match self.apply(&change.action, created_cname.as_deref()).await {
                Ok(record) => {
                    if let (DnsAction::Create(DesiredRecord::Cname { .. }), Some(r)) =
                        (&change.action, &record)
                    {
                        created_cname = Some(r.id.clone());
                    }
                    let record = record
                        .as_ref()
                        .map_or_else(|| target_of(change), RecordRef::of);
                    if let Some(report) = self.report_of(&change.tunnel) {
                        report.written.push(WrittenRecord { kind, record });
                    }
                    continue;
                }
                Err(Failure::NameChanged(_)) if may_replan => {
                    match self.reader.at_name(&record_name(&change.action)).await {
                        Ok(fresh) => return self.replan(change, fresh).await,
                        Err(read_error) => read_error,
                    }
                }
                Err(Failure::NameChanged(error) | Failure::Failed(error)) => error,
            };
            if let Some(report) = self.report_of(&change.tunnel) {
                report.errors.push(DnsWriteError {
                    hostname: change.hostname.clone(),
                    kind,
                    record: target_of(change),
                    error,
                    skipped: total - done - 1,
                });
            }
            return;
        }
    }

    /// Puts the `fresh` records at `failed`'s name into the mirror, plans the zone again and
    /// applies the new changes of that hostname (no further re-plan). New conflicts of the
    /// hostname are reported.
    async fn replan(&mut self, failed: &DnsChange, fresh: Vec<DnsRecord>) {
        let name = record_name(&failed.action);
        let hostname = failed.hostname.as_str();
        self.mirror.retain(|r| normalize_name(&r.name) != name);
        self.mirror.extend(fresh);
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
        let group: Vec<DnsChange> = plan
            .changes
            .into_iter()
            .filter(|c| c.hostname == hostname)
            .collect();
        Box::pin(self.apply_group(group, false)).await;
    }

    /// One API call; the answer updates the mirror. `Ok(None)` for a delete.
    async fn apply(
        &mut self,
        action: &DnsAction,
        created_cname: Option<&str>,
    ) -> Result<Option<DnsRecord>, Failure> {
        let client = self.reader.client;
        let zone_id = self.reader.zone_id;
        match action {
            DnsAction::Create(desired) => {
                let body = body_of(desired, created_cname)?;
                self.writes += 1;
                match client.create_dns_record(zone_id, &body).await {
                    Ok(record) => {
                        self.mirror.push(record.clone());
                        Ok(Some(record))
                    }
                    Err(e) if e.is_record_exists() => Err(Failure::NameChanged(e)),
                    Err(e) => Err(Failure::Failed(e)),
                }
            }
            DnsAction::Update {
                current,
                desired,
                take_over,
            } => {
                let body = body_of(desired, created_cname)?;
                let id = current.id.as_deref().unwrap_or_default();
                self.writes += 1;
                let answer = if *take_over {
                    client.update_dns_record(zone_id, id, &body).await
                } else {
                    client.patch_dns_record(zone_id, id, &body).await
                };
                match answer {
                    Ok(record) => {
                        self.mirror.retain(|r| r.id != record.id);
                        self.mirror.push(record.clone());
                        Ok(Some(record))
                    }
                    Err(e) if e.is_not_found() => Err(Failure::NameChanged(e)),
                    Err(e) => Err(Failure::Failed(e)),
                }
            }
            DnsAction::Delete { current, .. } => {
                let id = current.id.as_deref().unwrap_or_default();
                self.writes += 1;
                match client.delete_dns_record(zone_id, id).await {
                    Ok(()) => {}
                    Err(e) if e.is_not_found() => {}
                    Err(e) => return Err(Failure::Failed(e)),
                }
                self.mirror.retain(|r| r.id != id);
                Ok(None)
            }
        }
    }
}

fn body_of(desired: &DesiredRecord, created_cname: Option<&str>) -> Result<NewDnsRecord, Failure> {
    desired.body(created_cname).ok_or_else(|| {
        Failure::Failed(CloudflareError::InvalidInput(format!(
            "the TXT {} needs the id of a CNAME that was not created",
            desired.name()
        )))
    })
}

fn write_kind(action: &DnsAction) -> WriteKind {
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
fn target_of(change: &DnsChange) -> RecordRef {
    match &change.action {
        DnsAction::Create(desired) => desired.to_ref(),
        DnsAction::Update { current, .. } | DnsAction::Delete { current, .. } => current.clone(),
    }
}

fn record_name(action: &DnsAction) -> String {
    match action {
        DnsAction::Create(desired) | DnsAction::Update { desired, .. } => {
            desired.name().to_string()
        }
        DnsAction::Delete { current, .. } => current.name.clone(),
    }
}
