//! A zone's DNS record quota: how many records Cloudflare lets it hold.
//!
//! Cloudflare's documentation is reported to give 200 records for zones on the Free plan and
//! 3,500 for Pro, Business and Enterprise zones. These are figures as reported, not read from
//! the API (which exposes no quota): older Free zones and Enterprise zones with a raised quota
//! are reported to hold more. The authority is Cloudflare's answer to a create over the quota,
//! 400 with code [`crate::CODE_RECORD_QUOTA_EXCEEDED`]. Every record of the zone counts, not only
//! those cftunnel writes.
use super::models::Zone;

/// Records a Free zone holds, as reported by Cloudflare's documentation.
pub const FREE_PLAN_RECORD_QUOTA: usize = 200;
/// Records a Pro, Business or Enterprise zone holds, as reported by Cloudflare's documentation.
pub const PAID_PLAN_RECORD_QUOTA: usize = 3_500;

/// The record quota reported for a zone's plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZoneRecordQuota {
    /// Most records the zone holds, as reported for its plan.
    pub records: usize,
    /// The plan's name as Cloudflare spells it (`Free Website`, `Pro Website`, …), else its
    /// `legacy_id`, else `Free` (what an unknown plan is taken for).
    pub plan: String,
}

impl ZoneRecordQuota {
    /// From the zone's `plan.legacy_id` (`free`, `pro`, `business`, `enterprise`); an unknown or
    /// missing plan counts as Free, the smallest quota.
    pub fn of(zone: &Zone) -> Self {
        let plan = zone.plan.as_ref();
        let legacy = plan
            .and_then(|p| p.legacy_id.as_deref())
            .map(str::trim)
            .filter(|id| !id.is_empty());
        let records = match legacy {
            Some(id) if !id.eq_ignore_ascii_case("free") => PAID_PLAN_RECORD_QUOTA,
            _ => FREE_PLAN_RECORD_QUOTA,
        };
        let name = plan
            .and_then(|p| p.name.as_deref())
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .or(legacy)
            .unwrap_or("Free");
        Self {
            records,
            plan: name.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn zone(plan: serde_json::Value) -> Zone {
        serde_json::from_value(json!({"id": "z", "name": "x", "plan": plan}))
            .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn the_reported_quota_follows_the_legacy_plan_id() {
        let free = ZoneRecordQuota::of(&zone(json!({"legacy_id": "free", "name": "Free Website"})));
        assert_eq!((free.records, free.plan.as_str()), (200, "Free Website"));
        let pro = ZoneRecordQuota::of(&zone(json!({"legacy_id": "pro"})));
        assert_eq!((pro.records, pro.plan.as_str()), (3_500, "pro"));
        let enterprise = ZoneRecordQuota::of(&zone(json!({"legacy_id": "Enterprise"})));
        assert_eq!(enterprise.records, 3_500);
        let unknown = ZoneRecordQuota::of(&zone(json!(null)));
        assert_eq!((unknown.records, unknown.plan.as_str()), (200, "Free"));
        let blank = ZoneRecordQuota::of(&zone(json!({"legacy_id": " ", "name": ""})));
        assert_eq!((blank.records, blank.plan.as_str()), (200, "Free"));
    }
}
