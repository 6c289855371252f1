use std::time::Duration;

use http::{Method, StatusCode};
use serde_json::json;

use super::*;
use crate::{Fault, Operation};

#[tokio::test]
async fn fail_next_counts_down_without_effect() {
    let sim = sim();
    sim.inject(Operation::CreateTunnel, Fault::fail_next(2, 503));
    let path = tunnels_path(&sim);
    for _ in 0..2 {
        let failed = call(&sim, Method::POST, &path, Some(json!({ "name": "a" }))).await;
        assert_eq!(
            (failed.status, failed.code()),
            (StatusCode::SERVICE_UNAVAILABLE, 10001)
        );
        assert_eq!(failed.result(), &serde_json::Value::Null);
    }
    assert!(sim.tunnels().is_empty());
    create_tunnel(&sim, "a").await;
    assert_eq!(
        (sim.calls(Operation::CreateTunnel), sim.tunnels().len()),
        (3, 1)
    );
}

#[tokio::test]
async fn fail_after_apply_commits_then_errors() {
    let sim = sim();
    sim.inject(Operation::CreateTunnel, Fault::fail_after_apply(1, 504));
    let path = tunnels_path(&sim);
    let lost = call(&sim, Method::POST, &path, Some(json!({ "name": "a" }))).await;
    assert_eq!(
        (lost.status, lost.code()),
        (StatusCode::GATEWAY_TIMEOUT, 10001)
    );
    assert_eq!(sim.tunnels().len(), 1);
    let retry = call(&sim, Method::POST, &path, Some(json!({ "name": "a" }))).await;
    assert_eq!(retry.code(), 1013);
}

#[tokio::test]
async fn rate_limit_answers_429_971_with_retry_after() {
    let sim = sim();
    sim.inject(Operation::ListZones, Fault::rate_limit_next(1, 42));
    let limited = get(&sim, "/zones").await;
    assert_refused(
        &limited,
        StatusCode::TOO_MANY_REQUESTS,
        971,
        "Please wait and consider throttling your request speed",
    );
    assert_eq!(
        limited
            .headers
            .get("retry-after")
            .and_then(|v| v.to_str().ok()),
        Some("42")
    );
    let next = get(&sim, "/zones").await;
    assert_eq!(
        (next.status, next.headers.get("retry-after")),
        (StatusCode::OK, None)
    );
}

#[tokio::test]
async fn error_rate_one_always_fails_and_clear_faults_disarms() {
    let sim = sim();
    sim.seed_faults(3);
    sim.inject(Operation::ListZones, Fault::error_rate(1.0, 502));
    for _ in 0..3 {
        assert_eq!(get(&sim, "/zones").await.status, StatusCode::BAD_GATEWAY);
    }
    assert_eq!(get(&sim, "/accounts").await.status, StatusCode::OK);
    sim.clear_faults();
    assert_eq!(get(&sim, "/zones").await.status, StatusCode::OK);
}

#[tokio::test(start_paused = true)]
async fn latency_combines_with_errors_on_paused_time() {
    let sim = sim();
    sim.inject(
        Operation::ListZones,
        Fault::latency(Duration::from_secs(30)),
    );
    sim.inject(Operation::ListZones, Fault::fail_next(1, 500));
    let started = tokio::time::Instant::now();
    let answer = get(&sim, "/zones").await;
    assert_eq!(answer.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(started.elapsed() >= Duration::from_secs(30));
    let started = tokio::time::Instant::now();
    assert_eq!(get(&sim, "/zones").await.status, StatusCode::OK);
    assert!(started.elapsed() >= Duration::from_secs(30));
}

#[tokio::test]
async fn counters_and_log_record_every_request_without_credentials() {
    let sim = sim();
    let id = create_tunnel(&sim, "logged").await;
    send_raw(
        &sim,
        Method::GET,
        "/zones",
        &[("authorization", "Bearer wrong-secret-token")],
        None,
    )
    .await;
    sim.inject(Operation::GetTunnel, Fault::fail_next(1, 500));
    get(&sim, &format!("{}/{id}?x=1", tunnels_path(&sim))).await;
    get(&sim, "/nowhere").await;
    assert_eq!(
        (
            sim.calls(Operation::CreateTunnel),
            sim.calls(Operation::ListZones),
            sim.calls(Operation::GetTunnel),
            sim.total_calls()
        ),
        (1, 1, 1, 4)
    );
    let log = sim.request_log();
    let summary: Vec<(Option<Operation>, &str, u16)> = log
        .iter()
        .map(|l| (l.operation, l.method.as_str(), l.status))
        .collect();
    assert_eq!(
        summary,
        vec![
            (Some(Operation::CreateTunnel), "POST", 200),
            (Some(Operation::ListZones), "GET", 403),
            (Some(Operation::GetTunnel), "GET", 500),
            (None, "GET", 404),
        ]
    );
    assert_eq!(log[0].request_body, Some(json!({ "name": "logged" })));
    assert_eq!(log[0].path, tunnels_path(&sim));
    assert_eq!(
        (
            log[2].query.as_str(),
            log[2].response_body["errors"][0]["code"].clone()
        ),
        ("x=1", json!(10001))
    );
    let dump = format!("{log:?}");
    assert!(!dump.contains(TOKEN) && !dump.contains("wrong-secret-token"));
    sim.reset_counters();
    assert_eq!(
        (
            sim.total_calls(),
            sim.calls(Operation::CreateTunnel),
            sim.request_log().len()
        ),
        (0, 0, 0)
    );
}
