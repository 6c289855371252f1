//! The webhook under hostile clients, over real TLS on loopback: idle connections are closed,
//! a thousand of them do not stop normal reviews, bodies beyond the byte budget get 429, bodies
//! too costly to decode get 413 before being decoded, and a flood of bad requests leaves a
//! bounded number of log lines.
use std::io::Write as _;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Body;
use cftunnel::certs::{CertificateAuthority, issue_serving_cert};
use cftunnel::metrics::Metrics;
use cftunnel::scope::Scope;
use cftunnel::webhook::{
    Endpoint, LINES_PER_INTERVAL, LOG_INTERVAL, Policy, Readiness, ServingHandle, WebhookConfig,
    WebhookMetrics, decode_cost, router_with_metrics, serve,
};
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse};
use kube::core::conversion::{ConversionRequest, ConversionResponse};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tower::ServiceExt as _;

const HOUR: Duration = Duration::from_secs(3600);
/// Generous bound for anything that waits on the server.
const PATIENCE: Duration = Duration::from_secs(30);

struct AllowAll;

impl Policy for AllowAll {
    fn validate(&self, request: &AdmissionRequest<DynamicObject>) -> AdmissionResponse {
        AdmissionResponse::from(request)
    }
    fn mutate(&self, request: &AdmissionRequest<DynamicObject>) -> AdmissionResponse {
        AdmissionResponse::from(request)
    }
    fn convert(&self, request: &ConversionRequest) -> ConversionResponse {
        ConversionResponse::for_request(request.clone()).success(Vec::new())
    }
}

fn review(uid: &str) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "resource": {"group": "", "version": "v1", "resource": "configmaps"},
            "name": "c", "namespace": "apps", "operation": "CREATE",
            "userInfo": {"username": "admin"},
            "object": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}},
            "dryRun": false
        }
    })
}

struct Server {
    handle: ServingHandle,
    ca: CertificateAuthority,
    _dir: tempfile::TempDir,
}

async fn start(adjust: impl FnOnce(&mut WebhookConfig)) -> Server {
    cftunnel_cloudflare::install_crypto_provider();
    let ca = CertificateAuthority::generate(HOUR).expect("ca");
    let pair = issue_serving_cert(&ca, &[], HOUR).expect("serving cert");
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("tls.crt"), &pair.cert_pem).expect("cert");
    std::fs::write(dir.path().join("tls.key"), &pair.key_pem).expect("key");
    let loopback: SocketAddr = ([127, 0, 0, 1], 0).into();
    let mut config = WebhookConfig::new(
        loopback,
        loopback,
        dir.path().join("tls.crt"),
        dir.path().join("tls.key"),
    );
    adjust(&mut config);
    let readiness = Readiness::new();
    readiness.set_ready(true);
    let handle = serve(
        &Scope::root("webhook"),
        config,
        Arc::new(AllowAll),
        readiness,
        Metrics::process(),
        std::future::pending(),
    )
    .await
    .expect("server starts");
    Server {
        handle,
        ca,
        _dir: dir,
    }
}

/// A TLS connection that completed its handshake, offering `alpn`.
async fn tls_connection(
    server: &Server,
    alpn: &[&[u8]],
) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
    let mut roots = rustls::RootCertStore::empty();
    let der = CertificateDer::from_pem_slice(server.ca.cert_pem().as_bytes()).expect("ca pem");
    roots.add(der).expect("root");
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_root_certificates(roots)
    .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(server.handle.https_addr())
        .await
        .expect("tcp connect");
    let name = ServerName::try_from("localhost").expect("name");
    tokio::time::timeout(PATIENCE, connector.connect(name, tcp))
        .await
        .expect("handshake in time")
        .expect("handshake")
}

fn https_client(server: &Server) -> reqwest::Client {
    let root = reqwest::Certificate::from_pem(server.ca.cert_pem().as_bytes()).expect("ca pem");
    reqwest::Client::builder()
        .tls_certs_only([root])
        .timeout(PATIENCE)
        .build()
        .expect("client")
}

/// Reads until the server closes the connection; how long that took.
async fn time_until_closed(
    stream: &mut (impl tokio::io::AsyncRead + Unpin),
    limit: Duration,
) -> Duration {
    let started = Instant::now();
    let mut buffer = [0_u8; 4096];
    let closed = tokio::time::timeout(limit, async {
        while let Ok(n) = stream.read(&mut buffer).await
            && n > 0
        {}
    })
    .await;
    assert!(
        closed.is_ok(),
        "the connection was still open after {limit:?}"
    );
    started.elapsed()
}

#[tokio::test]
async fn a_tls_connection_that_sends_nothing_is_closed_after_the_idle_timeout() {
    let idle = Duration::from_secs(2);
    let server = start(|c| c.idle_timeout = idle).await;
    let mut silent = tls_connection(&server, &[]).await;
    let open_for = time_until_closed(&mut silent, idle + PATIENCE).await;
    assert!(
        open_for >= idle - Duration::from_millis(100),
        "closed after {open_for:?}"
    );
}

#[tokio::test]
async fn an_http2_connection_with_only_pings_and_no_stream_is_closed() {
    let idle = Duration::from_secs(2);
    let server = start(|c| c.idle_timeout = idle).await;
    let tls = tls_connection(&server, &[b"h2"]).await;
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let (mut reader, mut writer) = tokio::io::split(tls);
    let pinger = tokio::spawn(async move {
        let mut hello = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        hello.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]); // empty SETTINGS
        if writer.write_all(&hello).await.is_err() {
            return;
        }
        // PING frames every 300 ms: traffic, but no request.
        let ping = [0, 0, 8, 6, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8];
        while writer.write_all(&ping).await.is_ok() {
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    });
    let open_for = time_until_closed(&mut reader, idle + PATIENCE).await;
    assert!(
        open_for >= idle - Duration::from_millis(100),
        "closed after {open_for:?}"
    );
    pinger.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_idle_connections_do_not_stop_normal_reviews() {
    let server = start(|_| {}).await;
    let mut idle = Vec::with_capacity(1000);
    for _ in 0..1000 {
        idle.push(tls_connection(&server, &[]).await);
    }
    let client = https_client(&server);
    let url = format!(
        "https://localhost:{}/validate",
        server.handle.https_addr().port()
    );
    for i in 0..20 {
        let response = client
            .post(&url)
            .json(&review(&format!("u{i}")))
            .send()
            .await
            .expect("answered");
        assert_eq!(response.status().as_u16(), 200);
        let body: Value = response.json().await.expect("json");
        assert_eq!(body["response"]["allowed"], json!(true));
    }
    drop(idle);
    server
        .handle
        .shutdown_and_join()
        .await
        .expect("clean shutdown");
}

#[tokio::test]
async fn a_body_beyond_the_byte_budget_is_refused_with_429_and_small_ones_pass() {
    let server = start(|c| c.max_bytes_in_flight = 1 << 20).await;
    let client = https_client(&server);
    let url = format!(
        "https://localhost:{}/validate",
        server.handle.https_addr().port()
    );
    let mut big = review("big");
    big["request"]["object"]["data"] = json!({"filler": "x".repeat(2 << 20)});
    let response = client.post(&url).json(&big).send().await.expect("answered");
    assert_eq!(response.status().as_u16(), 429);
    let status: Value = response.json().await.expect("json");
    assert_eq!(status["kind"], "Status");
    assert_eq!(
        status["message"],
        "the webhook already holds 1 MiB of requests; retry shortly"
    );
    let small = client
        .post(&url)
        .json(&review("small"))
        .send()
        .await
        .expect("answered");
    assert_eq!(small.status().as_u16(), 200);
    let metrics = reqwest::get(format!("http://{}/metrics", server.handle.health_addr()))
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    assert!(
        metrics
            .contains("cftunnel_admission_requests_total{endpoint=\"validate\",result=\"busy\"} 1"),
        "{metrics}"
    );
}

#[tokio::test]
async fn a_body_too_costly_to_decode_is_refused_with_413_before_decoding() {
    let server = start(|c| c.max_decode_bytes = 8 << 20).await;
    let client = https_client(&server);
    let url = format!(
        "https://localhost:{}/validate",
        server.handle.https_addr().port()
    );
    // 400 KB of tiny objects: well inside the body limit, ~80 MiB once decoded.
    let mut dense = review("dense");
    dense["request"]["object"]["items"] = Value::Array(vec![json!({"a": 0}); 50_000]);
    let body = serde_json::to_vec(&dense).expect("encode");
    let cost = Endpoint::Validate.cost_factor().weigh(decode_cost(&body));
    assert!(
        cost > 8 << 20,
        "the test body must exceed the budget: {cost}"
    );
    let response = client
        .post(&url)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .expect("answered");
    assert_eq!(response.status().as_u16(), 413);
    let status: Value = response.json().await.expect("json");
    assert_eq!(
        status["message"],
        format!(
            "request body would take about {} MiB to decode, more than the webhook's 6 MiB for one review; send an object with fewer, larger JSON values",
            cost.div_ceil(1 << 20)
        )
    );
    let small = client
        .post(&url)
        .json(&review("small"))
        .send()
        .await
        .expect("answered");
    assert_eq!(small.status().as_u16(), 200);
    let metrics = reqwest::get(format!("http://{}/metrics", server.handle.health_addr()))
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    assert!(
        metrics.contains(
            "cftunnel_admission_requests_total{endpoint=\"validate\",result=\"too_large\"} 1"
        ),
        "{metrics}"
    );
}

/// Log output captured in memory.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("log buffer").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn ten_thousand_bad_requests_leave_a_bounded_number_of_log_lines() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let readiness = Readiness::new();
    readiness.set_ready(true);
    let metrics = Arc::new(WebhookMetrics::new());
    let app = router_with_metrics(Arc::new(AllowAll), readiness, 1 << 20, metrics.clone());
    let started = Instant::now();
    for _ in 0..10_000 {
        let request = http::Request::post("/validate")
            .header("content-type", "application/json")
            .header("content-length", "8")
            .body(Body::from("not json"))
            .expect("request");
        let response = app.clone().oneshot(request).await.expect("response");
        assert_eq!(response.status().as_u16(), 400);
    }
    let intervals = started.elapsed().as_secs() / LOG_INTERVAL.as_secs() + 1;
    let text = String::from_utf8(captured.0.lock().expect("log buffer").clone()).expect("utf-8");
    let lines = text.lines().count() as u64;
    let refused_lines = text
        .lines()
        .filter(|l| l.contains("refused a request"))
        .count() as u64;
    let _ = std::io::stderr().write_all(text.as_bytes());
    assert!(
        lines <= intervals * (LINES_PER_INTERVAL + 1),
        "{lines} lines in {intervals} intervals"
    );
    assert!(
        refused_lines >= LINES_PER_INTERVAL,
        "{refused_lines} refusals logged"
    );
    assert_eq!(metrics.suppressed_log_lines(), 10_000 - refused_lines);
}
