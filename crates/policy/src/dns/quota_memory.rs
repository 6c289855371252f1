//! What the executor knows of each zone's record quota between syncs: the figure reported for
//! its plan, whether Cloudflare confirmed or contradicted it, and its last refusal. Forgotten
//! at a zone's drift check (a plan changed, records removed outside cftunnel), so a quota is
//! tried again at most once per drift interval.
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use cftunnel_cloudflare::ZoneRecordQuota;

use super::quota::QuotaBasis;

/// One zone's quota facts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QuotaFacts {
    /// The quota reported for the zone's plan; `None` until the zone was read.
    pub reported: Option<ZoneRecordQuota>,
    /// Cloudflare refused records past the reported figure: it holds for this zone.
    pub confirmed: bool,
    /// Cloudflare took more records than the reported figure: it does not hold for this zone.
    pub disproved: bool,
    /// The last refusal (81045): the zone held `held` records and the write added `cost`.
    pub refused: Option<Refusal>,
}

/// Cloudflare refused a write of `cost` records while the zone held `held`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub held: usize,
    pub cost: usize,
}

impl QuotaFacts {
    /// The figure hostnames are fitted into, and how it is known: a confirmed plan figure, else
    /// the last refusal's bound, else the plan figure unless contradicted.
    pub fn limit(&self) -> Option<(usize, QuotaBasis)> {
        let plan = |q: &ZoneRecordQuota| q.plan.clone();
        match (&self.reported, self.refused) {
            (Some(q), _) if self.confirmed => {
                Some((q.records, QuotaBasis::Confirmed { plan: plan(q) }))
            }
            (_, Some(r)) => Some((
                r.held + r.cost.max(1) - 1,
                QuotaBasis::Refused { held: r.held },
            )),
            (Some(q), None) if !self.disproved => {
                Some((q.records, QuotaBasis::Reported { plan: plan(q) }))
            }
            _ => None,
        }
    }

    /// Cloudflare refused a write of `cost` records while the zone held `held` (counted right
    /// after): a plan figure in the bounds this gives (held ≤ quota < held + cost) is confirmed,
    /// one below them contradicted.
    pub fn refused_at(&mut self, held: usize, cost: usize) {
        let cost = cost.max(1);
        if let Some(q) = &self.reported {
            if q.records >= held && q.records < held + cost {
                self.confirmed = true;
                self.refused = None;
                return;
            }
            if q.records < held {
                self.disproved = true;
                self.confirmed = false;
            }
        }
        self.refused = Some(Refusal { held, cost });
    }

    /// The zone holds `held` records: every figure below that is wrong for it (a refusal's
    /// bound after a plan upgrade, a plan figure of an older Free zone) and is dropped.
    pub fn exceeded_by(&mut self, held: usize) {
        while let Some((limit, basis)) = self.limit()
            && held > limit
        {
            match basis {
                QuotaBasis::Refused { .. } => self.refused = None,
                _ => {
                    self.confirmed = false;
                    self.disproved = true;
                }
            }
        }
    }
}

/// Per zone id, shared by every sync that uses the same [`super::DnsOptions`] (its clones too).
/// Equality ignores it, as [`super::BatchMemory`]'s does.
#[derive(Clone, Default)]
pub struct QuotaMemory(Arc<Mutex<HashMap<String, QuotaFacts>>>);

impl QuotaMemory {
    pub fn get(&self, zone_id: &str) -> QuotaFacts {
        self.lock().get(zone_id).cloned().unwrap_or_default()
    }

    /// Changes the zone's facts with `change`.
    pub fn update(&self, zone_id: &str, change: impl FnOnce(&mut QuotaFacts)) {
        change(self.lock().entry(zone_id.to_string()).or_default());
    }

    /// Forgets the zone: its plan is read again and its quota tried again.
    pub fn forget(&self, zone_id: &str) {
        self.lock().remove(zone_id);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, QuotaFacts>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl PartialEq for QuotaMemory {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for QuotaMemory {}

impl fmt::Debug for QuotaMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let zones = self.0.lock().map(|m| m.len()).unwrap_or_default();
        write!(f, "QuotaMemory({zones} zones)")
    }
}
