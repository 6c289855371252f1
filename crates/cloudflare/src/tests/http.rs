//! The reqwest transport against a loopback server.
use std::time::Duration;

use axum::http::header::AUTHORIZATION;
use serde_json::json;

use super::logging::capture;
use super::*;
use crate::CloudflareError;

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

/// The default transport verifies the server's certificate against the compiled-in roots: a
/// loopback server whose certificate comes from a private CA is refused during the handshake
/// (the server sees the client's `UnknownCA` alert), and the call fails as a transport error.
#[tokio::test]
async fn https_transport_refuses_a_certificate_outside_the_compiled_in_roots() {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};

    crate::install_crypto_provider();
    let ca = cftunnel_testenv::TestCa::new("private-ca").unwrap();
    let leaf = ca.issue_server_cert(&["127.0.0.1"]).unwrap();
    let server_config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(
            vec![CertificateDer::from(leaf.cert_der.clone())],
            PrivateKeyDer::from_pem_slice(leaf.key_pem.as_bytes()).unwrap(),
        )
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(server_config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        acceptor
            .accept(tcp)
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    });

    let client = CloudflareClient::builder(Credentials::ApiToken(TOKEN.into()))
        .base_url(format!("https://{addr}/client/v4"))
        .limiters(RateLimiters::new())
        .max_attempts(1)
        .build()
        .unwrap();
    let err = tokio::time::timeout(Duration::from_secs(60), client.get_zone(ZONE))
        .await
        .unwrap()
        .unwrap_err();
    assert!(matches!(err, CloudflareError::Transport { .. }), "{err:?}");
    let handshake = tokio::time::timeout(Duration::from_secs(60), server)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        handshake,
        Err("received fatal alert: UnknownCA".to_string()),
        "the client must refuse the private CA"
    );
}
