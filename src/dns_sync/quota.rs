//! A zone at its record quota, in the executor (docs/design.md §3.3; the order and the choices
//! are the planner's, `cftunnel_policy::dns::fit`).
//!
//! - **Before writing**, for a sync that adds records: the quota reported for the zone's plan
//!   is read once (with the batch limit, one zone read) and kept with what Cloudflare answered
//!   ([`QuotaMemory`]). The zone's records are counted (one list call of a small page, for its
//!   `total_count`) when the figure is confirmed, or when the candidates alone plus the new
//!   records would pass it; otherwise nothing is counted and every hostname is sent.
//! - **A confirmed figure**: the hostnames beyond the room are not sent; each is reported on
//!   its route as `QuotaExceeded`. **A reported figure not confirmed yet**: they go out last,
//!   and the first refusal (81045) holds back the rest of them.
//! - **A refusal (81045)** of a batch of several hostnames splits it in halves, as any refused
//!   batch; of one hostname (or of hostnames tried beyond a reported figure), it leaves them
//!   without records and counts the zone once: from then on in the sync, hostnames needing as
//!   many records are not sent. The count and the refused write's size bound the quota for the
//!   next syncs, which then count the zone first and hold back what does not fit.
//! - Nothing is retried in a loop: a group whose only problems are quota problems is synced
//!   again when its input changes (a removed hostname makes room) or at the drift interval,
//!   when the zone's quota facts are forgotten and its plan read again.
use cftunnel_cloudflare::{ZonePlanLimit, ZoneRecordQuota};
use cftunnel_policy::dns::{
    DnsChange, OverQuota, QuotaMemory, Refusal, ZoneBatching, ZoneRoom, records_added,
    records_needed,
};

use super::zone::Run;

fn positive(records: isize) -> usize {
    records.max(0) as usize
}

impl Run<'_> {
    fn memory(&self) -> &QuotaMemory {
        &self.options.quota_memory
    }

    /// Reads the zone: the quota reported for its plan, and its batch limit unless known.
    pub(super) async fn read_plan(
        &mut self,
    ) -> Result<cftunnel_cloudflare::Zone, cftunnel_cloudflare::CloudflareError> {
        let zone_id = self.reader.zone_id;
        let zone = self.reader.client.get_zone(zone_id).await?;
        let reported = ZoneRecordQuota::of(&zone);
        self.memory()
            .update(zone_id, |facts| facts.reported = Some(reported));
        let batches = &self.options.batch_memory;
        if batches.get(zone_id).is_none() {
            batches.set(zone_id, ZoneBatching::Limit(ZonePlanLimit::of(&zone)));
        }
        Ok(zone)
    }

    /// The zone's room for this sync's writes, when its quota is known and they may reach it.
    pub(super) async fn zone_room(&mut self, groups: &[Vec<DnsChange>]) -> Option<ZoneRoom> {
        let adds: usize = groups.iter().map(|g| positive(records_added(g))).sum();
        if adds == 0 {
            return None;
        }
        let zone_id = self.reader.zone_id;
        if self.memory().get(zone_id).reported.is_none()
            && let Err(error) = self.read_plan().await
        {
            tracing::debug!(zone_id, %error, "zone plan unreadable; its record quota is unknown");
        }
        let (limit, basis) = self.memory().get(zone_id).limit()?;
        if !basis.is_confirmed() && self.mirror.len() + adds <= limit {
            return None;
        }
        let held = match self.reader.count_all().await {
            Ok(Some(held)) => held,
            Ok(None) => return None,
            Err(error) => {
                tracing::debug!(zone_id, %error, "zone records not counted; its room is unknown");
                return None;
            }
        };
        // A zone holding more than the figure is not on that quota (an older Free zone).
        self.memory()
            .update(zone_id, |facts| facts.exceeded_by(held));
        let (limit, basis) = self.memory().get(zone_id).limit()?;
        (held <= limit).then_some(ZoneRoom { limit, basis, held })
    }

    /// Is this hostname held back because the zone turned out full earlier in the sync? It is
    /// then reported as over quota.
    pub(super) fn held_back(&mut self, group: &[DnsChange]) -> bool {
        let adds = positive(records_added(group));
        let full = self.quota.full_at.is_some_and(|k| adds > 0 && adds >= k);
        if full {
            self.hold(group);
        }
        full
    }

    /// Leaves a hostname without records: reported on its route as over quota.
    pub(super) fn hold(&mut self, group: &[DnsChange]) {
        if let Some(first) = group.first() {
            let entry = (
                first.tunnel.clone(),
                first.hostname.clone(),
                records_needed(group),
            );
            self.quota.over.push(entry);
        }
    }

    /// Cloudflare refused these hostnames' records with 81045 (one hostname, or a batch of those
    /// tried beyond a reported figure): they stay without records, and hostnames needing as
    /// many are not sent for the rest of the sync.
    pub(super) async fn refused_for_quota(&mut self, groups: &[Vec<DnsChange>]) {
        let cost: usize = groups
            .iter()
            .map(|g| positive(records_added(g)).max(1))
            .sum();
        for group in groups {
            self.hold(group);
        }
        let hold_from = if self.quota.probing { 1 } else { cost };
        self.quota.full_at = Some(self.quota.full_at.map_or(hold_from, |k| k.min(hold_from)));
        if self.quota.counted.is_none() {
            match self.reader.count_all().await {
                Ok(Some(held)) => self.quota.counted = Some((held, self.quota.added)),
                Ok(None) => {}
                Err(error) => {
                    tracing::debug!(zone_id = self.reader.zone_id, %error, "zone records not counted after a quota refusal");
                }
            }
        }
        if let Some(held) = self.quota.held_now() {
            let tighter = self
                .quota
                .refusal
                .is_none_or(|r| held + cost < r.held + r.cost);
            if tighter {
                self.quota.refusal = Some(Refusal { held, cost });
            }
        }
    }

    /// A write of hostnames beyond a reported figure went through: when the zone now holds
    /// more than the figure, the figure does not hold for it.
    pub(super) fn accepted_beyond(&mut self) {
        let past = match (&self.quota.room, self.quota.held_now()) {
            (Some(room), Some(held)) => held > room.limit,
            _ => false,
        };
        if past {
            let held = self.quota.held_now().unwrap_or_default();
            self.memory()
                .update(self.reader.zone_id, |facts| facts.exceeded_by(held));
            self.quota.probing = false;
        }
    }

    /// After the writes: remembers the sync's refusal and reports each hostname left without
    /// records, with what is known of the zone.
    pub(super) fn settle_quota(&mut self) {
        let zone_id = self.reader.zone_id;
        if let Some(r) = self.quota.refusal {
            self.memory()
                .update(zone_id, |facts| facts.refused_at(r.held, r.cost));
        }
        let over = std::mem::take(&mut self.quota.over);
        if over.is_empty() {
            return;
        }
        let quota = self.memory().get(zone_id).limit();
        let held = self.quota.held_now();
        tracing::info!(zone = %self.zone.zone_name, hostnames = over.len(), ?held, ?quota, "zone at its record quota: hostnames left without DNS records");
        for (tunnel, hostname, records) in over {
            let item = OverQuota {
                tunnel: tunnel.clone(),
                hostname,
                zone_name: self.zone.zone_name.clone(),
                records,
                held,
                quota: quota.clone(),
            };
            if let Some(report) = self.reports.iter_mut().find(|r| r.identity == tunnel)
                && !report.over_quota.contains(&item)
            {
                report.over_quota.push(item);
            }
        }
    }
}
