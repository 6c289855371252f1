//! Edge certificate packs: the Universal pack every zone starts with, the `status=all` filter,
//! packs added and moved by a test, paging, refusals.
use http::StatusCode;
use serde_json::{Value, json};

use super::*;
use crate::{Fault, Operation};

fn packs_path(sim: &Simulator, zone: &str) -> String {
    format!(
        "/zones/{}/ssl/certificate_packs",
        sim.zone_id(zone).expect("zone")
    )
}

/// `(type, hosts, status)` of every listed pack.
fn listed(answer: &Answer) -> Vec<(String, Vec<String>, String)> {
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    let items = answer.result().as_array().cloned().unwrap_or_default();
    items
        .iter()
        .map(|p| {
            let hosts = p["hosts"]
                .as_array()
                .expect("hosts")
                .iter()
                .map(|h| h.as_str().expect("host").to_string())
                .collect();
            (
                p["type"].as_str().expect("type").to_string(),
                hosts,
                p["status"].as_str().expect("status").to_string(),
            )
        })
        .collect()
}

fn pack(kind: &str, hosts: &[&str], status: &str) -> (String, Vec<String>, String) {
    (
        kind.to_string(),
        hosts.iter().map(|h| h.to_string()).collect(),
        status.to_string(),
    )
}

#[tokio::test]
async fn every_zone_starts_with_its_active_universal_pack() {
    let sim = sim();
    for zone in ["example.com", "example.org"] {
        let answer = get(&sim, &packs_path(&sim, zone)).await;
        let wildcard = format!("*.{zone}");
        assert_eq!(
            listed(&answer),
            [pack("universal", &[zone, &wildcard], "active")]
        );
        let universal = &answer.result()[0];
        let stored = sim.certificate_packs(zone);
        assert_eq!(stored.len(), 1);
        assert_eq!(universal["id"], stored[0].id.as_str());
        assert_eq!(universal["id"].as_str().map(str::len), Some(36));
        assert_eq!(universal["certificates"][0]["status"], "active");
        assert_eq!(
            universal["primary_certificate"],
            universal["certificates"][0]["id"]
        );
        assert_eq!(
            (
                universal["validation_method"].clone(),
                universal["validity_days"].clone(),
                universal["cloudflare_branding"].clone()
            ),
            (json!("txt"), json!(90), json!(false))
        );
        assert_eq!(
            answer.body["result_info"],
            json!({"page": 1, "per_page": 20, "count": 1, "total_count": 1, "total_pages": 1})
        );
    }
}

#[tokio::test]
async fn only_active_packs_are_listed_unless_status_all() {
    let sim = sim();
    let advanced = sim
        .add_certificate_pack(
            "Example.COM.",
            "advanced",
            &["example.com", "*.B.example.com."],
            "pending_validation",
        )
        .expect("added");
    let custom = sim
        .add_certificate_pack("example.com", "sni_custom", &["a.b.example.com"], "active")
        .expect("added");
    let path = packs_path(&sim, "example.com");
    let universal = pack("universal", &["example.com", "*.example.com"], "active");
    let pending = pack(
        "advanced",
        &["example.com", "*.b.example.com"],
        "pending_validation",
    );
    let sni = pack("sni_custom", &["a.b.example.com"], "active");

    let active = get(&sim, &path).await;
    assert_eq!(listed(&active), [universal.clone(), sni.clone()]);
    let all = get(&sim, &format!("{path}?status=all")).await;
    assert_eq!(
        listed(&all),
        [universal.clone(), pending.clone(), sni.clone()]
    );
    let order = &all.result()[1];
    assert_eq!(order["id"], advanced.as_str());
    assert_eq!(
        order["certificates"],
        json!([]),
        "not issued yet: no certificate"
    );
    assert!(order.get("primary_certificate").is_none());
    assert_eq!(order["certificate_authority"], "lets_encrypt");
    let uploaded = &all.result()[2];
    assert_eq!(uploaded["id"], custom.as_str());
    assert!(
        uploaded.get("certificate_authority").is_none(),
        "a custom certificate has no order"
    );

    assert!(sim.set_certificate_pack_status("example.com", &advanced, "active"));
    assert_eq!(
        listed(&get(&sim, &path).await),
        [
            universal,
            pack("advanced", &["example.com", "*.b.example.com"], "active"),
            sni
        ]
    );
    let stored: Vec<(String, String)> = sim
        .certificate_packs("example.com")
        .into_iter()
        .map(|p| (p.kind, p.status))
        .collect();
    assert_eq!(stored.len(), 3);
    assert_eq!(stored[1], ("advanced".to_string(), "active".to_string()));
    assert_eq!(
        listed(&get(&sim, &packs_path(&sim, "example.org")).await).len(),
        1,
        "another zone's packs are its own"
    );
}

#[tokio::test]
async fn controls_refuse_unknown_zones_packs_and_statuses() {
    let sim = sim();
    assert_eq!(
        sim.add_certificate_pack("example.net", "advanced", &["example.net"], "active"),
        None
    );
    assert_eq!(
        sim.add_certificate_pack("example.com", "advanced", &["example.com"], "issued"),
        None
    );
    assert_eq!(
        sim.add_certificate_pack("example.com", "advanced", &[], "active"),
        None
    );
    assert_eq!(
        sim.add_certificate_pack("example.com", " ", &["example.com"], "active"),
        None
    );
    let universal = sim.certificate_packs("example.com")[0].id.clone();
    assert!(!sim.set_certificate_pack_status("example.com", &universal, "gone"));
    assert!(!sim.set_certificate_pack_status("example.org", &universal, "expired"));
    assert!(!sim.set_certificate_pack_status("example.net", &universal, "expired"));
    assert!(!sim.set_certificate_pack_status("example.com", "nope", "expired"));
    assert!(sim.certificate_packs("example.net").is_empty());
    assert!(sim.set_certificate_pack_status("example.com", &universal, "expired"));
    let path = packs_path(&sim, "example.com");
    assert_eq!(
        listed(&get(&sim, &path).await),
        [],
        "an expired pack is not active"
    );
    let all = get(&sim, &format!("{path}?status=all")).await;
    assert_eq!(all.result()[0]["certificates"][0]["status"], "expired");
}

#[tokio::test]
async fn packs_are_paged_five_to_fifty_at_a_time() {
    let sim = sim();
    for i in 0..11 {
        let host = format!("h{i}.x.example.com");
        sim.add_certificate_pack("example.com", "advanced", &["example.com", &host], "active")
            .expect("added");
    }
    let path = packs_path(&sim, "example.com");
    let first = get(&sim, &format!("{path}?status=all&per_page=5")).await;
    assert_eq!(listed(&first).len(), 5);
    assert_eq!(
        first.body["result_info"],
        json!({"page": 1, "per_page": 5, "count": 5, "total_count": 12, "total_pages": 3})
    );
    let last = get(&sim, &format!("{path}?status=all&per_page=5&page=3")).await;
    let hosts: Vec<Value> = last
        .result()
        .as_array()
        .expect("list")
        .iter()
        .map(|p| p["hosts"][1].clone())
        .collect();
    assert_eq!(
        hosts,
        [json!("h9.x.example.com"), json!("h10.x.example.com")]
    );
    let clamped = get(&sim, &format!("{path}?per_page=1")).await;
    assert_eq!(clamped.body["result_info"]["per_page"], 5, "at least 5");
    let clamped = get(&sim, &format!("{path}?per_page=500")).await;
    assert_eq!(
        (
            clamped.body["result_info"]["per_page"].clone(),
            listed(&clamped).len()
        ),
        (json!(50), 12)
    );
    let beyond = get(&sim, &format!("{path}?page=9")).await;
    assert_eq!(listed(&beyond), []);
    assert_eq!(sim.calls(Operation::ListCertificatePacks), 5);
}

#[tokio::test]
async fn refusals_unknown_zone_bad_status_and_faults() {
    let sim = sim();
    let unknown = get(
        &sim,
        "/zones/0123456789abcdef0123456789abcdef/ssl/certificate_packs",
    )
    .await;
    assert_refused(
        &unknown,
        StatusCode::NOT_FOUND,
        7003,
        "Could not route to /zones/0123456789abcdef0123456789abcdef/ssl/certificate_packs, \
         perhaps your object identifier is invalid?",
    );
    let path = packs_path(&sim, "example.com");
    let bad = get(&sim, &format!("{path}?status=pending")).await;
    assert_eq!((bad.status, bad.code()), (StatusCode::BAD_REQUEST, 1001));
    let bad = get(&sim, &format!("{path}?page=x")).await;
    assert_eq!((bad.status, bad.code()), (StatusCode::BAD_REQUEST, 1001));
    let anonymous = send_raw(&sim, http::Method::GET, &path, &[], None).await;
    assert_eq!(
        (anonymous.status, anonymous.code()),
        (StatusCode::UNAUTHORIZED, 10000)
    );
    // A token without "SSL and Certificates Read" is a fault: 403/10000.
    sim.inject(Operation::ListCertificatePacks, Fault::fail_next(1, 403));
    let denied = get(&sim, &path).await;
    assert_eq!(
        (denied.status, denied.code()),
        (StatusCode::FORBIDDEN, 10000)
    );
    assert_eq!(get(&sim, &path).await.status, StatusCode::OK);
    let log = sim.request_log();
    assert!(
        log.iter()
            .all(|l| l.operation == Some(Operation::ListCertificatePacks)),
        "{log:?}"
    );
}

#[test]
fn the_certificate_operation_is_a_read_of_its_own_subset() {
    let certificates: Vec<Operation> = Operation::ALL
        .into_iter()
        .filter(Operation::is_certificates)
        .collect();
    assert_eq!(certificates, [Operation::ListCertificatePacks]);
    let op = Operation::ListCertificatePacks;
    assert_eq!(op.method(), http::Method::GET);
    assert_eq!(op.path_template(), "/zones/{zone_id}/ssl/certificate_packs");
    assert_eq!(
        op.operation_id(),
        Some("certificate-packs-list-certificate-packs")
    );
    assert!(!op.is_access());
    assert!(
        Operation::ALL
            .iter()
            .filter(|o| o.is_certificates())
            .count()
            == 1
    );
}
