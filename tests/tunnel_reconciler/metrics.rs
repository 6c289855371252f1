//! The operator's `/metrics`, scraped over HTTP after a tunnel with a binding is routed and its
//! watches have failed once: every series of the operator is exposed, and each moved.
//!
//! The registry is per process and other tests of this binary run beside this one, so the test
//! compares a scrape before with one after its own work: each counter must have grown, and the
//! gauges must count this test's tunnel and route.
use std::collections::BTreeMap;
use std::sync::Arc;

use cftunnel::metrics::Metrics;
use cftunnel::webhook::{Readiness, WebhookMetrics, health_router};
use cftunnel_testenv::poll_until;
use kube::Client;
use serde_json::json;

use crate::harness::{Harness, OPERATOR_USER, POLL, TOKEN, WAIT};
use crate::proxy::CuttableProxy;
use crate::routes::{API_SECRET, create_binding, create_service, wait_records};

/// Serves the same `/metrics` route `cftunnel run` serves, on a free loopback port.
pub(crate) async fn serve_metrics() -> String {
    cftunnel_testenv::install_crypto_provider();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind metrics");
    let addr = listener.local_addr().expect("metrics address");
    let app = health_router(
        Readiness::new(),
        Arc::new(WebhookMetrics::new()),
        Metrics::process(),
    );
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    format!("http://{addr}/metrics")
}

/// Every sample of the exposition: `name{labels}` → value. Checks the format on the way:
/// every sample's family has a `# TYPE` line before it.
pub(crate) async fn scrape(url: &str) -> BTreeMap<String, f64> {
    let response = reqwest::get(url).await.expect("scrape /metrics");
    assert_eq!(response.status(), 200);
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    assert_eq!(
        content_type,
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    );
    let text = response.text().await.expect("metrics text");
    let mut typed: Vec<String> = Vec::new();
    let mut samples = BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            typed.push(rest.split(' ').next().unwrap_or_default().to_owned());
            continue;
        }
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').expect("sample has a value");
        let name = series.split('{').next().unwrap_or_default();
        assert!(
            typed.iter().any(|family| name.starts_with(family.as_str())),
            "{name} has no # TYPE line before it:\n{text}"
        );
        samples.insert(series.to_owned(), value.parse().expect("numeric value"));
    }
    samples
}

/// Sum of the samples of `name` whose labels contain every one of `labels`.
pub(crate) fn total(samples: &BTreeMap<String, f64>, name: &str, labels: &[&str]) -> f64 {
    samples
        .iter()
        .filter(|(series, _)| {
            series.split('{').next() == Some(name) && labels.iter().all(|l| series.contains(l))
        })
        .map(|(_, v)| v)
        .sum()
}

/// Waits until the samples of `name` with `labels` sum to at least 1 (the registry is shared
/// with the tests beside this one, so more is fine; none is the failure).
pub(crate) async fn wait_counted(name: &str, labels: &[&str]) {
    let url = serve_metrics().await;
    poll_until(
        &format!("{name}{labels:?} to count"),
        WAIT,
        POLL,
        || async { (total(&scrape(&url).await, name, labels) >= 1.0).then_some(()) },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
}

#[tokio::test]
async fn metrics_expose_every_operator_series_and_each_moves() {
    let url = serve_metrics().await;
    let before = scrape(&url).await;

    let mut h = Harness::start("tr-metrics").await;
    let upstream = h
        .plane
        .server_url()
        .trim_start_matches("https://")
        .parse()
        .expect("API server address");
    let proxy = CuttableProxy::start(upstream).await;
    let user = h
        .plane
        .user(OPERATOR_USER, &["system:serviceaccounts"])
        .expect("operator user");
    let client = Client::try_from(proxy.config(user.config())).expect("proxied client");
    h.start_operator_with(client);

    h.create_api_secret(API_SECRET, &[("CLOUDFLARE_API_TOKEN", TOKEN)])
        .await;
    create_service(&h, "web", 80, json!({}), json!({})).await;
    create_binding(&h, "web", json!([{"name": "web"}])).await;
    h.create_tunnel(
        "edge",
        h.spec(API_SECRET, json!({"newTunnel": {"name": "edge"}})),
    )
    .await;
    h.wait_reason(&h.tunnels(), "edge", "Ready").await;
    wait_records(&h, "web.example.com", 1).await;
    let routed = scrape(&url).await;
    assert!(
        total(
            &routed,
            "cftunnel_tunnels",
            &["kind=\"tunnel\"", "state=\"Ready\""]
        ) >= 1.0,
        "{routed:#?}"
    );
    assert!(
        total(&routed, "cftunnel_routes", &["state=\"Routed\""]) >= 1.0,
        "{routed:#?}"
    );

    // Every watch of the operator fails at once; each restarts with backoff.
    proxy.cut();
    let after = poll_until("a watch restart to be counted", WAIT, POLL, || async {
        let now = scrape(&url).await;
        (total(&now, "cftunnel_watch_restarts_total", &[])
            > total(&before, "cftunnel_watch_restarts_total", &[]))
        .then_some(now)
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));

    for (name, labels) in [
        (
            "cftunnel_reconciles_total",
            &["kind=\"tunnel\"", "outcome=\"success\""][..],
        ),
        (
            "cftunnel_reconcile_duration_seconds_count",
            &["kind=\"tunnel\""][..],
        ),
        (
            "cftunnel_reconcile_duration_seconds_bucket",
            &["kind=\"tunnel\"", "le=\"+Inf\""][..],
        ),
        (
            "cftunnel_cloudflare_requests_total",
            &["operation=\"tunnel.create\"", "status=\"200\""][..],
        ),
        ("cftunnel_cloudflare_ratelimit_wait_seconds_count", &[][..]),
        (
            "cftunnel_dns_writes_total",
            &["action=\"create\"", "result=\"success\""][..],
        ),
        ("cftunnel_watch_restarts_total", &[][..]),
    ] {
        let (was, now) = (total(&before, name, labels), total(&after, name, labels));
        assert!(
            now > was,
            "{name}{labels:?} did not move: {was} → {now}\n{after:#?}"
        );
    }
}
