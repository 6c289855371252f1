//! Path, query, pagination, decoding and errors of the certificate pack list.
use serde_json::json;

use super::*;
use crate::{CertificatePack, CloudflareError};

/// A pack as Cloudflare lists it, with fields the model ignores.
fn pack_json(i: u32) -> Value {
    let host = format!("h{i}.b.example.com");
    json!({
        "id": format!("3822ff90-ea29-44df-9e55-21300bb{i:05}"),
        "type": if i == 0 { "universal" } else { "advanced" },
        "hosts": ["example.com", host],
        "status": if i.is_multiple_of(2) { "active" } else { "pending_validation" },
        "certificates": [{"id": "7e7b8deba8538af625850b7b2530034c", "hosts": ["example.com"],
            "status": "active", "issuer": "LetsEncrypt", "expires_on": "2026-11-01T00:00:00Z"}],
        "primary_certificate": "7e7b8deba8538af625850b7b2530034c",
        "certificate_authority": "lets_encrypt", "validation_method": "txt",
        "validity_days": 90, "cloudflare_branding": false, "validation_records": [],
    })
}

#[tokio::test(start_paused = true)]
async fn the_list_asks_for_every_status_and_walks_every_page() {
    let total = 53;
    let (router, log) = fake(move |seen, _| {
        let query = seen.query.clone().unwrap_or_default();
        let page: u32 = if query.contains("page=2") { 2 } else { 1 };
        let first = (page - 1) * 50;
        let items = (first..total.min(first + 50)).map(pack_json).collect();
        ok_page(items, page, 50, total, Some(2))
    });
    let packs = client(router).list_certificate_packs(ZONE).await.unwrap();
    assert_eq!(packs.len(), 53);
    assert_eq!(
        packs[1],
        CertificatePack {
            id: "3822ff90-ea29-44df-9e55-21300bb00001".into(),
            kind: "advanced".into(),
            hosts: vec!["example.com".into(), "h1.b.example.com".into()],
            status: "pending_validation".into(),
        }
    );
    assert_eq!(packs[0].kind, "universal");
    let seen = log.all();
    let calls: Vec<(Method, String, Option<String>)> = seen
        .iter()
        .map(|s| (s.method.clone(), s.path.clone(), s.query.clone()))
        .collect();
    let path = format!("/zones/{ZONE}/ssl/certificate_packs");
    assert_eq!(
        calls,
        [
            (
                Method::GET,
                path.clone(),
                Some("status=all&page=1&per_page=50".into())
            ),
            (
                Method::GET,
                path,
                Some("status=all&page=2&per_page=50".into())
            ),
        ]
    );
    assert!(seen.iter().all(|s| s.body.is_empty()));
}

#[tokio::test(start_paused = true)]
async fn a_short_first_page_is_the_only_one() {
    // The 2024 API pages nothing: one answer, fewer items than asked for, maybe no total_pages.
    let (router, log) = fake(|_, _| ok_page(vec![pack_json(0)], 1, 20, 1, None));
    let packs = client(router).list_certificate_packs(ZONE).await.unwrap();
    assert_eq!(packs.len(), 1);
    assert_eq!(log.count(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_token_without_ssl_read_is_an_auth_error() {
    let (router, log) = fake(|_, _| fail(403, 10000, "Authentication error"));
    let err = client(router)
        .list_certificate_packs(ZONE)
        .await
        .unwrap_err();
    assert!(err.is_auth(), "{err}");
    assert!(matches!(err, CloudflareError::Api { status: 403, .. }));
    assert_eq!(log.count(), 1, "not retried");
}

#[tokio::test(start_paused = true)]
async fn a_pack_without_a_required_field_is_a_decode_error() {
    let (router, _) = fake(|_, _| {
        ok_page(
            vec![json!({"id": "x", "hosts": [], "status": "active"})],
            1,
            50,
            1,
            Some(1),
        )
    });
    let err = client(router)
        .list_certificate_packs(ZONE)
        .await
        .unwrap_err();
    assert!(matches!(err, CloudflareError::Decode { .. }), "{err}");
}
