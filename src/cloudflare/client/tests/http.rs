//! The reqwest transport against a loopback server.
use std::time::Duration;

use axum::http::header::AUTHORIZATION;
use serde_json::json;

use super::logging::capture;
use super::*;
use crate::cloudflare::client::CloudflareError;

fn http_client(base: String) -> CloudflareClient {
    CloudflareClient::builder(Credentials::ApiToken(TOKEN.into()))
        .base_url(base)
        .limiters(RateLimiters::new())
        .backoff(Duration::from_millis(10), Duration::from_millis(20))
        .max_attempts(2)
        .build()
        .unwrap()
}

#[tokio::test]
async fn http_transport_reaches_a_loopback_server_without_logging_the_token() {
    let capture = capture();
    let (router, log) = fake(|_, index| {
        if index == 0 {
            fail(503, 1000, "warming up")
        } else {
            ok(json!({"id": ZONE, "name": "example.com"}))
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move { axum::serve(listener, router).await });

    let client = http_client(format!("http://{addr}/"));
    let zone = tokio::time::timeout(Duration::from_secs(60), client.get_zone(ZONE))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(zone.name, "example.com");
    let seen = log.all();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[1].path, format!("/zones/{ZONE}"));
    assert_eq!(
        seen[1].headers[AUTHORIZATION],
        format!("Bearer {TOKEN}").as_str()
    );
    server.abort();

    let logs = capture.buffer.text();
    assert!(logs.contains("status=503"), "{logs}");
    assert!(!logs.contains(TOKEN), "{logs}");
}

#[tokio::test]
async fn refused_connections_are_transport_errors_after_retries() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let client = http_client(format!("http://{addr}"));
    let err = tokio::time::timeout(Duration::from_secs(60), client.get_zone(ZONE))
        .await
        .unwrap()
        .unwrap_err();
    assert!(matches!(err, CloudflareError::Transport { .. }), "{err:?}");
    assert_eq!(err.metric_label(), "transport");
    assert_eq!(err.to_string(), "cloudflare zone.get: transport error");
}
