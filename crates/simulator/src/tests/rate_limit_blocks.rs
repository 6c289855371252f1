//! Blocks after a 429, early calls and credential fingerprints, on a paused clock.
use std::time::Duration;

use http::{Method, StatusCode};
use serde_json::json;
use sha2::{Digest, Sha256};
use tokio::time::advance;

use super::*;
use crate::{Fault, Operation};

const MS: Duration = Duration::from_millis(1);

/// The first 12 hex characters of the SHA-256 of `input`.
fn short_sha(input: &str) -> String {
    let digest = Sha256::digest(input.as_bytes());
    digest.iter().take(6).map(|b| format!("{b:02x}")).collect()
}

#[tokio::test(start_paused = true)]
async fn early_calls_are_those_after_the_grace_while_the_block_is_in_force() {
    let sim = sim();
    sim.inject(Operation::ListZones, Fault::rate_limit_next(1, 10));
    let mut statuses = vec![get(&sim, "/zones").await.status.as_u16()];
    for wait in [50 * MS, 50 * MS, MS, 9_899 * MS] {
        advance(wait).await;
        statuses.push(get(&sim, "/zones").await.status.as_u16());
    }
    let log = sim.request_log();
    let timeline: Vec<(Duration, bool)> = log.iter().map(|l| (l.at, l.early)).collect();
    assert_eq!(statuses, vec![429, 200, 200, 200, 200]);
    assert_eq!(
        timeline,
        vec![
            (Duration::ZERO, false),
            (50 * MS, false),
            (100 * MS, false),
            (101 * MS, true),
            (10_000 * MS, false),
        ]
    );
    assert_eq!(sim.early_calls(), 1);
}

#[tokio::test(start_paused = true)]
async fn the_in_flight_grace_can_be_narrowed_or_widened() {
    let sim = sim();
    sim.set_in_flight_grace(Duration::ZERO);
    sim.inject(Operation::ListZones, Fault::rate_limit_next(1, 5));
    get(&sim, "/zones").await;
    advance(MS).await;
    get(&sim, "/zones").await;
    assert_eq!(sim.early_calls(), 1);
    sim.set_in_flight_grace(Duration::from_secs(2));
    advance(1_499 * MS).await;
    get(&sim, "/zones").await;
    advance(501 * MS).await;
    get(&sim, "/zones").await;
    let early: Vec<bool> = sim.request_log().iter().map(|l| l.early).collect();
    assert_eq!(early, vec![false, true, false, true]);
    assert_eq!(sim.early_calls(), 2);
}

#[tokio::test(start_paused = true)]
async fn with_blocks_enforced_the_credential_is_refused_until_retry_after_passes() {
    let sim = sim();
    sim.set_block_on_rate_limit(true);
    sim.inject(Operation::ListZones, Fault::rate_limit_next(1, 3));
    let first = get(&sim, "/zones").await;
    assert_eq!(header(&first, "retry-after"), Some("3"));
    advance(500 * MS).await;
    let path = tunnels_path(&sim);
    let write = call(&sim, Method::POST, &path, Some(json!({ "name": "t" }))).await;
    assert_refused(
        &write,
        StatusCode::TOO_MANY_REQUESTS,
        971,
        "Please wait and consider throttling your request speed",
    );
    assert_eq!(header(&write, "retry-after"), Some("3"));
    advance(1_700 * MS).await;
    let late = get(&sim, "/zones").await;
    assert_eq!(
        (late.status, header(&late, "retry-after")),
        (StatusCode::TOO_MANY_REQUESTS, Some("1"))
    );
    advance(800 * MS).await;
    assert_eq!(get(&sim, "/zones").await.status, StatusCode::OK);
    assert!(sim.tunnels().is_empty());
    assert_eq!(
        (
            sim.calls(Operation::CreateTunnel),
            sim.calls(Operation::ListZones)
        ),
        (1, 3)
    );
    let early: Vec<bool> = sim.request_log().iter().map(|l| l.early).collect();
    assert_eq!(early, vec![false, true, true, false]);
}

#[tokio::test(start_paused = true)]
async fn blocks_are_tracked_but_not_enforced_by_default() {
    let sim = sim();
    sim.inject(Operation::ListZones, Fault::rate_limit_next(1, 60));
    get(&sim, "/zones").await;
    advance(Duration::from_secs(1)).await;
    let during = get(&sim, "/zones").await;
    assert_eq!(
        (during.status, header(&during, "retry-after")),
        (StatusCode::OK, None)
    );
    assert_eq!(sim.early_calls(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_second_token_is_neither_blocked_nor_early_during_the_first_tokens_block() {
    let sim = two_token_sim();
    sim.set_block_on_rate_limit(true);
    sim.inject(Operation::ListZones, Fault::rate_limit_next(1, 30));
    get(&sim, "/zones").await;
    advance(Duration::from_secs(1)).await;
    let other = call_as(&sim, OTHER_TOKEN, Method::GET, "/zones", None).await;
    let blocked = get(&sim, "/zones").await;
    assert_eq!(
        (other.status, blocked.status),
        (StatusCode::OK, StatusCode::TOO_MANY_REQUESTS)
    );
    let early: Vec<bool> = sim.request_log().iter().map(|l| l.early).collect();
    assert_eq!(early, vec![false, false, true]);
}

#[tokio::test]
async fn the_log_names_each_credential_by_a_short_fingerprint_never_by_the_secret() {
    let sim = two_token_sim();
    get(&sim, "/zones").await;
    call_as(&sim, OTHER_TOKEN, Method::GET, "/zones", None).await;
    let key = |email: &'static str| [("x-auth-email", email), ("x-auth-key", "global-key")];
    send_raw(&sim, Method::GET, "/zones", &key("ops@example.com"), None).await;
    send_raw(&sim, Method::GET, "/zones", &key("OPS@example.com"), None).await;
    send_raw(&sim, Method::GET, "/zones", &[], None).await;
    call_as(&sim, "unknown-token", Method::GET, "/zones", None).await;
    let credentials: Vec<Option<String>> = sim
        .request_log()
        .into_iter()
        .map(|l| l.credential)
        .collect();
    let key_print = short_sha("key:ops@example.com:global-key");
    assert_eq!(
        credentials,
        vec![
            Some(short_sha(&format!("token:{TOKEN}"))),
            Some(short_sha(&format!("token:{OTHER_TOKEN}"))),
            Some(key_print.clone()),
            Some(key_print),
            None,
            Some(short_sha("token:unknown-token")),
        ]
    );
    let dump = format!("{:?}", sim.request_log());
    assert!(
        !dump.contains(TOKEN) && !dump.contains("global-key"),
        "{dump}"
    );
}
