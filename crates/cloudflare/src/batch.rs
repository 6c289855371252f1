//! Batched DNS record changes: `POST /zones/{zone_id}/dns_records/batch`.
//!
//! Cloudflare runs a batch in one transaction: deletes, then patches, then puts, then posts (each
//! list in the order given); if any action fails nothing is applied and the answer carries the
//! first error. A batch holds at most [`ZonePlanLimit`] records for the zone's plan (Free 200,
//! paid plans 3,500) and costs one request against the rate limit.
use http::Method;
use serde::{Deserialize, Serialize};

use super::engine::{Call, CloudflareClient};
use super::error::CloudflareError;
use super::models::Zone;
use super::records::{DnsRecord, NewDnsRecord};

/// Records per batch on the Free plan.
pub const FREE_PLAN_BATCH_LIMIT: usize = 200;
/// Records per batch on Pro, Business and Enterprise plans.
pub const PAID_PLAN_BATCH_LIMIT: usize = 3_500;

/// The batch size limit of a zone's plan.
pub struct ZonePlanLimit;

impl ZonePlanLimit {
    /// From the zone's `plan.legacy_id` (`free`, `pro`, `business`, `enterprise`); an unknown or
    /// missing plan gets the Free limit, which every plan allows.
    pub fn of(zone: &Zone) -> usize {
        match zone.plan.as_ref().and_then(|p| p.legacy_id.as_deref()) {
            Some(plan) if !plan.eq_ignore_ascii_case("free") && !plan.is_empty() => {
                PAID_PLAN_BATCH_LIMIT
            }
            _ => FREE_PLAN_BATCH_LIMIT,
        }
    }
}

/// A delete in a batch: only the id is sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BatchDelete {
    pub id: String,
}

/// A patch or put in a batch: the record id plus the record body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BatchUpdate {
    pub id: String,
    #[serde(flatten)]
    pub record: NewDnsRecord,
}

/// One batch request body; empty lists are not sent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct DnsBatch {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub deletes: Vec<BatchDelete>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub patches: Vec<BatchUpdate>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub puts: Vec<BatchUpdate>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub posts: Vec<NewDnsRecord>,
}

impl DnsBatch {
    /// Records the batch touches (what the plan's limit counts).
    pub fn len(&self) -> usize {
        self.deletes.len() + self.patches.len() + self.puts.len() + self.posts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Refuses bodies the API would reject for shape reasons (as the single calls do).
    pub fn validate(&self) -> Result<(), CloudflareError> {
        let updates = self.patches.iter().chain(&self.puts);
        for id in self
            .deletes
            .iter()
            .map(|d| &d.id)
            .chain(updates.clone().map(|u| &u.id))
        {
            if id.is_empty() {
                return Err(CloudflareError::InvalidInput(
                    "a batched DNS delete, patch or put needs the record id".into(),
                ));
            }
        }
        updates
            .map(|u| &u.record)
            .chain(&self.posts)
            .try_for_each(NewDnsRecord::validate)
    }
}

/// What a batch answers: the records as they are after each kind of action (deleted ones as
/// they were), in request order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct DnsBatchResult {
    #[serde(default)]
    pub deletes: Vec<DnsRecord>,
    #[serde(default)]
    pub patches: Vec<DnsRecord>,
    #[serde(default)]
    pub puts: Vec<DnsRecord>,
    #[serde(default)]
    pub posts: Vec<DnsRecord>,
}

impl CloudflareClient {
    /// Applies `batch` in one request, all or nothing. Retried after timeouts and 5xx like a
    /// create, so a lost answer can make the retry fail with "record exists"; the caller then
    /// re-reads and plans again.
    pub async fn batch_dns_records(
        &self,
        zone_id: &str,
        batch: &DnsBatch,
    ) -> Result<DnsBatchResult, CloudflareError> {
        batch.validate()?;
        let path = ["zones", zone_id, "dns_records", "batch"];
        self.fetch(Call::with_json("dns.batch", Method::POST, &path, batch)?)
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn batch_body_sends_only_the_lists_it_has_with_ids_beside_the_fields() {
        let batch = DnsBatch {
            deletes: vec![BatchDelete { id: "d1".into() }],
            patches: vec![BatchUpdate {
                id: "p1".into(),
                record: NewDnsRecord::txt("_managed.a.x", "\"v\"", None),
            }],
            puts: Vec::new(),
            posts: vec![NewDnsRecord::tunnel_cname("a.x", "abc", None)],
        };
        assert_eq!(batch.len(), 3);
        assert_eq!(
            serde_json::to_value(&batch).unwrap(),
            json!({
                "deletes": [{"id": "d1"}],
                "patches": [{"id": "p1", "type": "TXT", "name": "_managed.a.x",
                             "content": "\"v\"", "ttl": 1}],
                "posts": [{"type": "CNAME", "name": "a.x", "content": "abc.cfargotunnel.com",
                           "ttl": 1, "proxied": true}],
            })
        );
    }

    #[test]
    fn batch_validation_refuses_missing_ids_and_bad_records() {
        let no_id = DnsBatch {
            deletes: vec![BatchDelete { id: String::new() }],
            ..DnsBatch::default()
        };
        assert!(no_id.validate().is_err());
        let bad = DnsBatch {
            posts: vec![NewDnsRecord::txt("a.x", "", None)],
            ..DnsBatch::default()
        };
        assert_eq!(
            bad.validate().unwrap_err().to_string(),
            "invalid input: DNS record a.x has empty content"
        );
    }

    #[test]
    fn plan_limits_follow_the_legacy_plan_id() {
        let zone = |plan: serde_json::Value| -> Zone {
            serde_json::from_value(json!({"id": "z", "name": "x", "plan": plan})).unwrap()
        };
        assert_eq!(ZonePlanLimit::of(&zone(json!({"legacy_id": "free"}))), 200);
        assert_eq!(ZonePlanLimit::of(&zone(json!({"legacy_id": "pro"}))), 3_500);
        assert_eq!(
            ZonePlanLimit::of(&zone(json!({"legacy_id": "enterprise"}))),
            3_500
        );
        assert_eq!(ZonePlanLimit::of(&zone(json!(null))), 200);
    }
}
