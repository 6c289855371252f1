//! Retries, backoff, 429 pauses and timeouts, all under paused time.
use std::time::Duration;

use serde_json::json;

use super::*;
use crate::{CloudflareError, ConfigSrc};

fn zone() -> Value {
    json!({"id": ZONE, "name": "example.com", "account": {"id": ACCOUNT, "name": "acc"}})
}

/// The error `get_zone` ends with when the client may try `attempts` times.
async fn get_zone_failing(router: axum::Router, attempts: u32) -> CloudflareError {
    builder(router)
        .max_attempts(attempts)
        .build()
        .unwrap()
        .get_zone(ZONE)
        .await
        .unwrap_err()
}

#[tokio::test(start_paused = true)]
async fn retry_after_pauses_every_call_of_the_credential() {
    let start = Instant::now();
    let (router, log) = fake(|_, index| if index == 0 { too_many(7) } else { ok(zone()) });
    let registry = RateLimiters::new();
    let first = builder(router.clone())
        .limiters(registry.clone())
        .build()
        .unwrap();
    // A second client built separately with the same credential shares the pause.
    let second = builder(router).limiters(registry).build().unwrap();

    let a = tokio::spawn(async move { first.get_zone(ZONE).await.map(|_| Instant::now()) });
    while log.count() < 1 {
        tokio::task::yield_now().await;
    }
    tokio::time::sleep(Duration::from_millis(10)).await;
    let b = second.get_zone(ZONE).await.map(|_| Instant::now()).unwrap();
    let a = a.await.unwrap().unwrap();

    assert!(a - start >= Duration::from_secs(7), "{:?}", a - start);
    assert!(b - start >= Duration::from_secs(7), "{:?}", b - start);
    let seen = log.all();
    assert_eq!(seen.len(), 3);
    assert_eq!(seen[0].at - start, Duration::ZERO);
    for later in &seen[1..] {
        assert!(later.at - start >= Duration::from_secs(7));
    }
}

#[tokio::test(start_paused = true)]
async fn rate_limited_surfaces_once_attempts_are_exhausted() {
    let start = Instant::now();
    let (router, log) = fake(|_, _| too_many(2));
    let err = get_zone_failing(router, 3).await;
    assert!(
        matches!(err, CloudflareError::RateLimited { retry_after, .. } if retry_after == Duration::from_secs(2)),
        "{err:?}"
    );
    assert_eq!(err.metric_label(), "rate_limited");
    assert_eq!(log.count(), 3);
    assert!(start.elapsed() >= Duration::from_secs(4));
}

#[tokio::test(start_paused = true)]
async fn server_errors_are_retried_with_backoff_then_succeed() {
    let start = Instant::now();
    let (router, log) = fake(|_, index| {
        if index < 2 {
            fail(503, 1000, "unavailable")
        } else {
            ok(tunnel_json(TUNNEL, "blog"))
        }
    });
    let tunnel = client(router)
        .create_tunnel(ACCOUNT, "blog", &[3u8; 32], ConfigSrc::Local)
        .await
        .unwrap();
    assert_eq!(tunnel.id, TUNNEL);
    let seen = log.all();
    assert_eq!(seen.len(), 3);
    // Backoff ceilings are 100 ms then 200 ms; the jitter keeps at least half of each.
    assert!(seen[1].at - seen[0].at >= Duration::from_millis(50));
    assert!(seen[2].at - seen[1].at >= Duration::from_millis(100));
    assert!(start.elapsed() >= Duration::from_millis(150));
    // The retried POST carries the same body each time.
    assert!(
        seen.iter()
            .all(|s| s.method == Method::POST && s.body == seen[0].body)
    );
}

#[tokio::test(start_paused = true)]
async fn server_errors_exhaust_after_max_attempts() {
    let (router, log) = fake(|_, _| raw(502, "<html>bad gateway</html>"));
    let err = get_zone_failing(router, 4).await;
    assert!(
        matches!(err, CloudflareError::Api { status: 502, .. }),
        "{err:?}"
    );
    assert_eq!(err.metric_label(), "server_error");
    assert_eq!(log.count(), 4);
}

#[tokio::test(start_paused = true)]
async fn client_errors_are_not_retried() {
    for status in [400u16, 401, 403, 404, 409] {
        let (router, log) = fake(move |_, _| fail(status, 6003, "Invalid request headers"));
        let err = client(router).get_zone(ZONE).await.unwrap_err();
        assert_eq!(err.status(), Some(status));
        assert!(err.has_code(6003));
        assert_eq!(log.count(), 1, "status {status}");
    }
}

#[tokio::test(start_paused = true)]
async fn timeout_applies_to_each_attempt() {
    let start = Instant::now();
    let log = Log::default();
    let seen = log.clone();
    let router = Router::new().fallback(move || {
        let seen = seen.clone();
        async move {
            seen.0.lock().unwrap().push(Seen {
                method: Method::GET,
                path: String::new(),
                query: None,
                headers: HeaderMap::new(),
                body: Bytes::new(),
                at: Instant::now(),
            });
            tokio::time::sleep(Duration::from_secs(120)).await;
            ok(zone())
        }
    });
    let client = builder(router)
        .timeout(Duration::from_secs(30))
        .max_attempts(2)
        .build()
        .unwrap();
    let err = client.get_zone(ZONE).await.unwrap_err();
    assert!(
        matches!(err, CloudflareError::Timeout { after, .. } if after == Duration::from_secs(30)),
        "{err:?}"
    );
    assert_eq!(err.to_string(), "cloudflare zone.get: no answer within 30s");
    assert_eq!(log.count(), 2);
    assert!(start.elapsed() >= Duration::from_secs(60));
    assert!(start.elapsed() < Duration::from_secs(120));
}

/// What an observer was told, in order.
#[derive(Debug, Default)]
struct Recorded(std::sync::Mutex<Vec<String>>);

impl crate::CallObserver for Recorded {
    fn attempt(&self, operation: &'static str, status: crate::AttemptStatus) {
        self.0
            .lock()
            .unwrap()
            .push(format!("attempt {operation} {status}"));
    }
    fn rate_limit_waited(&self, _waited: Duration) {}
    fn call_ended(&self, operation: &'static str, outcome: crate::CallOutcome) {
        self.0
            .lock()
            .unwrap()
            .push(format!("ended {operation} {}", outcome.as_str()));
    }
    fn retried(&self, operation: &'static str, reason: crate::CallOutcome) {
        self.0
            .lock()
            .unwrap()
            .push(format!("retried {operation} {}", reason.as_str()));
    }
    fn paused(&self, pause: Duration) {
        self.0
            .lock()
            .unwrap()
            .push(format!("paused {}s", pause.as_secs()));
    }
}

#[tokio::test(start_paused = true)]
async fn the_observer_hears_each_retry_with_its_reason_each_pause_and_one_outcome_per_call() {
    let (router, _) = fake(|_, index| match index {
        0 => fail(503, 1000, "unavailable"),
        1 => too_many(3),
        2 => ok(zone()),
        _ => fail(403, 10000, "Authentication error"),
    });
    let observer = std::sync::Arc::new(Recorded::default());
    let cf = builder(router).observer(observer.clone()).build().unwrap();
    cf.get_zone(ZONE).await.unwrap();
    cf.get_zone(ZONE).await.unwrap_err();
    assert_eq!(
        *observer.0.lock().unwrap(),
        [
            "attempt zone.get 503",
            "retried zone.get 5xx",
            "attempt zone.get 429",
            "paused 3s",
            "retried zone.get 429",
            "attempt zone.get 200",
            "ended zone.get ok",
            "attempt zone.get 403",
            "ended zone.get 4xx",
        ]
    );
}
