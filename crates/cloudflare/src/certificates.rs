//! Edge certificate packs of a zone: which hostnames Cloudflare's edge holds a certificate for.
use serde::Deserialize;

use super::engine::CloudflareClient;
use super::error::CloudflareError;

/// Page size of the certificate pack walk, the largest the current API allows (5..=50). The
/// 2024 schema declares no paging for this list; the current API pages it with `page` and
/// `per_page`.
pub const CERTIFICATE_PACKS_PER_PAGE: u32 = 50;

/// One edge certificate pack of a zone, as `GET /zones/{zone_id}/ssl/certificate_packs` lists
/// it; the other fields (certificates, authority, validation, …) are ignored.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct CertificatePack {
    pub id: String,
    /// The API's `type`: `universal`, `advanced`, `total_tls`, `sni_custom`, `legacy_custom`,
    /// … (no closed list: treat an unknown one as some kind of certificate).
    #[serde(rename = "type")]
    pub kind: String,
    /// The hostnames the pack covers, wildcards included (`*.example.com`).
    pub hosts: Vec<String>,
    /// `active` for a pack the edge serves; else one of the order's or certificate's stages
    /// (`initializing`, `pending_validation`, …, `expired`, `deactivating`, `inactive`).
    pub status: String,
}

impl CloudflareClient {
    /// Every certificate pack of the zone, of every status (`status=all`), all pages.
    ///
    /// Needs the token permission "SSL and Certificates Read"; without it Cloudflare answers
    /// 403/10000 ([`CloudflareError::is_auth`]).
    pub async fn list_certificate_packs(
        &self,
        zone_id: &str,
    ) -> Result<Vec<CertificatePack>, CloudflareError> {
        let path = ["zones", zone_id, "ssl", "certificate_packs"];
        let query = vec![("status", "all".to_string())];
        self.fetch_all(
            "certificate_packs.list",
            &path,
            query,
            CERTIFICATE_PACKS_PER_PAGE,
        )
        .await
    }
}
