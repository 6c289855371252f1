//! Contract between the Cloudflare client, the simulator and Cloudflare's edge certificates
//! subset: the certificate pack list is round-tripped client → simulator, and every request the
//! client sends and every answer the simulator gives, refusals included, validates against the
//! subset (`tests/data/cloudflare-openapi-certificates-subset.json`).
#[allow(dead_code)] // the DNS and tunnel contract test uses the rest of it
mod openapi;

use std::collections::BTreeSet;

use axum::body::Body;
use cftunnel_cloudflare::{
    CERTIFICATE_PACKS_PER_PAGE, CertificatePack, CloudflareClient, Credentials, RateLimit,
    Transport,
};
use cftunnel_sim::{Fault, LoggedRequest, Operation, SimConfig, Simulator};
use http::{Method, Request};
use openapi::OpenApi;
use serde_json::{Value, json};
use tower::ServiceExt;

const TOKEN: &str = "certificates-contract-token";
const SUBSET: &str = include_str!("data/cloudflare-openapi-certificates-subset.json");
const PACK_SCHEMA: &str = "#/components/schemas/tls-certificates-and-hostnames_certificate-pack";

fn simulator() -> Simulator {
    Simulator::new(SimConfig {
        account_name: "Certificates contract".into(),
        zones: vec!["example.com".into(), "example.org".into()],
        tokens: vec![TOKEN.into()],
        ..SimConfig::default()
    })
}

fn client(sim: &Simulator) -> CloudflareClient {
    CloudflareClient::builder(Credentials::ApiToken(TOKEN.into()))
        .transport(Transport::InProcess(sim.router()))
        .rate_limit(RateLimit {
            per_second: 1000,
            burst: 1000,
        })
        .max_attempts(1)
        .build()
        .expect("client")
}

/// The operation of a logged certificate call and its `operationId`.
fn operation_of(entry: &LoggedRequest) -> (Operation, &'static str) {
    let op = entry
        .operation
        .unwrap_or_else(|| panic!("no route for {} {}", entry.method, entry.path));
    assert!(op.is_certificates(), "{op:?} is not a certificate call");
    (
        op,
        op.operation_id()
            .expect("every certificate call is in the subset"),
    )
}

/// Validates every logged request (body, query names, the `status` value the schema's enum
/// allows) and answer; returns the operations seen.
fn check_log(api: &OpenApi, log: &[LoggedRequest]) -> BTreeSet<Operation> {
    let mut seen = BTreeSet::new();
    for entry in log {
        let (op, op_id) = operation_of(entry);
        api.validate_request(op_id, entry.request_body.as_ref())
            .unwrap_or_else(|e| panic!("{} {}: {e}", entry.method, entry.path));
        api.validate_query(op_id, &entry.query)
            .unwrap_or_else(|e| panic!("{} {}: {e}", entry.method, entry.path));
        for (key, value) in url::form_urlencoded::parse(entry.query.as_bytes()) {
            if key == "status" {
                assert_eq!(value, "all", "{} {}", entry.path, entry.query);
            }
        }
        api.check_response(op_id, entry);
        seen.insert(op);
    }
    seen
}

/// Validates every logged answer (for requests sent malformed on purpose).
fn check_answers(api: &OpenApi, log: &[LoggedRequest]) {
    for entry in log {
        api.check_response(operation_of(entry).1, entry);
    }
}

fn certificate_operations() -> BTreeSet<Operation> {
    Operation::ALL
        .into_iter()
        .filter(Operation::is_certificates)
        .collect()
}

/// `(type, hosts, status)`, the fields the preflight reads.
fn summary(packs: &[CertificatePack]) -> Vec<(String, Vec<String>, String)> {
    packs
        .iter()
        .map(|p| (p.kind.clone(), p.hosts.clone(), p.status.clone()))
        .collect()
}

#[test]
fn the_certificate_operations_are_exactly_those_of_the_subset_the_simulator_serves() {
    let spec: Value = serde_json::from_str(SUBSET).expect("subset");
    let in_subset: BTreeSet<String> = spec["paths"]
        .as_object()
        .expect("paths")
        .values()
        .flat_map(|item| item.as_object().expect("path item").values())
        .filter_map(|op| op["operationId"].as_str().map(str::to_string))
        .collect();
    assert_eq!(in_subset.len(), 4);
    let served: BTreeSet<String> = Operation::ALL
        .into_iter()
        .filter_map(|op| op.operation_id())
        .filter(|id| in_subset.contains(*id))
        .map(str::to_string)
        .collect();
    let certificates: BTreeSet<String> = certificate_operations()
        .iter()
        .map(|op| op.operation_id().expect("operation id").to_string())
        .collect();
    assert_eq!(served, certificates);
    assert_eq!(
        certificates,
        BTreeSet::from(["certificate-packs-list-certificate-packs".to_string()])
    );
    let api = OpenApi::load_certificates();
    for id in &in_subset {
        assert!(api.has_operation(id), "{id}");
    }
}

#[tokio::test]
async fn the_pack_list_round_trips_every_page_and_validates() {
    let sim = simulator();
    let cf = client(&sim);
    let zone = sim.zone_id("example.com").expect("zone");

    let advanced = sim
        .add_certificate_pack(
            "example.com",
            "advanced",
            &["example.com", "*.b.example.com"],
            "active",
        )
        .expect("advanced pack");
    let pending = sim
        .add_certificate_pack(
            "example.com",
            "advanced",
            &["example.com", "a.c.example.com"],
            "pending_validation",
        )
        .expect("pending pack");
    sim.add_certificate_pack("example.com", "sni_custom", &["d.e.example.com"], "expired")
        .expect("custom pack");
    // Enough more packs for a second page of the client's 50.
    let per_page = CERTIFICATE_PACKS_PER_PAGE as usize;
    for i in 0..per_page {
        let host = format!("h{i}.f.example.com");
        sim.add_certificate_pack("example.com", "advanced", &["example.com", &host], "active")
            .expect("pack");
    }

    let packs = cf.list_certificate_packs(&zone).await.expect("list");
    let stored = sim.certificate_packs("example.com");
    assert_eq!(packs.len(), per_page + 4);
    assert_eq!(
        packs.iter().map(|p| p.id.as_str()).collect::<Vec<_>>(),
        stored.iter().map(|p| p.id.as_str()).collect::<Vec<_>>(),
        "every pack once, in order, of every status"
    );
    let head: Vec<(String, Vec<String>, String)> = summary(&packs[..4]);
    let expect = |kind: &str, hosts: &[&str], status: &str| {
        (
            kind.to_string(),
            hosts.iter().map(|h| h.to_string()).collect::<Vec<_>>(),
            status.to_string(),
        )
    };
    assert_eq!(
        head,
        [
            expect("universal", &["example.com", "*.example.com"], "active"),
            expect("advanced", &["example.com", "*.b.example.com"], "active"),
            expect(
                "advanced",
                &["example.com", "a.c.example.com"],
                "pending_validation"
            ),
            expect("sni_custom", &["d.e.example.com"], "expired"),
        ]
    );
    assert_eq!(
        (packs[1].id.as_str(), packs[2].id.as_str()),
        (&*advanced, &*pending)
    );
    let queries: Vec<String> = sim.request_log().iter().map(|l| l.query.clone()).collect();
    assert_eq!(
        queries,
        [
            "status=all&page=1&per_page=50",
            "status=all&page=2&per_page=50"
        ]
    );

    // The order is issued: the next read sees it active.
    assert!(sim.set_certificate_pack_status("example.com", &pending, "active"));
    let again = cf.list_certificate_packs(&zone).await.expect("list again");
    assert_eq!(again[2].status, "active");
    // Another zone has only its own Universal pack.
    let other = cf
        .list_certificate_packs(&sim.zone_id("example.org").expect("zone"))
        .await
        .expect("other zone");
    assert_eq!(
        summary(&other),
        [expect(
            "universal",
            &["example.org", "*.example.org"],
            "active"
        )]
    );

    let log = sim.request_log();
    assert_eq!(log.len(), 5);
    let api = OpenApi::load_certificates();
    assert_eq!(check_log(&api, &log), certificate_operations());
    // Each listed pack also holds to the pack schema on its own (not just as an array item).
    for entry in &log {
        for pack in entry.response_body["result"].as_array().expect("list") {
            api.check(&json!({ "$ref": PACK_SCHEMA }), pack)
                .unwrap_or_else(|e| panic!("{e}\n{pack}"));
        }
    }
}

async fn raw(sim: &Simulator, path: &str) {
    let request = Request::builder()
        .method(Method::GET)
        .uri(path)
        .header("authorization", format!("Bearer {TOKEN}"))
        .body(Body::empty())
        .expect("request");
    sim.router().oneshot(request).await.expect("router answers");
}

#[tokio::test]
async fn refusals_validate_against_the_certificates_subset() {
    let sim = simulator();
    let cf = client(&sim);
    let zone = sim.zone_id("example.com").expect("zone");

    let unknown = cf
        .list_certificate_packs("0123456789abcdef0123456789abcdef")
        .await
        .expect_err("unknown zone");
    assert!(unknown.is_not_found(), "{unknown}");

    // A token without "SSL and Certificates Read": 403/10000, "cannot check".
    sim.inject(Operation::ListCertificatePacks, Fault::fail_next(1, 403));
    let denied = cf.list_certificate_packs(&zone).await.expect_err("403");
    assert!(denied.is_auth() && !denied.is_transient(), "{denied}");

    let packs = format!("/zones/{zone}/ssl/certificate_packs");
    raw(&sim, &format!("{packs}?status=pending")).await; // 400, outside the enum
    raw(&sim, &format!("{packs}?page=first")).await; // 400
    sim.inject(
        Operation::ListCertificatePacks,
        Fault::rate_limit_next(1, 5),
    );
    raw(&sim, &packs).await; // 429
    sim.inject(Operation::ListCertificatePacks, Fault::fail_next(1, 503));
    let failed = cf.list_certificate_packs(&zone).await.expect_err("503");
    assert!(failed.is_transient(), "{failed}");
    let fine = cf.list_certificate_packs(&zone).await.expect("answered");
    assert_eq!(fine.len(), 1);

    let log = sim.request_log();
    let statuses: Vec<u16> = log.iter().map(|l| l.status).collect();
    assert_eq!(statuses, [404, 403, 400, 400, 429, 503, 200]);
    check_answers(&OpenApi::load_certificates(), &log);
}

#[test]
fn the_certificates_validator_catches_answers_the_schema_forbids() {
    // Guards the guard: the checks above would pass vacuously if validation accepted anything.
    let api = OpenApi::load_certificates();
    let list = "certificate-packs-list-certificate-packs";
    let answer = |pack: Value| {
        json!({"success": true, "errors": [], "messages": [], "result": [pack],
            "result_info": {"page": 1, "per_page": 50, "count": 1, "total_count": 1}})
    };
    let good = json!({"id": "p", "type": "advanced", "hosts": ["example.com"], "status": "active"});
    assert_eq!(api.validate_response(list, 200, &answer(good)), Ok(()));
    let untyped = json!({"id": "p", "hosts": ["example.com"], "status": "active"});
    assert!(api.validate_response(list, 200, &answer(untyped)).is_err());
    let unknown_status =
        json!({"id": "p", "type": "advanced", "hosts": ["example.com"], "status": "issued"});
    assert!(
        api.validate_response(list, 200, &answer(unknown_status))
            .is_err()
    );
    let bad_ca = json!({"id": "p", "type": "advanced", "hosts": ["example.com"],
        "status": "active", "certificate_authority": "digicert"});
    assert!(api.validate_response(list, 200, &answer(bad_ca)).is_err());
    let failure_with_result = json!({"success": false,
        "errors": [{"code": 7003, "message": "No route"}], "messages": [], "result": []});
    assert!(
        api.validate_response(list, 404, &failure_with_result)
            .is_err()
    );
    assert!(api.validate_query(list, "status=all").is_ok());
    assert!(
        api.validate_query(list, "status=all&page=2&per_page=50")
            .is_ok()
    );
    assert!(api.validate_query(list, "deploy=staging").is_err());
}
