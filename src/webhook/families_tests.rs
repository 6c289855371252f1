//! The metric families `/metrics` serves, compared with the committed list
//! `tests/data/metrics.txt`: dashboards and alerts depend on their names, types and labels, so
//! a family renamed, retyped, relabelled, added or removed fails here until the list says so.
//!
//! One line of the list per family: its name as Prometheus stores its series (a counter with
//! `_total`, a histogram by its base name), its type and its label names, sorted and joined
//! with `,` (none for a family without labels).
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::header::CONTENT_TYPE;
use axum::http::{Request, StatusCode};
use cftunnel_cloudflare::{AttemptStatus, CallObserver, CallOutcome};
use cftunnel_types::TunnelKind;
use tower::ServiceExt;

use super::health_router;
use crate::metrics::Metrics;
use crate::webhook::Readiness;
use crate::webhook::metrics::{Endpoint, Outcome, WebhookMetrics};

const LIST: &str = include_str!("../../tests/data/metrics.txt");

/// One family of the exposition: its type, label names and whether it has a HELP text.
#[derive(Debug, Default)]
struct Family {
    kind: String,
    labels: Option<BTreeSet<String>>,
    documented: bool,
}

/// The label names of a sample line (`name{a="x",b="y"} 1`), and its name.
fn sample_labels(line: &str) -> Result<(&str, Vec<String>), String> {
    let Some(open) = line.find('{') else {
        let name = line.split(' ').next().unwrap_or_default();
        return Ok((name, Vec::new()));
    };
    let name = &line[..open];
    let mut labels = Vec::new();
    let mut rest = &line[open + 1..];
    loop {
        if let Some(after) = rest.strip_prefix('}') {
            if !after.starts_with(' ') {
                return Err(format!("no value after the labels: {line}"));
            }
            return Ok((name, labels));
        }
        let (label, value) = rest
            .split_once("=\"")
            .ok_or_else(|| format!("a label without a quoted value: {line}"))?;
        labels.push(label.trim_start_matches(',').to_owned());
        let mut chars = value.char_indices();
        let end = loop {
            match chars.next() {
                Some((_, '\\')) => {
                    chars.next();
                }
                Some((at, '"')) => break at,
                Some(_) => {}
                None => return Err(format!("an unterminated label value: {line}")),
            }
        };
        rest = &value[end + 1..];
    }
}

/// Whether `sample` is a series name of the family `name` of type `kind`.
fn belongs(sample: &str, name: &str, kind: &str) -> bool {
    let Some(suffix) = sample.strip_prefix(name) else {
        return false;
    };
    match kind {
        // Prometheus text 0.0.4 types a counter by its series name, OpenMetrics without `_total`.
        "counter" if name.ends_with("_total") => suffix.is_empty(),
        "counter" => ["_total", "_created"].contains(&suffix),
        "histogram" => ["_bucket", "_sum", "_count", "_created"].contains(&suffix),
        _ => suffix.is_empty(),
    }
}

/// The families of an exposition (Prometheus text 0.0.4 or OpenMetrics), as the lines of the
/// list. Fails on a family typed twice, a sample outside the family typed before it, or samples
/// of one family with different label names.
fn families(text: &str) -> Result<BTreeSet<String>, String> {
    let mut families: BTreeMap<String, Family> = BTreeMap::new();
    let mut current: Option<(String, String)> = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest
                .split_once(' ')
                .ok_or_else(|| format!("a TYPE line without a type: {line}"))?;
            let family = families.entry(name.to_owned()).or_default();
            if !family.kind.is_empty() {
                return Err(format!("{name} is typed twice"));
            }
            family.kind = kind.to_owned();
            current = Some((name.to_owned(), kind.to_owned()));
        } else if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            families.entry(name.to_owned()).or_default().documented = !help.trim().is_empty();
        } else if line.starts_with('#') || line.is_empty() {
            continue;
        } else {
            let (sample, mut labels) = sample_labels(line)?;
            let value = line.rsplit(' ').next().unwrap_or_default();
            value
                .parse::<f64>()
                .map_err(|e| format!("{line}: value {value:?}: {e}"))?;
            let Some((name, kind)) = &current else {
                return Err(format!("a sample before any TYPE line: {line}"));
            };
            if !belongs(sample, name, kind) {
                return Err(format!("{sample} is not a series of {name} ({kind})"));
            }
            if sample.ends_with("_bucket") {
                labels.retain(|l| l != "le");
            }
            let labels: BTreeSet<String> = labels.into_iter().collect();
            let family = families.entry(name.clone()).or_default();
            match &family.labels {
                Some(seen) if *seen != labels => {
                    return Err(format!("{name}: labels {seen:?} and {labels:?}"));
                }
                _ => family.labels = Some(labels),
            }
        }
    }
    let mut lines = BTreeSet::new();
    for (name, family) in families {
        if family.kind.is_empty() {
            return Err(format!("{name} has a HELP line but no TYPE"));
        }
        if !family.documented {
            return Err(format!("{name} has no HELP text"));
        }
        // OpenMetrics names a counter family without `_total`; Prometheus stores its series with.
        let stored = if family.kind == "counter" && !name.ends_with("_total") {
            format!("{name}_total")
        } else {
            name
        };
        let labels: Vec<String> = family.labels.unwrap_or_default().into_iter().collect();
        let line = format!("{stored} {} {}", family.kind, labels.join(","));
        lines.insert(line.trim_end().to_owned());
    }
    Ok(lines)
}

/// Webhook and operator metrics with at least one observation of every metric.
fn observed_everywhere() -> (Arc<WebhookMetrics>, Arc<Metrics>) {
    let webhook = Arc::new(WebhookMetrics::new());
    webhook.observe(
        Endpoint::Validate,
        Outcome::Allowed,
        Duration::from_millis(3),
    );
    webhook.add_suppressed_log_lines(2);
    webhook.set_leading(true);
    let operator = Arc::new(Metrics::default());
    operator.reconciled(TunnelKind::Tunnel, true, Duration::from_millis(20));
    operator.attempt("tunnel.create", AttemptStatus::Http(200));
    operator.call_ended("tunnel.create", CallOutcome::Ok);
    operator.retried("dns.batch", CallOutcome::ServerError);
    operator.rate_limit_waited(Duration::from_millis(5));
    operator.paused(Duration::from_secs(1));
    operator.dns_written("create", true);
    operator.watch_restarted("k8s_openapi::api::core::v1::Service");
    operator.access_policies_unknown("forbidden");
    operator.route_computed();
    operator.status_written("TunnelBinding", true);
    (webhook, operator)
}

async fn scrape(app: Router) -> String {
    let request = Request::get("/metrics").body(Body::empty());
    let Ok(request) = request else {
        panic!("a request to /metrics");
    };
    let Ok(response) = app.oneshot(request).await;
    assert_eq!(response.status(), StatusCode::OK);
    let content_type = response.headers().get(CONTENT_TYPE).cloned();
    assert_eq!(
        content_type.as_ref().and_then(|v| v.to_str().ok()),
        Some(super::OPENMETRICS)
    );
    let body = axum::body::to_bytes(response.into_body(), 1 << 20).await;
    let text = String::from_utf8_lossy(&body.unwrap_or_default()).into_owned();
    assert!(text.ends_with("\n# EOF\n"), "{text}");
    text
}

/// The family names of lines of the list.
fn names<'a>(lines: impl IntoIterator<Item = &'a String>) -> BTreeSet<&'a str> {
    lines
        .into_iter()
        .filter_map(|line| line.split(' ').next())
        .collect()
}

#[tokio::test]
async fn metrics_serves_exactly_the_listed_families() {
    let (webhook, operator) = observed_everywhere();
    let _tunnels = operator.track_tunnels(TunnelKind::Tunnel, Box::new(|| vec!["Ready"]));
    let limiters = cftunnel_cloudflare::RateLimiters::new();
    let _limiter = limiters.limiter(
        &cftunnel_cloudflare::Credentials::ApiToken("t".into()),
        cftunnel_cloudflare::Pace::from(cftunnel_cloudflare::RateLimit {
            per_second: 1,
            burst: 1,
        }),
    );
    operator.track_limiters(limiters);
    let _edges = operator.track_edges(Box::new(|| {
        vec![crate::metrics::EdgeSample {
            kind: "tunnel",
            namespace: "shop".into(),
            name: "edge".into(),
            status: Some("healthy".into()),
            pods: Some((1, 1)),
        }]
    }));
    let routes = operator.track_routes();
    routes.set(BTreeMap::from([("Routed", 1)]));
    use crate::metrics::Counted;
    let counted = [
        (Counted::DnsProblems, "DNSConflict"),
        (Counted::AccessApplications, "protecting"),
        (Counted::AccessTargets, "Ready"),
    ];
    let _counts: Vec<_> = counted
        .into_iter()
        .map(|(family, label)| {
            operator.track_counts(
                family,
                Box::new(move || BTreeMap::from([(label.to_string(), 1)])),
            )
        })
        .collect();
    let text = scrape(health_router(Readiness::new(), webhook, operator)).await;
    let served = families(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let listed: BTreeSet<String> = LIST.lines().map(str::to_owned).collect();
    let missing: Vec<&String> = listed.difference(&served).collect();
    let unlisted: Vec<&String> = served.difference(&listed).collect();
    assert!(
        missing.is_empty() && unlisted.is_empty(),
        "/metrics differs from tests/data/metrics.txt (names, types and labels must not change \
         unnoticed):\n listed, not served: {missing:#?}\n served, not listed: {unlisted:#?}\n{text}"
    );
}

/// A family nothing has counted into yet is served too (its HELP and TYPE), so one added
/// without an observation in the test above still fails here until the list names it. The
/// leader gauge alone waits for leader election to report.
#[tokio::test]
async fn every_family_is_served_before_its_first_observation() {
    let app = health_router(
        Readiness::new(),
        Arc::new(WebhookMetrics::new()),
        Arc::new(Metrics::default()),
    );
    let text = scrape(app).await;
    let served = families(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let listed: Vec<String> = LIST.lines().map(str::to_owned).collect();
    let mut expected = names(&listed);
    expected.remove("cftunnel_leader");
    assert_eq!(names(&served), expected, "{text}");
}

#[test]
fn openmetrics_counters_are_listed_by_their_series_name() {
    let text = "# HELP x_requests Requests.\n# TYPE x_requests counter\n\
                x_requests_total{path=\"/a,b\",code=\"2\\\"00\"} 1\n\
                # HELP x_seconds Time.\n# TYPE x_seconds histogram\n# UNIT x_seconds seconds\n\
                x_seconds_bucket{le=\"1.0\"} 1\nx_seconds_bucket{le=\"+Inf\"} 1\n\
                x_seconds_sum 0.5\nx_seconds_count 1\n# EOF\n";
    assert_eq!(
        families(text),
        Ok(BTreeSet::from([
            "x_requests_total counter code,path".to_owned(),
            "x_seconds histogram".to_owned(),
        ]))
    );
}

#[test]
fn families_typed_twice_stray_samples_and_mixed_labels_are_refused() {
    for text in [
        "# HELP a A.\n# TYPE a gauge\n# TYPE a gauge\n",
        "# HELP a A.\n# TYPE a gauge\nb 1\n",
        "# HELP a A.\n# TYPE a gauge\na{x=\"1\"} 1\na{y=\"1\"} 1\n",
        "# TYPE a gauge\na 1\n",
        "# HELP a A.\n# TYPE a gauge\na{x=\"1} 1\n",
    ] {
        assert!(families(text).is_err(), "{text}");
    }
}
