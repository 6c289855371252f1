//! Edge certificate packs of a zone: the list (`GET /zones/{zone_id}/ssl/certificate_packs`).
use serde_json::{Value, json};

use super::Ctx;
use super::dns::zone;
use crate::certificate_state::{SimCertificatePack, VALIDITY_DAYS};
use crate::envelope::{ApiError, Reply};
use crate::state::{State, Zone};

/// Page size without `per_page`, and its bounds (the current API's: 5..=50, default 20).
const DEFAULT_PER_PAGE: u64 = 20;
const MIN_PER_PAGE: u64 = 5;
const MAX_PER_PAGE: u64 = 50;

/// Active packs only, or every pack with `status=all` (the only value the schema allows; any
/// other is refused with 400/1001). Unknown zone → 404/7003.
pub(super) fn list(state: &State, ctx: &Ctx) -> Result<Reply, ApiError> {
    let zone = zone(state, ctx)?;
    let every_status = match ctx.query.get("status") {
        None => false,
        Some(s) if s.eq_ignore_ascii_case("all") => true,
        Some(s) => {
            return Err(ApiError::invalid_request(format!(
                "`status` must be all, got {s:?}"
            )));
        }
    };
    let paging = ctx
        .query
        .paging(DEFAULT_PER_PAGE, MIN_PER_PAGE, MAX_PER_PAGE)?;
    let items = state
        .certificate_packs
        .get(&zone.id)
        .into_iter()
        .flatten()
        .filter(|p| every_status || p.status == "active")
        .map(|p| pack_json(p, zone))
        .collect();
    let (page, info) = paging.apply(items);
    Ok(Reply::list(page, info))
}

/// The certificate authority of the kinds Cloudflare orders itself; custom ones have none.
fn authority(kind: &str) -> Option<(&'static str, &'static str)> {
    match kind {
        "universal" => Some(("google", "GoogleTrustServices")),
        "advanced" | "total_tls" => Some(("lets_encrypt", "LetsEncrypt")),
        _ => None,
    }
}

/// A pack as the API lists it: its one certificate once issued, the order's CA, validation
/// method, validity and branding for the kinds Cloudflare orders.
fn pack_json(pack: &SimCertificatePack, zone: &Zone) -> Value {
    let mut json = json!({
        "id": pack.id,
        "type": pack.kind,
        "hosts": pack.hosts,
        "status": pack.status,
        "certificates": [],
    });
    let ca = authority(&pack.kind);
    if pack.issued() {
        let mut certificate = json!({
            "id": pack.certificate_id,
            "hosts": pack.hosts,
            "status": pack.status,
            "bundle_method": "ubiquitous",
            "signature": "ECDSAWithSHA256",
            "priority": 0,
            "zone_id": zone.id,
            "uploaded_on": pack.created_on,
            "modified_on": pack.modified_on,
            "expires_on": pack.expires_on,
        });
        if let Some((_, issuer)) = ca {
            certificate["issuer"] = json!(issuer);
        }
        json["certificates"] = json!([certificate]);
        json["primary_certificate"] = json!(pack.certificate_id);
    }
    if let Some((authority, _)) = ca {
        json["certificate_authority"] = json!(authority);
        json["validation_method"] = json!("txt");
        json["validity_days"] = json!(VALIDITY_DAYS);
        json["cloudflare_branding"] = json!(false);
    }
    json
}
