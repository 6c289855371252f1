//! The per-credential limiter, counted under paused time.
use std::time::Duration;

use serde_json::json;

use super::*;

fn zone_router() -> (Router, Log) {
    fake(|_, _| ok(json!({"id": ZONE, "name": "example.com"})))
}

/// Calls the fake server has answered by virtual time `at` after `start`.
async fn admitted_by(log: &Log, start: Instant, at: Duration) -> usize {
    tokio::time::sleep_until(start + at).await;
    log.count()
}

#[tokio::test(start_paused = true)]
async fn limiter_admits_burst_then_three_per_second() {
    let start = Instant::now();
    let (router, log) = zone_router();
    let client = builder(router)
        .rate_limit(RateLimit {
            per_second: 3,
            burst: 10,
        })
        .build()
        .unwrap();
    let mut calls = Vec::new();
    for _ in 0..40 {
        let client = client.clone();
        calls.push(tokio::spawn(async move { client.get_zone(ZONE).await }));
    }
    assert_eq!(
        admitted_by(&log, start, Duration::from_millis(100)).await,
        10
    );
    assert_eq!(
        admitted_by(&log, start, Duration::from_millis(1_100)).await,
        13
    );
    assert_eq!(
        admitted_by(&log, start, Duration::from_millis(3_100)).await,
        19
    );
    assert_eq!(
        admitted_by(&log, start, Duration::from_millis(9_900)).await,
        39
    );
    assert_eq!(
        admitted_by(&log, start, Duration::from_millis(10_100)).await,
        40
    );
    for call in calls {
        call.await.unwrap().unwrap();
    }
}

#[tokio::test(start_paused = true)]
async fn clients_of_one_credential_share_a_bucket_others_do_not() {
    let start = Instant::now();
    let (router, log) = zone_router();
    let registry = RateLimiters::new();
    let rate = RateLimit {
        per_second: 1,
        burst: 2,
    };
    let make = |credentials: Credentials| {
        CloudflareClient::builder(credentials)
            .transport(Transport::InProcess(router.clone()))
            .limiters(registry.clone())
            .rate_limit(rate)
            .build()
            .unwrap()
    };
    let a = make(Credentials::ApiToken(TOKEN.into()));
    let b = make(Credentials::ApiToken(TOKEN.into()));
    let other = make(Credentials::ApiKey {
        email: "ops@example.com".into(),
        key: "k".into(),
    });
    assert_eq!(registry.len(), 2);

    a.get_zone(ZONE).await.unwrap();
    a.get_zone(ZONE).await.unwrap();
    // The bucket of this credential is now empty, for `b` too; `other` has its own.
    other.get_zone(ZONE).await.unwrap();
    assert_eq!(start.elapsed(), Duration::ZERO);
    b.get_zone(ZONE).await.unwrap();
    assert!(start.elapsed() >= Duration::from_secs(1));
    assert_eq!(log.count(), 4);
}

#[tokio::test(start_paused = true)]
async fn every_retry_takes_a_token() {
    let start = Instant::now();
    let (router, log) = fake(|_, index| {
        if index < 3 {
            fail(500, 1000, "boom")
        } else {
            ok(json!({"id": ZONE, "name": "x"}))
        }
    });
    let client = builder(router)
        .rate_limit(RateLimit {
            per_second: 1,
            burst: 1,
        })
        .backoff(Duration::from_millis(1), Duration::from_millis(1))
        .build()
        .unwrap();
    client.get_zone(ZONE).await.unwrap();
    assert_eq!(log.count(), 4);
    // Four attempts through a one-token bucket refilled once per second.
    assert!(start.elapsed() >= Duration::from_secs(3));
}
