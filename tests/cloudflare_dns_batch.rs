//! The simulator's DNS batch call: Cloudflare's order (deletes, patches, puts, posts), all or
//! nothing, the plan's size limit, the single calls' record rules; every request and answer,
//! refusals included, validates against the batch schema (`tests/data/cloudflare-dns-batch.json`).
#[allow(dead_code)] // the contract test uses the rest of it
mod openapi;

use cftunnel_sim::{Operation, SimConfig, Simulator};
use http::{Method, Request};
use openapi::OpenApi;
use serde_json::{Value, json};
use tower::ServiceExt;

const TOKEN: &str = "batch-token";
const ZONE: &str = "example.com";
const OP_ID: &str = "dns-records-for-a-zone-batch-dns-records";

fn simulator() -> Simulator {
    Simulator::new(SimConfig {
        zones: vec![ZONE.into()],
        tokens: vec![TOKEN.into()],
        ..SimConfig::default()
    })
}

/// Sends one batch body; returns (status, answer).
async fn batch(sim: &Simulator, body: &Value) -> (u16, Value) {
    let zone = sim.zone_id(ZONE).expect("zone");
    let request = Request::builder()
        .method(Method::POST)
        .uri(format!("/zones/{zone}/dns_records/batch"))
        .header("authorization", format!("Bearer {TOKEN}"))
        .header("content-type", "application/json")
        .body(axum::body::Body::from(body.to_string()))
        .expect("request");
    let answer = sim.router().oneshot(request).await.expect("router answers");
    let status = answer.status().as_u16();
    let bytes = axum::body::to_bytes(answer.into_body(), 1 << 24)
        .await
        .expect("body");
    (status, serde_json::from_slice(&bytes).expect("JSON answer"))
}

fn cname(name: &str) -> Value {
    json!({"type": "CNAME", "name": name, "content": "t.cfargotunnel.com", "ttl": 1, "proxied": true})
}

fn txt(name: &str, content: &str) -> Value {
    json!({"type": "TXT", "name": name, "content": content, "ttl": 1})
}

/// (type, name, content) of the zone's records, in creation order.
fn zone_records(sim: &Simulator) -> Vec<(String, String, String)> {
    sim.dns_records(ZONE)
        .into_iter()
        .map(|r| (r.record_type, r.name, r.content))
        .collect()
}

fn check_log(sim: &Simulator) {
    let api = OpenApi::load();
    let log = sim.request_log();
    assert!(!log.is_empty());
    for entry in log {
        assert_eq!(entry.operation, Some(Operation::BatchDnsRecords));
        // Refused requests may be ones the schema forbids too (an over-long name).
        if entry.status == 200 {
            api.validate_request(OP_ID, entry.request_body.as_ref())
                .unwrap_or_else(|e| panic!("request: {e}"));
        }
        api.validate_response(OP_ID, entry.status, &entry.response_body)
            .unwrap_or_else(|e| panic!("{}: {e}\n{}", entry.status, entry.response_body));
    }
}

#[tokio::test]
async fn a_batch_runs_deletes_patches_puts_then_posts_and_answers_every_record() {
    let sim = simulator();
    let old = sim
        .insert_dns_record(ZONE, cname("a.example.com"))
        .expect("seed");
    let patched = sim
        .insert_dns_record(ZONE, txt("_managed.b.example.com", "\"old\""))
        .expect("seed");
    let put = sim
        .insert_dns_record(
            ZONE,
            json!({"type": "A", "name": "c.example.com", "content": "192.0.2.1", "comment": "x"}),
        )
        .expect("seed");
    // The post re-creates the deleted name: only legal because deletes run first.
    let (status, answer) = batch(
        &sim,
        &json!({
            "posts": [cname("a.example.com"), txt("_managed.a.example.com", "\"new\"")],
            "puts": [{"id": put, "type": "A", "name": "c.example.com", "content": "192.0.2.2"}],
            "patches": [{"id": patched, "type": "TXT", "name": "_managed.b.example.com", "content": "\"patched\""}],
            "deletes": [{"id": old}],
        }),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    let result = &answer["result"];
    assert_eq!(result["deletes"][0]["id"], json!(old));
    assert_eq!(result["patches"][0]["content"], json!("\"patched\""));
    assert_eq!(result["puts"][0]["content"], json!("192.0.2.2"));
    assert!(
        result["puts"][0].get("comment").is_none(),
        "a put resets the comment"
    );
    assert_eq!(result["posts"].as_array().map(Vec::len), Some(2));
    assert_ne!(result["posts"][0]["id"], json!(old), "a new record id");
    assert_eq!(
        zone_records(&sim),
        vec![
            (
                "TXT".into(),
                "_managed.b.example.com".into(),
                "\"patched\"".into()
            ),
            ("A".into(), "c.example.com".into(), "192.0.2.2".into()),
            (
                "CNAME".into(),
                "a.example.com".into(),
                "t.cfargotunnel.com".into()
            ),
            (
                "TXT".into(),
                "_managed.a.example.com".into(),
                "\"new\"".into()
            ),
        ]
    );
    check_log(&sim);
}

#[tokio::test]
async fn a_failing_action_leaves_the_zone_exactly_as_it_was_and_names_the_first_error() {
    let sim = simulator();
    let a = sim
        .insert_dns_record(
            ZONE,
            json!({"type": "A", "name": "x.example.com", "content": "192.0.2.1"}),
        )
        .expect("seed");
    let before = sim.dns_records(ZONE);
    let cases: Vec<(Value, u16, u32, &str)> = vec![
        // CNAME exclusivity: the third post collides with the A record.
        (
            json!({"deletes": [], "posts": [cname("ok.example.com"), txt("_managed.ok.example.com", "\"v\""), cname("x.example.com")]}),
            400,
            81053,
            "posts[2]: An A, AAAA, or CNAME record with that host already exists.",
        ),
        // Identical records inside one batch.
        (
            json!({"posts": [txt("t.example.com", "\"v\""), txt("t.example.com", "\"v\"")]}),
            400,
            81058,
            "posts[1]: An identical record already exists.",
        ),
        // A record id that does not exist.
        (
            json!({"deletes": [{"id": a}, {"id": "0".repeat(32)}]}),
            404,
            81044,
            "deletes[1]: Record does not exist.",
        ),
        // Name and content limits of the single calls.
        (
            json!({"posts": [cname(&format!("{}.example.com", "a".repeat(250)))]}),
            400,
            1004,
            "posts[0]: DNS Validation Error",
        ),
        (
            json!({"posts": [json!({"type": "CNAME", "name": "self.example.com", "content": "self.example.com"})]}),
            400,
            1004,
            "posts[0]: DNS Validation Error",
        ),
        (json!({}), 400, 1004, "DNS Validation Error"),
    ];
    for (body, status, code, message) in cases {
        let (got, answer) = batch(&sim, &body).await;
        assert_eq!(got, status, "{body}: {answer}");
        assert_eq!(answer["success"], json!(false));
        assert_eq!(answer["errors"][0]["code"], json!(code), "{answer}");
        assert_eq!(answer["errors"][0]["message"], json!(message), "{answer}");
        assert_eq!(
            sim.dns_records(ZONE),
            before,
            "nothing applied after {body}"
        );
    }
    check_log(&sim);
}

#[tokio::test]
async fn the_size_limit_is_the_zone_plans_200_on_free_and_3500_on_paid_plans() {
    let sim = simulator();
    let posts = |n: usize| -> Value {
        json!({"posts": (0..n).map(|i| txt(&format!("r{i}.example.com"), "\"v\"")).collect::<Vec<_>>()})
    };
    let (status, answer) = batch(&sim, &posts(201)).await;
    assert_eq!(status, 400);
    assert_eq!(
        answer["errors"][0]["error_chain"][0]["message"],
        json!("a batch may change at most 200 records on this zone's plan, got 201")
    );
    assert!(sim.dns_records(ZONE).is_empty());
    let (status, _) = batch(&sim, &posts(200)).await;
    assert_eq!(status, 200);
    assert_eq!(sim.dns_records(ZONE).len(), 200);

    let paid = simulator();
    assert!(paid.set_zone_plan(ZONE, "business"));
    let (status, answer) = batch(&paid, &posts(3_501)).await;
    assert_eq!(status, 400);
    assert_eq!(
        answer["errors"][0]["error_chain"][0]["message"],
        json!("a batch may change at most 3500 records on this zone's plan, got 3501")
    );
    let (status, _) = batch(&paid, &posts(3_500)).await;
    assert_eq!(status, 200);
    assert_eq!(paid.dns_records(ZONE).len(), 3_500);
    check_log(&sim);
}

#[test]
fn the_batch_schema_refuses_what_the_sdk_types_forbid() {
    let api = OpenApi::load();
    let ok = json!({"deletes": [{"id": "0123456789abcdef0123456789abcdef"}], "posts": [cname("a.example.com")]});
    assert_eq!(api.validate_request(OP_ID, Some(&ok)), Ok(()));
    let delete_without_id = json!({"deletes": [{}]});
    assert!(
        api.validate_request(OP_ID, Some(&delete_without_id))
            .is_err()
    );
    let patch_without_id = json!({"patches": [cname("a.example.com")]});
    assert!(
        api.validate_request(OP_ID, Some(&patch_without_id))
            .is_err()
    );
    let unknown_list = json!({"creates": []});
    assert!(api.validate_request(OP_ID, Some(&unknown_list)).is_err());
    let answer_without_result = json!({"success": true, "errors": [], "messages": []});
    assert!(
        api.validate_response(OP_ID, 200, &answer_without_result)
            .is_err()
    );
}
