//! Fault targets beyond one operation, their order, and the probabilistic fault kinds.
use std::collections::BTreeSet;
use std::time::Duration;

use http::{Method, StatusCode};
use serde_json::json;

use super::*;
use crate::{Fault, FaultTarget, Operation};

/// One request of each shape: reads and writes, several operations, an unmatched path.
async fn one_of_each(sim: &Simulator) -> Vec<u16> {
    let records = records_path(sim, "example.com");
    let record = json!({ "type": "A", "name": "a.example.com", "content": "192.0.2.1" });
    vec![
        get(sim, "/zones").await.status.as_u16(),
        get(sim, "/accounts").await.status.as_u16(),
        call(
            sim,
            Method::POST,
            &tunnels_path(sim),
            Some(json!({ "name": "t" })),
        )
        .await
        .status
        .as_u16(),
        get(sim, &records).await.status.as_u16(),
        call(sim, Method::POST, &records, Some(record))
            .await
            .status
            .as_u16(),
        get(sim, "/nowhere").await.status.as_u16(),
    ]
}

/// Indexes into [`one_of_each`] of the requests that got 503.
async fn faulted_by(target: FaultTarget) -> Vec<usize> {
    let sim = sim();
    sim.inject_on(target, Fault::error_rate(1.0, 503));
    let statuses = one_of_each(&sim).await;
    statuses
        .iter()
        .enumerate()
        .filter(|(_, status)| **status == 503)
        .map(|(i, _)| i)
        .collect()
}

#[tokio::test]
async fn without_faults_the_requests_of_each_shape_answer_as_usual() {
    assert_eq!(
        one_of_each(&sim()).await,
        vec![200, 200, 200, 200, 200, 404]
    );
}

#[tokio::test]
async fn each_target_faults_exactly_the_requests_it_names() {
    let path = |method: Option<Method>, contains: &str| FaultTarget::Path {
        method,
        contains: contains.to_string(),
    };
    let cases = [
        (FaultTarget::Operation(Operation::ListZones), vec![0]),
        (FaultTarget::All, vec![0, 1, 2, 3, 4, 5]),
        (FaultTarget::Writes, vec![2, 4]),
        (FaultTarget::Reads, vec![0, 1, 3, 5]),
        (path(None, "/dns_records"), vec![3, 4]),
        (path(Some(Method::POST), "/dns_records"), vec![4]),
        (path(Some(Method::GET), "/zones"), vec![0, 3]),
        (path(Some(Method::DELETE), "/zones"), vec![]),
        (path(None, "/cfd_tunnel"), vec![2]),
    ];
    for (target, expected) in cases {
        let label = format!("{target:?}");
        assert_eq!(faulted_by(target).await, expected, "{label}");
    }
}

#[tokio::test]
async fn the_operation_rule_is_judged_first_then_targeted_rules_in_the_order_armed() {
    let sim = sim();
    sim.inject_on(FaultTarget::All, Fault::fail_next(1, 502));
    sim.inject_on(FaultTarget::Reads, Fault::fail_next(1, 503));
    sim.inject(Operation::ListZones, Fault::fail_next(1, 500));
    let mut statuses = Vec::new();
    for _ in 0..4 {
        statuses.push(get(&sim, "/zones").await.status.as_u16());
    }
    assert_eq!(statuses, vec![500, 502, 503, 200]);
}

#[tokio::test]
async fn arming_a_target_again_adds_to_its_rule_which_keeps_its_place() {
    let sim = sim();
    sim.inject_on(FaultTarget::Reads, Fault::fail_next(1, 503));
    sim.inject_on(FaultTarget::All, Fault::fail_next(1, 502));
    sim.inject_on(FaultTarget::Reads, Fault::fail_next(1, 501));
    let mut statuses = Vec::new();
    for _ in 0..3 {
        statuses.push(get(&sim, "/zones").await.status.as_u16());
    }
    assert_eq!(statuses, vec![501, 502, 200]);
}

#[tokio::test]
async fn a_later_rules_rejection_wins_over_an_earlier_after_apply_fault_which_stays_armed() {
    let sim = sim();
    sim.inject_on(FaultTarget::All, Fault::fail_after_apply(1, 504));
    sim.inject_on(FaultTarget::Writes, Fault::fail_next(1, 503));
    let path = tunnels_path(&sim);
    let mut statuses = Vec::new();
    for name in ["a", "b", "c"] {
        let answer = call(&sim, Method::POST, &path, Some(json!({ "name": name }))).await;
        statuses.push(answer.status.as_u16());
    }
    let names: Vec<String> = sim.tunnels().into_iter().map(|t| t.name).collect();
    assert_eq!(statuses, vec![503, 504, 200]);
    assert_eq!(names, vec!["b".to_string(), "c".to_string()]);
}

#[tokio::test(start_paused = true)]
async fn latencies_of_every_matching_rule_add_up() {
    let sim = sim();
    sim.inject(
        Operation::ListZones,
        Fault::latency(Duration::from_secs(10)),
    );
    sim.inject_on(FaultTarget::All, Fault::latency(Duration::from_secs(5)));
    sim.inject_on(
        FaultTarget::Writes,
        Fault::latency(Duration::from_secs(100)),
    );
    get(&sim, "/zones").await;
    create_tunnel(&sim, "slow").await;
    let waits: Vec<Duration> = sim
        .request_log()
        .iter()
        .map(|l| l.answered_at - l.at)
        .collect();
    assert_eq!(
        waits,
        vec![Duration::from_secs(15), Duration::from_secs(105)]
    );
}

#[tokio::test]
async fn clear_faults_disarms_targeted_rules_too() {
    let sim = sim();
    sim.inject_on(FaultTarget::All, Fault::error_rate(1.0, 500));
    sim.inject(Operation::ListZones, Fault::error_rate(1.0, 502));
    assert_eq!(get(&sim, "/zones").await.status, StatusCode::BAD_GATEWAY);
    assert_eq!(
        get(&sim, "/accounts").await.status,
        StatusCode::INTERNAL_SERVER_ERROR
    );
    sim.clear_faults();
    assert_eq!(get(&sim, "/zones").await.status, StatusCode::OK);
    assert_eq!(get(&sim, "/accounts").await.status, StatusCode::OK);
}

/// Statuses of `n` GETs of `/zones` under `fault`, from a simulator seeded with `seed`.
async fn seeded_statuses(seed: u64, fault: Fault, n: usize) -> Vec<u16> {
    let sim = sim();
    sim.seed_faults(seed);
    sim.inject_on(FaultTarget::All, fault);
    let mut statuses = Vec::new();
    for _ in 0..n {
        statuses.push(get(&sim, "/zones").await.status.as_u16());
    }
    statuses
}

#[tokio::test]
async fn error_mix_draws_every_listed_status_and_nothing_else() {
    let fault = || Fault::error_mix(1.0, &[500, 502, 503]);
    let statuses = seeded_statuses(11, fault(), 60).await;
    let drawn: BTreeSet<u16> = statuses.iter().copied().collect();
    assert_eq!(drawn, BTreeSet::from([500, 502, 503]));
    assert_eq!(seeded_statuses(11, fault(), 60).await, statuses);
}

#[tokio::test]
async fn error_mix_at_half_probability_lets_some_calls_through_and_repeats_with_a_seed() {
    let fault = || Fault::error_mix(0.5, &[500, 503]);
    let statuses = seeded_statuses(5, fault(), 60).await;
    let drawn: BTreeSet<u16> = statuses.iter().copied().collect();
    assert_eq!(drawn, BTreeSet::from([200, 500, 503]));
    assert_eq!(seeded_statuses(5, fault(), 60).await, statuses);
}

#[tokio::test]
async fn error_mix_rejects_without_effect() {
    let sim = sim();
    sim.inject(Operation::CreateTunnel, Fault::error_mix(1.0, &[502]));
    let path = tunnels_path(&sim);
    let answer = call(&sim, Method::POST, &path, Some(json!({ "name": "x" }))).await;
    assert_eq!(
        (answer.status, answer.code()),
        (StatusCode::BAD_GATEWAY, 10001)
    );
    assert!(sim.tunnels().is_empty());
}

#[tokio::test]
async fn rate_limit_rate_answers_429_971_with_retry_after_at_the_drawn_calls() {
    let sim = sim();
    sim.seed_faults(9);
    sim.inject_on(FaultTarget::Reads, Fault::rate_limit_rate(0.5, 4));
    let mut seen = BTreeSet::new();
    for _ in 0..40 {
        let answer = get(&sim, "/zones").await;
        let retry_after = header(&answer, "retry-after").map(str::to_string);
        seen.insert((answer.status.as_u16(), answer.code(), retry_after));
    }
    assert_eq!(
        seen,
        BTreeSet::from([(200, 0, None), (429, 971, Some("4".to_string()))])
    );
    assert_eq!(
        seeded_statuses(9, Fault::rate_limit_rate(0.5, 4), 40).await,
        sim.request_log()
            .iter()
            .map(|l| l.status)
            .collect::<Vec<_>>()
    );
}
