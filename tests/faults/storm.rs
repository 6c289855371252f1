//! A 5xx and 429 storm while tunnels and bindings are created: everything converges once it
//! ends, with no duplicate tunnel, no extra record, and no call of the credential sent while
//! a `retry-after` it was given had not ended.
use std::time::{Duration, Instant};

use cftunnel_sim::{Fault, FaultTarget};

use super::harness::{
    Cloudflare, Operator, Workload, apply_workload, converged, operator_user, plane, wait_converged,
};

const WORKLOAD: Workload = Workload {
    tunnels: 20,
    routes: 3,
};
/// How long the storm lasts once the objects exist.
const STORM: Duration = Duration::from_secs(90);
/// What a 429 asks the client to wait.
const RETRY_AFTER_SECS: u64 = 3;

async fn storm(prefix: &str, faulty: bool) {
    let plane = plane().await;
    let admin = plane.admin_client().expect("admin");
    let ns = plane.create_namespace(prefix).await.expect("namespace");
    let cf = Cloudflare::start();
    if faulty {
        // One rule for every request: 10 % answered 429, and of the others 4 in 9 a 5xx, so
        // that 40 % of all requests fail with 500, 502 or 503.
        cf.sim.seed_faults(25);
        cf.sim.inject_on(
            FaultTarget::All,
            Fault::rate_limit_rate(0.1, RETRY_AFTER_SECS),
        );
        cf.sim.inject_on(
            FaultTarget::All,
            Fault::error_mix(0.4 / 0.9, &[500, 502, 503]),
        );
    }
    let user = operator_user(plane);
    let mut operator = Operator::start(
        plane,
        user.kubeconfig(),
        &ns,
        &cf,
        prefix,
        &["--leader-elect=false"],
    );
    apply_workload(&admin, &ns, &cf.sim.account_id(), WORKLOAD).await;
    let started = Instant::now();
    // Whether, and when, everything converged while the storm still raged.
    let mut during = None;
    if faulty {
        while started.elapsed() < STORM {
            if during.is_none() && converged(&admin, &ns, &cf, WORKLOAD).await {
                during = Some(started.elapsed());
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        cf.sim.clear_faults();
    }
    let calm = Instant::now();
    wait_converged(&admin, &ns, &cf, WORKLOAD).await;
    let after = calm.elapsed();
    assert!(operator.is_running(), "{}", operator.log());
    assert_eq!(
        cf.sim.early_calls(),
        0,
        "calls sent before a retry-after ended"
    );
    let (limited, failed) = (
        cf.answered(429),
        cf.answered(500) + cf.answered(502) + cf.answered(503),
    );
    let retries = operator.counter("cftunnel_cloudflare_retries_total").await;
    let paused = operator
        .counter("cftunnel_cloudflare_ratelimit_paused_seconds_total")
        .await;
    let when = match during {
        Some(at) => format!(
            "during the storm, {:.1}s after the objects were created",
            at.as_secs_f64()
        ),
        None => format!("{:.1}s after the faults stopped", after.as_secs_f64()),
    };
    println!(
        "storm {prefix}: {} tunnels, {} routes; faults for {:.0}s; converged {when}; {} Cloudflare requests: {failed} answered 5xx, {limited} answered 429; {retries} retries; {paused}s paused by 429s; 0 early calls",
        WORKLOAD.tunnels,
        WORKLOAD.tunnels * WORKLOAD.routes,
        calm.saturating_duration_since(started).as_secs_f64(),
        cf.sim.total_calls(),
    );
    if faulty {
        assert!(
            limited > 0 && failed > 0,
            "the storm was served: {limited} 429s, {failed} 5xx"
        );
        assert!(retries > 0.0, "the client retried");
    } else {
        assert_eq!((limited, failed), (0, 0));
    }
}

#[tokio::test]
async fn tunnels_and_bindings_created_in_a_storm_of_5xx_and_429_converge_once_it_ends() {
    storm("storm", true).await;
}

#[tokio::test]
async fn control_tunnels_and_bindings_created_on_a_calm_day_converge() {
    storm("storm-calm", false).await;
}
