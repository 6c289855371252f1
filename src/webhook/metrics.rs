//! Admission request counters, a latency histogram and the leader gauge, registered into the
//! registry `/metrics` encodes ([`WebhookMetrics::register`]).
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

use crate::metrics::Declared;

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

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Request {
    endpoint: &'static str,
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EndpointLabel {
    endpoint: &'static str,
}

fn latency_histogram() -> Histogram {
    Histogram::new(BUCKETS)
}

const LEADER_HELP: &str =
    "Whether this replica holds the leader lease and runs the reconcilers (1) or not (0).";

/// The `cftunnel_leader` gauge: left out until leader election reports.
#[derive(Clone, Debug, Default)]
struct LeaderGauge(Arc<Mutex<Option<bool>>>);

impl LeaderGauge {
    fn get(&self) -> Option<bool> {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Collector for LeaderGauge {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(leading) = self.get() else {
            return Ok(());
        };
        let gauge = ConstGauge::new(i64::from(leading));
        gauge.encode(encoder.encode_descriptor(
            "cftunnel_leader",
            LEADER_HELP,
            None,
            MetricType::Gauge,
        )?)
    }
}

/// What reads the serving certificate's expiry (Unix seconds) at scrape time.
type ExpiryReader = Arc<dyn Fn() -> Option<i64> + Send + Sync>;

/// The `cftunnel_webhook_certificate_expiry_timestamp_seconds` gauge: when the certificate the
/// webhook serves now expires, read from it at each scrape (so a reloaded pair shows at once).
#[derive(Clone, Default)]
struct CertificateExpiry(Arc<Mutex<Option<ExpiryReader>>>);

impl std::fmt::Debug for CertificateExpiry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertificateExpiry").finish_non_exhaustive()
    }
}

impl Collector for CertificateExpiry {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let reader = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let family = encoder.encode_descriptor(
            "cftunnel_webhook_certificate_expiry_timestamp_seconds",
            EXPIRY_HELP,
            None,
            MetricType::Gauge,
        )?;
        if let Some(expires) = reader.and_then(|read| read()) {
            ConstGauge::new(expires).encode(family)?;
        }
        Ok(())
    }
}

const EXPIRY_HELP: &str = "Unix time the webhook's serving certificate expires (cftunnel renews it at two thirds of its life).";

/// Counters shared by the HTTPS router and the health server.
#[derive(Debug)]
pub struct WebhookMetrics {
    requests: Family<Request, Counter>,
    latency: Family<EndpointLabel, Histogram, fn() -> Histogram>,
    /// Whether this process runs the reconcilers; unset until leader election reports.
    leader: LeaderGauge,
    /// Log lines about refused requests left out by the rate limit.
    log_lines_suppressed: Counter,
    certificate_expiry: CertificateExpiry,
}

impl Default for WebhookMetrics {
    fn default() -> Self {
        Self {
            requests: Family::default(),
            latency: Family::new_with_constructor(latency_histogram),
            leader: LeaderGauge::default(),
            log_lines_suppressed: Counter::default(),
            certificate_expiry: CertificateExpiry::default(),
        }
    }
}

impl WebhookMetrics {
    /// Empty counters.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds every metric to `registry`; the registry shares them, so it encodes what these
    /// counters count from then on.
    pub(crate) fn register(&self, registry: &mut Registry) {
        registry.register_collector(Box::new(self.leader.clone()));
        registry.register_collector(Box::new(self.certificate_expiry.clone()));
        registry.register(
            "cftunnel_admission_requests",
            "Admission and conversion requests by endpoint and result",
            Declared(self.requests.clone()),
        );
        registry.register(
            "cftunnel_admission_log_lines_suppressed",
            "Log lines about refused requests left out by the rate limit (one summary line per \
             interval says how many)",
            self.log_lines_suppressed.clone(),
        );
        registry.register_with_unit(
            "cftunnel_admission_request_duration",
            "Time to answer an admission or conversion request",
            Unit::Seconds,
            Declared(self.latency.clone()),
        );
    }

    /// Records one finished request.
    pub(crate) fn observe(&self, endpoint: Endpoint, outcome: Outcome, elapsed: Duration) {
        let endpoint = endpoint.as_str();
        let result = outcome.as_str();
        self.requests
            .get_or_create(&Request { endpoint, result })
            .inc();
        self.latency
            .get_or_create(&EndpointLabel { endpoint })
            .observe(elapsed.as_secs_f64());
    }

    /// Requests seen so far for one endpoint and outcome.
    pub fn requests(&self, endpoint: Endpoint, outcome: Outcome) -> u64 {
        let labels = Request {
            endpoint: endpoint.as_str(),
            result: outcome.as_str(),
        };
        self.requests
            .get(&labels)
            .map_or(0, |counter| counter.get())
    }

    /// Counts log lines about refused requests that the rate limit left out.
    pub(crate) fn add_suppressed_log_lines(&self, lines: u64) {
        self.log_lines_suppressed.inc_by(lines);
    }

    /// Log lines left out so far.
    pub fn suppressed_log_lines(&self) -> u64 {
        self.log_lines_suppressed.get()
    }

    /// Reads the serving certificate's expiry with `read` at every scrape.
    pub(crate) fn watch_certificate(&self, read: impl Fn() -> Option<i64> + Send + Sync + 'static) {
        *self
            .certificate_expiry
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(Arc::new(read));
    }

    /// Sets the `cftunnel_leader` gauge.
    pub(crate) fn set_leading(&self, leading: bool) {
        *self.leader.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(leading);
    }

    /// The `cftunnel_leader` gauge, if leader election has reported.
    pub fn leading(&self) -> Option<bool> {
        self.leader.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::encoding::text;

    /// The OpenMetrics text of `metrics` alone.
    fn render(metrics: &WebhookMetrics) -> String {
        let mut registry = Registry::default();
        metrics.register(&mut registry);
        let mut text = String::new();
        assert_eq!(text::encode(&mut text, &registry), Ok(()));
        text
    }

    #[test]
    fn the_certificate_expiry_is_read_at_each_scrape() {
        let metrics = WebhookMetrics::new();
        let family = "# TYPE cftunnel_webhook_certificate_expiry_timestamp_seconds gauge";
        let text = render(&metrics);
        assert!(text.lines().any(|l| l == family), "{text}");
        let expiry = Arc::new(Mutex::new(1_800_000_000));
        let read = expiry.clone();
        metrics
            .watch_certificate(move || Some(*read.lock().unwrap_or_else(PoisonError::into_inner)));
        let sample = |text: &str| {
            text.lines()
                .find_map(|l| {
                    l.strip_prefix("cftunnel_webhook_certificate_expiry_timestamp_seconds ")
                })
                .map(str::to_owned)
        };
        assert_eq!(
            sample(&text),
            None,
            "no sample before a certificate is watched"
        );
        assert_eq!(sample(&render(&metrics)).as_deref(), Some("1800000000"));
        *expiry.lock().unwrap_or_else(PoisonError::into_inner) = 1_900_000_000;
        assert_eq!(sample(&render(&metrics)).as_deref(), Some("1900000000"));
    }

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
        let text = render(&metrics);
        let lines: Vec<&str> = text.lines().collect();
        for expected in [
            "# TYPE cftunnel_admission_requests counter",
            "cftunnel_admission_requests_total{endpoint=\"mutate\",result=\"allowed\"} 1",
            "cftunnel_admission_requests_total{endpoint=\"mutate\",result=\"denied\"} 1",
            "# TYPE cftunnel_admission_request_duration_seconds histogram",
            "cftunnel_admission_request_duration_seconds_bucket{le=\"0.0025\",endpoint=\"mutate\"} 0",
            "cftunnel_admission_request_duration_seconds_bucket{le=\"0.005\",endpoint=\"mutate\"} 1",
            "cftunnel_admission_request_duration_seconds_bucket{le=\"2.5\",endpoint=\"mutate\"} 1",
            "cftunnel_admission_request_duration_seconds_bucket{le=\"+Inf\",endpoint=\"mutate\"} 2",
            "cftunnel_admission_request_duration_seconds_count{endpoint=\"mutate\"} 2",
        ] {
            assert!(lines.contains(&expected), "missing {expected:?} in\n{text}");
        }
    }

    #[test]
    fn leader_gauge_appears_once_reported() {
        let metrics = WebhookMetrics::new();
        let before = render(&metrics);
        assert!(!before.contains("cftunnel_leader"), "{before}");
        metrics.set_leading(true);
        let text = render(&metrics);
        assert!(
            text.lines().any(|l| l == "# TYPE cftunnel_leader gauge"),
            "{text}"
        );
        assert!(text.lines().any(|l| l == "cftunnel_leader 1"), "{text}");
        metrics.set_leading(false);
        let text = render(&metrics);
        assert!(text.lines().any(|l| l == "cftunnel_leader 0"), "{text}");
    }
}
