//! Edge certificate packs of the zones: what `GET /zones/{zone_id}/ssl/certificate_packs` lists.
//!
//! Every zone starts with its Universal SSL pack (`type: universal`, hosts the apex and
//! `*.<apex>`, `active`), the shape Cloudflare gives a full-setup zone. Tests add packs
//! (advanced, custom, …) and move their status with the [`crate::Simulator`] controls.

use super::ids::{hex_id, now, uuid_id};

/// The pack statuses the API declares (an enum in the schema); others are refused.
pub(crate) const PACK_STATUSES: [&str; 21] = [
    "initializing",
    "pending_validation",
    "deleted",
    "pending_issuance",
    "pending_deployment",
    "pending_deletion",
    "pending_expiration",
    "expired",
    "active",
    "initializing_timed_out",
    "validation_timed_out",
    "issuance_timed_out",
    "deployment_timed_out",
    "deletion_timed_out",
    "pending_cleanup",
    "staging_deployment",
    "staging_active",
    "deactivating",
    "inactive",
    "backup_issued",
    "holding_deployment",
];

/// Statuses of an order whose certificate is not issued yet: such a pack lists no certificate.
const NOT_ISSUED: [&str; 6] = [
    "initializing",
    "pending_validation",
    "pending_issuance",
    "initializing_timed_out",
    "validation_timed_out",
    "issuance_timed_out",
];

/// Days a simulated certificate is valid (what Universal and advanced orders default to).
pub(crate) const VALIDITY_DAYS: i64 = 90;

/// A certificate pack as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimCertificatePack {
    pub id: String,
    /// The API's `type`: `universal`, `advanced`, `total_tls`, `sni_custom`, `legacy_custom`, …
    pub kind: String,
    /// Lower-case, without a trailing dot, in the order given.
    pub hosts: Vec<String>,
    /// One of the 21 statuses the schema declares (`active`, `pending_validation`, …).
    pub status: String,
    /// The id of the pack's one certificate (listed once issued, see [`Self::issued`]).
    pub certificate_id: String,
    pub created_on: String,
    pub modified_on: String,
    /// `created_on` plus 90 days.
    pub expires_on: String,
}

impl SimCertificatePack {
    /// A pack created now; `None` for an empty kind, no host or a status the API does not know.
    pub(crate) fn new(kind: &str, hosts: &[&str], status: &str) -> Option<Self> {
        let kind = kind.trim();
        let hosts: Vec<String> = hosts
            .iter()
            .map(|h| h.trim().trim_end_matches('.').to_ascii_lowercase())
            .collect();
        if kind.is_empty() || hosts.is_empty() || hosts.iter().any(String::is_empty) {
            return None;
        }
        if !is_known_status(status) {
            return None;
        }
        let created = jiff::Timestamp::now();
        let expires = created
            .checked_add(jiff::SignedDuration::from_hours(VALIDITY_DAYS * 24))
            .unwrap_or(created);
        Some(SimCertificatePack {
            id: uuid_id(),
            kind: kind.to_string(),
            hosts,
            status: status.to_string(),
            certificate_id: hex_id(),
            created_on: created.to_string(),
            modified_on: created.to_string(),
            expires_on: expires.to_string(),
        })
    }

    /// The Universal SSL pack of a full-setup zone: the apex and its first-level subdomains.
    pub(crate) fn universal(zone_name: &str) -> Self {
        let wildcard = format!("*.{zone_name}");
        Self::new("universal", &[zone_name, &wildcard], "active")
            .expect("a zone name is a valid host and active a known status")
    }

    /// Whether the certificate was issued, i.e. the pack lists it.
    pub fn issued(&self) -> bool {
        !NOT_ISSUED.contains(&self.status.as_str())
    }

    pub(crate) fn set_status(&mut self, status: &str) -> bool {
        if !is_known_status(status) {
            return false;
        }
        self.status = status.to_string();
        self.modified_on = now();
        true
    }
}

pub(crate) fn is_known_status(status: &str) -> bool {
    PACK_STATUSES.contains(&status)
}
