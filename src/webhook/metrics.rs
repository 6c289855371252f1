//! Admission request counters, a latency histogram and the leader gauge, rendered in
//! Prometheus text format.
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// Upper bounds (seconds) of the latency histogram buckets.
const BUCKETS: [f64; 12] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
];

/// The webhook endpoint a request came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Endpoint {
    Validate,
    Mutate,
    Convert,
}

impl Endpoint {
    /// Label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Validate => "validate",
            Self::Mutate => "mutate",
            Self::Convert => "convert",
        }
    }
}

/// How a request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Outcome {
    Allowed,
    Denied,
    Converted,
    ConversionFailed,
    BadRequest,
    TooLarge,
    NotReady,
    Timeout,
    /// Refused with 429: the webhook already holds its budget of request bytes or of decoding.
    Busy,
    InternalError,
}

impl Outcome {
    /// Label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allowed => "allowed",
            Self::Denied => "denied",
            Self::Converted => "converted",
            Self::ConversionFailed => "conversion_failed",
            Self::BadRequest => "bad_request",
            Self::TooLarge => "too_large",
            Self::NotReady => "not_ready",
            Self::Timeout => "timeout",
            Self::Busy => "busy",
            Self::InternalError => "internal_error",
        }
    }
}

#[derive(Debug, Default, Clone)]
struct Histogram {
    buckets: [u64; BUCKETS.len()],
    sum: f64,
    count: u64,
}

#[derive(Debug, Default)]
struct Counts {
    requests: BTreeMap<(Endpoint, Outcome), u64>,
    latency: BTreeMap<Endpoint, Histogram>,
    /// Whether this process runs the reconcilers; unset until leader election reports.
    leading: Option<bool>,
    /// Log lines about refused requests left out by the rate limit.
    log_lines_suppressed: u64,
}

/// Counters shared by the HTTPS router and the health server.
#[derive(Debug, Default)]
pub struct WebhookMetrics {
    counts: Mutex<Counts>,
}

impl WebhookMetrics {
    /// Empty counters.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records one finished request.
    pub(crate) fn observe(&self, endpoint: Endpoint, outcome: Outcome, elapsed: Duration) {
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        *counts.requests.entry((endpoint, outcome)).or_default() += 1;
        let seconds = elapsed.as_secs_f64();
        let histogram = counts.latency.entry(endpoint).or_default();
        for (bound, bucket) in BUCKETS.iter().zip(histogram.buckets.iter_mut()) {
            if seconds <= *bound {
                *bucket += 1;
            }
        }
        histogram.sum += seconds;
        histogram.count += 1;
    }

    /// Requests seen so far for one endpoint and outcome.
    pub fn requests(&self, endpoint: Endpoint, outcome: Outcome) -> u64 {
        let counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        counts
            .requests
            .get(&(endpoint, outcome))
            .copied()
            .unwrap_or(0)
    }

    /// Counts log lines about refused requests that the rate limit left out.
    pub(crate) fn add_suppressed_log_lines(&self, lines: u64) {
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        counts.log_lines_suppressed += lines;
    }

    /// Log lines left out so far.
    pub fn suppressed_log_lines(&self) -> u64 {
        self.counts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .log_lines_suppressed
    }

    /// Sets the `cftunnel_leader` gauge.
    pub(crate) fn set_leading(&self, leading: bool) {
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        counts.leading = Some(leading);
    }

    /// The `cftunnel_leader` gauge, if leader election has reported.
    pub fn leading(&self) -> Option<bool> {
        self.counts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .leading
    }

    /// Appends the metrics in Prometheus text exposition format (0.0.4).
    pub fn encode(&self, out: &mut String) {
        let counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(leading) = counts.leading {
            out.push_str("# HELP cftunnel_leader Whether this replica holds the leader lease and runs the reconcilers (1) or not (0).\n");
            out.push_str("# TYPE cftunnel_leader gauge\n");
            let _ = writeln!(out, "cftunnel_leader {}", u8::from(leading));
        }
        out.push_str("# HELP cftunnel_admission_requests_total Admission and conversion requests by endpoint and result.\n");
        out.push_str("# TYPE cftunnel_admission_requests_total counter\n");
        for ((endpoint, outcome), value) in &counts.requests {
            let _ = writeln!(
                out,
                "cftunnel_admission_requests_total{{endpoint=\"{}\",result=\"{}\"}} {value}",
                endpoint.as_str(),
                outcome.as_str()
            );
        }
        out.push_str("# HELP cftunnel_admission_log_lines_suppressed_total Log lines about refused requests left out by the rate limit (one summary line per interval says how many).\n");
        out.push_str("# TYPE cftunnel_admission_log_lines_suppressed_total counter\n");
        let _ = writeln!(
            out,
            "cftunnel_admission_log_lines_suppressed_total {}",
            counts.log_lines_suppressed
        );
        out.push_str("# HELP cftunnel_admission_request_duration_seconds Time to answer an admission or conversion request.\n");
        out.push_str("# TYPE cftunnel_admission_request_duration_seconds histogram\n");
        for (endpoint, histogram) in &counts.latency {
            let label = endpoint.as_str();
            for (bound, bucket) in BUCKETS.iter().zip(histogram.buckets.iter()) {
                let _ = writeln!(
                    out,
                    "cftunnel_admission_request_duration_seconds_bucket{{endpoint=\"{label}\",le=\"{bound}\"}} {bucket}"
                );
            }
            let _ = writeln!(
                out,
                "cftunnel_admission_request_duration_seconds_bucket{{endpoint=\"{label}\",le=\"+Inf\"}} {}",
                histogram.count
            );
            let _ = writeln!(
                out,
                "cftunnel_admission_request_duration_seconds_sum{{endpoint=\"{label}\"}} {}",
                histogram.sum
            );
            let _ = writeln!(
                out,
                "cftunnel_admission_request_duration_seconds_count{{endpoint=\"{label}\"}} {}",
                histogram.count
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_requests_by_endpoint_and_outcome() {
        let metrics = WebhookMetrics::new();
        metrics.observe(
            Endpoint::Validate,
            Outcome::Allowed,
            Duration::from_millis(2),
        );
        metrics.observe(
            Endpoint::Validate,
            Outcome::Allowed,
            Duration::from_millis(2),
        );
        metrics.observe(Endpoint::Convert, Outcome::BadRequest, Duration::ZERO);
        assert_eq!(metrics.requests(Endpoint::Validate, Outcome::Allowed), 2);
        assert_eq!(metrics.requests(Endpoint::Convert, Outcome::BadRequest), 1);
        assert_eq!(metrics.requests(Endpoint::Mutate, Outcome::Allowed), 0);
    }

    #[test]
    fn encodes_counters_and_cumulative_buckets() {
        let metrics = WebhookMetrics::new();
        metrics.observe(Endpoint::Mutate, Outcome::Denied, Duration::from_millis(3));
        metrics.observe(Endpoint::Mutate, Outcome::Allowed, Duration::from_secs(10));
        let mut text = String::new();
        metrics.encode(&mut text);
        let lines: Vec<&str> = text.lines().collect();
        for expected in [
            "# TYPE cftunnel_admission_requests_total counter",
            "cftunnel_admission_requests_total{endpoint=\"mutate\",result=\"allowed\"} 1",
            "cftunnel_admission_requests_total{endpoint=\"mutate\",result=\"denied\"} 1",
            "# TYPE cftunnel_admission_request_duration_seconds histogram",
            "cftunnel_admission_request_duration_seconds_bucket{endpoint=\"mutate\",le=\"0.0025\"} 0",
            "cftunnel_admission_request_duration_seconds_bucket{endpoint=\"mutate\",le=\"0.005\"} 1",
            "cftunnel_admission_request_duration_seconds_bucket{endpoint=\"mutate\",le=\"2.5\"} 1",
            "cftunnel_admission_request_duration_seconds_bucket{endpoint=\"mutate\",le=\"+Inf\"} 2",
            "cftunnel_admission_request_duration_seconds_count{endpoint=\"mutate\"} 2",
        ] {
            assert!(lines.contains(&expected), "missing {expected:?} in\n{text}");
        }
    }

    #[test]
    fn leader_gauge_appears_once_reported() {
        let metrics = WebhookMetrics::new();
        let mut before = String::new();
        metrics.encode(&mut before);
        assert!(!before.contains("cftunnel_leader"), "{before}");
        metrics.set_leading(true);
        let mut text = String::new();
        metrics.encode(&mut text);
        assert!(
            text.lines().any(|l| l == "# TYPE cftunnel_leader gauge"),
            "{text}"
        );
        assert!(text.lines().any(|l| l == "cftunnel_leader 1"), "{text}");
        metrics.set_leading(false);
        let mut text = String::new();
        metrics.encode(&mut text);
        assert!(text.lines().any(|l| l == "cftunnel_leader 0"), "{text}");
    }
}
