//! Zone record quotas and the DNS batch limit override.
use http::{Method, StatusCode};
use serde_json::{Value, json};

use super::*;

fn a_record(name: &str) -> Value {
    json!({ "type": "A", "name": name, "content": "192.0.2.1", "ttl": 1 })
}

async fn batch(sim: &Simulator, zone: &str, body: Value) -> Answer {
    let path = format!("{}/batch", records_path(sim, zone));
    call(sim, Method::POST, &path, Some(body)).await
}

fn names(sim: &Simulator, zone: &str) -> Vec<String> {
    sim.dns_records(zone).into_iter().map(|r| r.name).collect()
}

#[tokio::test]
async fn a_create_over_the_zones_quota_is_refused_with_81045() {
    let sim = sim();
    assert!(sim.set_zone_record_quota("example.com", Some(2)));
    create_record(&sim, "example.com", a_record("a.example.com")).await;
    create_record(&sim, "example.com", a_record("b.example.com")).await;
    let path = records_path(&sim, "example.com");
    let over = call(&sim, Method::POST, &path, Some(a_record("c.example.com"))).await;
    assert_refused(
        &over,
        StatusCode::BAD_REQUEST,
        81045,
        "Record quota exceeded.",
    );
    assert_eq!(
        names(&sim, "example.com"),
        vec!["a.example.com", "b.example.com"]
    );
    create_record(&sim, "example.org", a_record("c.example.org")).await;
}

#[tokio::test]
async fn the_quota_of_an_unknown_zone_cannot_be_set() {
    assert!(!sim().set_zone_record_quota("example.net", Some(1)));
}

#[tokio::test]
async fn removing_the_quota_lets_creates_through_again() {
    let sim = sim();
    sim.set_zone_record_quota("example.com", Some(0));
    let path = records_path(&sim, "example.com");
    let refused = call(&sim, Method::POST, &path, Some(a_record("a.example.com"))).await;
    assert_eq!(refused.code(), 81045);
    sim.set_zone_record_quota("example.com", None);
    create_record(&sim, "example.com", a_record("a.example.com")).await;
}

#[tokio::test]
async fn the_configured_quota_applies_to_every_zone() {
    let sim = Simulator::new(SimConfig {
        zones: vec!["example.com".into(), "example.org".into()],
        tokens: vec![TOKEN.into()],
        zone_record_quota: Some(1),
        ..SimConfig::default()
    });
    for zone in ["example.com", "example.org"] {
        create_record(&sim, zone, a_record(&format!("a.{zone}"))).await;
        let path = records_path(&sim, zone);
        let over = call(
            &sim,
            Method::POST,
            &path,
            Some(a_record(&format!("b.{zone}"))),
        )
        .await;
        assert_eq!((over.status, over.code()), (StatusCode::BAD_REQUEST, 81045));
    }
}

#[tokio::test]
async fn a_batch_within_the_quota_after_its_deletes_passes() {
    let sim = sim();
    sim.set_zone_record_quota("example.com", Some(2));
    let a = create_record(&sim, "example.com", a_record("a.example.com")).await;
    create_record(&sim, "example.com", a_record("b.example.com")).await;
    let answer = batch(
        &sim,
        "example.com",
        json!({ "deletes": [{ "id": a }], "posts": [a_record("c.example.com")] }),
    )
    .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    assert_eq!(
        names(&sim, "example.com"),
        vec!["b.example.com", "c.example.com"]
    );
}

#[tokio::test]
async fn a_batch_whose_posts_go_over_the_quota_is_refused_whole() {
    let sim = sim();
    sim.set_zone_record_quota("example.com", Some(2));
    let a = create_record(&sim, "example.com", a_record("a.example.com")).await;
    create_record(&sim, "example.com", a_record("b.example.com")).await;
    let answer = batch(
        &sim,
        "example.com",
        json!({
            "deletes": [{ "id": a }],
            "posts": [a_record("c.example.com"), a_record("d.example.com")],
        }),
    )
    .await;
    assert_refused(
        &answer,
        StatusCode::BAD_REQUEST,
        81045,
        "posts[1]: Record quota exceeded.",
    );
    assert_eq!(
        names(&sim, "example.com"),
        vec!["a.example.com", "b.example.com"]
    );
}

#[tokio::test]
async fn the_batch_limit_override_applies_to_every_zone_until_cleared() {
    let sim = sim();
    sim.set_batch_limit(Some(2));
    let posts = |zone: &str| json!({ "posts": (0..3).map(|i| a_record(&format!("r{i}.{zone}"))).collect::<Vec<_>>() });
    for zone in ["example.com", "example.org"] {
        let refused = batch(&sim, zone, posts(zone)).await;
        assert_eq!(
            (refused.status, refused.code()),
            (StatusCode::BAD_REQUEST, 1004)
        );
        assert_eq!(
            refused.body["errors"][0]["error_chain"][0]["message"],
            "a batch may change at most 2 records on this zone's plan, got 3"
        );
    }
    sim.set_batch_limit(None);
    let passed = batch(&sim, "example.com", posts("example.com")).await;
    assert_eq!(passed.status, StatusCode::OK, "{}", passed.body);
    assert_eq!(sim.dns_records("example.com").len(), 3);
}

#[tokio::test]
async fn the_batch_limit_override_can_raise_the_free_plans_limit() {
    let sim = sim();
    sim.set_batch_limit(Some(250));
    let posts: Vec<Value> = (0..201)
        .map(|i| a_record(&format!("r{i}.example.com")))
        .collect();
    let passed = batch(&sim, "example.com", json!({ "posts": posts })).await;
    assert_eq!(passed.status, StatusCode::OK, "{}", passed.body);
    assert_eq!(sim.dns_records("example.com").len(), 201);
}
