//! Admission benchmark (docs/design.md §8): drives AdmissionReviews over TLS with keep-alive connections,
//! as the API server does, at a fixed concurrency, against cftunnel's decision logic and against
//! the same server answering a canned response. Also measures the handler alone, in-process.
//!
//! Run: `cargo run --release --example admission_bench -- [--concurrency 64] [--seconds 10] [--rounds 3]`
use std::sync::Arc;
use std::time::{Duration, Instant};

use cftunnel::metrics::Metrics;
use cftunnel::scope::Scope;
use cftunnel::webhook::{self, Policy, Readiness, WebhookConfig};
use cftunnel_policy::admission::review;
use cftunnel_policy::rules::{AdmissionView, HostnameClaim, RouteNamespacePolicy, TunnelFacts};
use cftunnel_types::{TunnelIdentity, TunnelKind};
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse};
use kube::core::conversion::{ConversionRequest, ConversionResponse};
use serde_json::json;
use tower::ServiceExt;

/// The same allocator as the `cftunnel` binary.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

struct Decisions(Arc<AdmissionView>);
impl Policy for Decisions {
    fn validate(&self, r: &AdmissionRequest<DynamicObject>) -> AdmissionResponse {
        review::validate(r, &self.0)
    }
    fn mutate(&self, r: &AdmissionRequest<DynamicObject>) -> AdmissionResponse {
        review::mutate(r)
    }
    fn convert(&self, r: &ConversionRequest) -> ConversionResponse {
        review::convert(r)
    }
}

/// The baseline: the same server and decoding, no decision.
struct Canned;
impl Policy for Canned {
    fn validate(&self, r: &AdmissionRequest<DynamicObject>) -> AdmissionResponse {
        AdmissionResponse::from(r)
    }
    fn mutate(&self, r: &AdmissionRequest<DynamicObject>) -> AdmissionResponse {
        AdmissionResponse::from(r)
    }
    fn convert(&self, r: &ConversionRequest) -> ConversionResponse {
        ConversionResponse::for_request(r.clone()).success(r.objects.clone())
    }
}

/// 100 ClusterTunnels and 1,000 claimed hostnames: a mid-sized cluster.
fn view() -> AdmissionView {
    let tunnels: Vec<TunnelFacts> = (0..100)
        .map(|i| TunnelFacts {
            identity: TunnelIdentity {
                kind: TunnelKind::ClusterTunnel,
                namespace: String::new(),
                name: format!("edge-{i}"),
            },
            domain: "example.com".into(),
            allowed: RouteNamespacePolicy::All,
            has_origin_ca_pool: false,
            account: String::new(),
            account_zones: Vec::new(),
        })
        .collect();
    let claims: Vec<HostnameClaim> = (0..1000)
        .map(|i| HostnameClaim {
            fqdn: format!("app-{i}.example.com"),
            path: String::new(),
            tunnel: tunnels[i % 100].identity.clone(),
            owner: format!("TunnelBinding ns-{i}/b (subject s)"),
            object: format!("TunnelBinding ns-{i}/b"),
        })
        .collect();
    AdmissionView::new(tunnels, Default::default(), claims)
}

fn review_body(i: usize) -> Vec<u8> {
    let binding = json!({
        "apiVersion": "networking.cfargotunnel.com/v1alpha1", "kind": "TunnelBinding",
        "metadata": {"name": "web", "namespace": "shop"},
        "subjects": [
            {"name": "web", "spec": {"fqdn": format!("new-{i}.example.com"), "protocol": "https", "path": "^/api"}},
            {"name": "api", "spec": {"fqdn": format!("api-{i}.example.com"), "connectTimeout": "30s"}},
            {"name": "docs"}
        ],
        "tunnelRef": {"kind": "ClusterTunnel", "name": format!("edge-{}", i % 100)}
    });
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": format!("00000000-0000-0000-0000-{i:012}"),
            "kind": {"group": "networking.cfargotunnel.com", "version": "v1alpha1", "kind": "TunnelBinding"},
            "resource": {"group": "networking.cfargotunnel.com", "version": "v1alpha1", "resource": "tunnelbindings"},
            "name": "web", "namespace": "shop", "operation": "CREATE",
            "userInfo": {"username": "alice"}, "object": binding, "dryRun": false
        }
    }))
    .unwrap_or_default()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

struct Load {
    requests: usize,
    throughput: f64,
    p50: Duration,
    p99: Duration,
}

async fn drive(url: String, ca: Vec<u8>, concurrency: usize, seconds: u64) -> Load {
    let ca = reqwest::Certificate::from_pem(&ca).unwrap_or_else(|e| panic!("CA: {e}"));
    let client = reqwest::Client::builder()
        .add_root_certificate(ca)
        .http1_only()
        .pool_max_idle_per_host(concurrency)
        .build()
        .unwrap_or_else(|e| panic!("client: {e}"));
    let bodies: Arc<Vec<Vec<u8>>> = Arc::new((0..256).map(review_body).collect());
    let run = |window: Duration| {
        let client = client.clone();
        let url = url.clone();
        let bodies = bodies.clone();
        async move {
            let deadline = Instant::now() + window;
            let mut workers = Vec::new();
            for w in 0..concurrency {
                let (client, url, bodies) = (client.clone(), url.clone(), bodies.clone());
                workers.push(tokio::spawn(async move {
                    let mut latencies = Vec::new();
                    let mut i = w;
                    while Instant::now() < deadline {
                        let started = Instant::now();
                        let response = client
                            .post(&url)
                            .header("content-type", "application/json")
                            .body(bodies[i % bodies.len()].clone())
                            .send()
                            .await;
                        match response {
                            Ok(r) if r.status().is_success() => {
                                let _ = r.bytes().await;
                                latencies.push(started.elapsed());
                            }
                            Ok(r) => panic!("status {}", r.status()),
                            Err(e) => panic!("request failed: {e}"),
                        }
                        i += concurrency;
                    }
                    latencies
                }));
            }
            let mut all = Vec::new();
            for w in workers {
                all.extend(w.await.unwrap_or_default());
            }
            all
        }
    };
    run(Duration::from_secs(2)).await; // warm-up: connections, TLS sessions, allocator
    let started = Instant::now();
    let mut latencies = run(Duration::from_secs(seconds)).await;
    let elapsed = started.elapsed();
    latencies.sort();
    Load {
        requests: latencies.len(),
        throughput: latencies.len() as f64 / elapsed.as_secs_f64(),
        p50: percentile(&latencies, 0.50),
        p99: percentile(&latencies, 0.99),
    }
}

/// The handler alone: decode, decide, encode, in-process, one request at a time.
async fn handler_latency(policy: Arc<dyn Policy>, n: usize) -> (Duration, Duration) {
    let readiness = Readiness::new();
    readiness.set_ready(true);
    let router = webhook::router(policy, readiness, webhook::DEFAULT_MAX_BODY_BYTES);
    let bodies: Vec<Vec<u8>> = (0..256).map(review_body).collect();
    let mut latencies = Vec::with_capacity(n);
    for i in 0..n + 1000 {
        let request = http::Request::post("/validate/tunnelbindings")
            .header("content-type", "application/json")
            .body(axum::body::Body::from(bodies[i % bodies.len()].clone()))
            .unwrap_or_else(|e| panic!("request: {e}"));
        let started = Instant::now();
        let response = router
            .clone()
            .oneshot(request)
            .await
            .unwrap_or_else(|e| match e {});
        let _ = axum::body::to_bytes(response.into_body(), usize::MAX).await;
        if i >= 1000 {
            latencies.push(started.elapsed());
        }
    }
    latencies.sort();
    (percentile(&latencies, 0.50), percentile(&latencies, 0.99))
}

fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[tokio::main]
async fn main() {
    cftunnel_cloudflare::install_crypto_provider();
    let concurrency = arg("--concurrency", 64) as usize;
    let seconds = arg("--seconds", 10);
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let certs = cftunnel::certs::generate_dev_certs(
        dir.path(),
        &["localhost".to_string(), "127.0.0.1".to_string()],
    )
    .unwrap_or_else(|e| panic!("certs: {e}"));
    let ca = std::fs::read(&certs.ca_cert).unwrap_or_else(|e| panic!("CA file: {e}"));
    let view = Arc::new(view());

    // Rounds alternate between the two servers so that a noisy neighbour (a build, a cron job)
    // hits both alike; the median round of each is reported.
    let rounds = arg("--rounds", 3) as usize;
    let servers = [
        ("canned response", Arc::new(Canned) as Arc<dyn Policy>),
        (
            "cftunnel rules",
            Arc::new(Decisions(view.clone())) as Arc<dyn Policy>,
        ),
    ];
    let mut loads: Vec<Vec<Load>> = vec![Vec::new(), Vec::new()];
    for _ in 0..rounds {
        for (i, (_, policy)) in servers.iter().enumerate() {
            let readiness = Readiness::new();
            readiness.set_ready(true);
            let config = WebhookConfig::new(
                "127.0.0.1:0".parse().unwrap_or_else(|e| panic!("{e}")),
                "127.0.0.1:0".parse().unwrap_or_else(|e| panic!("{e}")),
                certs.tls_cert.clone(),
                certs.tls_key.clone(),
            );
            let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
            let handle = webhook::serve(
                &Scope::root("webhook"),
                config,
                policy.clone(),
                readiness,
                Metrics::process(),
                async move {
                    let _ = stopped.await;
                },
            )
            .await
            .unwrap_or_else(|e| panic!("serve: {e}"));
            let url = format!(
                "https://localhost:{}/validate/tunnelbindings",
                handle.https_addr().port()
            );
            loads[i].push(drive(url, ca.clone(), concurrency, seconds).await);
            let _ = stop.send(());
            let _ = handle.join().await;
        }
    }
    let mut rows = Vec::new();
    for ((label, policy), mut runs) in servers.into_iter().zip(loads) {
        runs.sort_by(|a, b| a.throughput.total_cmp(&b.throughput));
        let median = runs.swap_remove(runs.len() / 2);
        let (h50, h99) = handler_latency(policy, 20_000).await;
        rows.push((label, median, h50, h99));
    }
    println!(
        "| server | concurrency | requests | throughput (req/s) | round trip p50 | round trip p99 | handler p50 | handler p99 |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for (label, l, h50, h99) in &rows {
        println!(
            "| {label} | {concurrency} | {} | {:.0} | {:.2?} | {:.2?} | {:.1?} | {:.1?} |",
            l.requests, l.throughput, l.p50, l.p99, h50, h99
        );
    }
    if let [(_, canned, ..), (_, ours, ..)] = rows.as_slice() {
        println!(
            "\ncftunnel rules reach {:.1} % of the canned throughput",
            100.0 * ours.throughput / canned.throughput
        );
    }
}
