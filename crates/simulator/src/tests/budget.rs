//! The request budget per credential: the sliding window, the block, the `Ratelimit` headers.
use std::time::Duration;

use http::{Method, StatusCode};
use tokio::time::advance;

use super::*;
use crate::{Fault, Operation, RequestBudget};

const SEC: Duration = Duration::from_secs(1);

fn budget(requests: u32, window_secs: u64, block_secs: u64) -> Option<RequestBudget> {
    Some(RequestBudget {
        requests,
        window: Duration::from_secs(window_secs),
        block: Duration::from_secs(block_secs),
    })
}

/// Status, `retry-after` and `Ratelimit` of one answer.
fn summary(answer: &Answer) -> (u16, Option<String>, Option<String>) {
    let text = |name| header(answer, name).map(str::to_string);
    (
        answer.status.as_u16(),
        text("retry-after"),
        text("ratelimit"),
    )
}

fn expect(
    status: u16,
    retry_after: Option<&str>,
    r: u32,
    t: u64,
) -> (u16, Option<String>, Option<String>) {
    (
        status,
        retry_after.map(str::to_string),
        Some(format!("\"default\";r={r};t={t}")),
    )
}

#[test]
fn the_default_budget_is_cloudflares_1200_requests_per_5_minutes_then_5_minutes_blocked() {
    assert_eq!(
        RequestBudget::default(),
        RequestBudget {
            requests: 1_200,
            window: Duration::from_secs(300),
            block: Duration::from_secs(300),
        }
    );
}

#[tokio::test(start_paused = true)]
async fn the_budget_refuses_the_request_over_it_blocks_for_the_block_time_then_recovers() {
    let sim = sim();
    sim.set_block_on_rate_limit(false);
    sim.set_budget(budget(3, 60, 120));
    let mut answers = Vec::new();
    for wait in [0, 10, 10, 10, 70, 50] {
        advance(wait * SEC).await;
        answers.push(summary(&get(&sim, "/zones").await));
    }
    assert_eq!(
        answers,
        vec![
            expect(200, None, 2, 60),
            expect(200, None, 1, 50),
            expect(200, None, 0, 40),
            expect(429, Some("120"), 0, 120),
            expect(429, Some("50"), 0, 50),
            expect(200, None, 2, 60),
        ]
    );
    assert_eq!(sim.budget_refusals(), 2);
    let early: Vec<bool> = sim.request_log().iter().map(|l| l.early).collect();
    assert_eq!(early, vec![false, false, false, false, true, false]);
}

#[tokio::test(start_paused = true)]
async fn a_budget_refusal_is_the_rate_limit_envelope_with_the_policy_header() {
    let sim = sim();
    sim.set_budget(budget(1, 30, 30));
    let accepted = get(&sim, "/zones").await;
    let refused = get(&sim, "/zones").await;
    assert_refused(
        &refused,
        StatusCode::TOO_MANY_REQUESTS,
        971,
        "Please wait and consider throttling your request speed",
    );
    for answer in [&accepted, &refused] {
        assert_eq!(
            header(answer, "ratelimit-policy"),
            Some("\"default\";q=1;w=30")
        );
    }
    assert_eq!(sim.calls(Operation::ListZones), 2);
}

#[tokio::test(start_paused = true)]
async fn the_window_slides_freeing_a_request_when_the_oldest_leaves_it() {
    let sim = sim();
    sim.set_budget(budget(3, 60, 60));
    let mut answers = Vec::new();
    for wait in [0, 30, 29, 1, 1] {
        advance(wait * SEC).await;
        answers.push(summary(&get(&sim, "/zones").await));
    }
    assert_eq!(
        answers,
        vec![
            expect(200, None, 2, 60),
            expect(200, None, 1, 30),
            expect(200, None, 0, 1),
            expect(200, None, 0, 30),
            expect(429, Some("60"), 0, 60),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_second_token_keeps_its_own_budget_while_the_first_is_blocked() {
    let sim = two_token_sim();
    sim.set_budget(budget(2, 60, 60));
    for _ in 0..3 {
        get(&sim, "/zones").await;
    }
    let other = call_as(&sim, OTHER_TOKEN, Method::GET, "/zones", None).await;
    let blocked = get(&sim, "/zones").await;
    assert_eq!(summary(&other), expect(200, None, 1, 60));
    assert_eq!(summary(&blocked), expect(429, Some("60"), 0, 60));
    assert_eq!(sim.budget_refusals(), 2);
}

#[tokio::test]
async fn failed_answers_carry_the_headers_and_count_in_the_window() {
    let sim = sim();
    sim.set_budget(budget(5, 60, 60));
    sim.inject(Operation::ListZones, Fault::fail_next(1, 500));
    let failed = get(&sim, "/zones").await;
    let next = get(&sim, "/zones").await;
    assert_eq!(summary(&failed), expect(500, None, 4, 60));
    assert_eq!(summary(&next), expect(200, None, 3, 60));
}

#[tokio::test]
async fn requests_without_valid_credentials_are_not_budgeted() {
    let sim = sim();
    sim.set_budget(budget(1, 60, 60));
    let mut statuses = Vec::new();
    for _ in 0..3 {
        let none = send_raw(&sim, Method::GET, "/zones", &[], None).await;
        let unknown = call_as(&sim, "not-a-token", Method::GET, "/zones", None).await;
        assert_eq!(
            (header(&none, "ratelimit"), header(&unknown, "ratelimit")),
            (None, None)
        );
        statuses.push((none.status.as_u16(), unknown.status.as_u16()));
    }
    assert_eq!(statuses, vec![(401, 403); 3]);
    assert_eq!(sim.budget_refusals(), 0);
    assert_eq!(
        summary(&get(&sim, "/zones").await),
        expect(200, None, 0, 60)
    );
}

#[tokio::test]
async fn removing_the_budget_lifts_its_block_and_its_headers() {
    let sim = sim();
    sim.set_budget(budget(1, 60, 600));
    get(&sim, "/zones").await;
    assert_eq!(
        get(&sim, "/zones").await.status,
        StatusCode::TOO_MANY_REQUESTS
    );
    sim.set_budget(None);
    let freed = get(&sim, "/zones").await;
    assert_eq!(summary(&freed), (200, None, None));
    assert_eq!(header(&freed, "ratelimit-policy"), None);
}

#[tokio::test]
async fn a_budget_in_the_config_applies_from_the_first_request() {
    let sim = Simulator::new(SimConfig {
        tokens: vec![TOKEN.into()],
        budget: budget(10, 300, 300),
        ..SimConfig::default()
    });
    assert_eq!(sim.budget(), budget(10, 300, 300));
    let answer = get(&sim, "/zones").await;
    assert_eq!(summary(&answer), expect(200, None, 9, 300));
    assert_eq!(
        header(&answer, "ratelimit-policy"),
        Some("\"default\";q=10;w=300")
    );
}

#[tokio::test]
async fn reset_counters_zeroes_refusals_and_early_calls_but_keeps_the_block() {
    let sim = sim();
    sim.set_budget(budget(1, 60, 60));
    sim.set_in_flight_grace(Duration::ZERO);
    get(&sim, "/zones").await;
    get(&sim, "/zones").await;
    tokio::time::sleep(Duration::from_millis(2)).await;
    get(&sim, "/zones").await;
    assert_eq!((sim.budget_refusals(), sim.early_calls()), (2, 1));
    sim.reset_counters();
    assert_eq!((sim.budget_refusals(), sim.early_calls()), (0, 0));
    assert_eq!(
        get(&sim, "/zones").await.status,
        StatusCode::TOO_MANY_REQUESTS
    );
}

#[tokio::test]
async fn without_its_headers_the_budget_still_refuses() {
    let sim = sim();
    sim.set_budget(budget(1, 60, 600));
    sim.set_budget_headers(false);
    let first = get(&sim, "/zones").await;
    assert_eq!(summary(&first), (200, None, None));
    assert_eq!(header(&first, "ratelimit-policy"), None);
    let refused = get(&sim, "/zones").await;
    assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(header(&refused, "ratelimit"), None);
    sim.set_budget_headers(true);
    assert!(header(&get(&sim, "/zones").await, "ratelimit").is_some());
}
