//! Cloudflare API calls as the clients report them through their [`CallObserver`]: every
//! attempt, how each call ended, retries, rate-limiter waits and 429 pauses.
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use cftunnel_cloudflare::{AttemptStatus, CallObserver, CallOutcome};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

use super::Declared;
use super::Metrics;

/// Upper bounds (seconds) of rate-limiter waits: the budget is a few requests per second, a 429
/// pauses for its Retry-After.
const WAIT_BUCKETS: [f64; 9] = [0.001, 0.01, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0, 60.0];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Attempt {
    operation: &'static str,
    status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Call {
    operation: &'static str,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Retry {
    operation: &'static str,
    reason: &'static str,
}

/// `cftunnel_cloudflare_*`.
#[derive(Debug)]
pub(super) struct CloudflareMetrics {
    requests: Family<Attempt, Counter>,
    calls: Family<Call, Counter>,
    retries: Family<Retry, Counter>,
    paused: Counter<f64, AtomicU64>,
    wait: Histogram,
}

impl Default for CloudflareMetrics {
    fn default() -> Self {
        Self {
            requests: Family::default(),
            calls: Family::default(),
            retries: Family::default(),
            paused: Counter::default(),
            wait: Histogram::new(WAIT_BUCKETS),
        }
    }
}

impl CloudflareMetrics {
    pub(super) fn register(&self, registry: &mut Registry) {
        registry.register(
            "cftunnel_cloudflare_requests",
            "Cloudflare API requests (each attempt) by operation and HTTP status, or \
             timeout/transport_error",
            Declared(self.requests.clone()),
        );
        registry.register(
            "cftunnel_cloudflare_calls",
            "Cloudflare API calls by operation and how each ended after its retries (ok, 4xx, \
             5xx, 429, transport_error, timeout, invalid_answer, not_leading)",
            Declared(self.calls.clone()),
        );
        registry.register(
            "cftunnel_cloudflare_retries",
            "Failed Cloudflare attempts tried again, by operation and reason (5xx, 429, \
             transport_error, timeout)",
            Declared(self.retries.clone()),
        );
        registry.register_with_unit(
            "cftunnel_cloudflare_ratelimit_paused",
            "Time every call of a credential was paused by Cloudflare's 429 answers (their \
             Retry-After)",
            Unit::Seconds,
            self.paused.clone(),
        );
        registry.register_with_unit(
            "cftunnel_cloudflare_ratelimit_wait",
            "Time Cloudflare requests waited for the per-credential rate limiter",
            Unit::Seconds,
            self.wait.clone(),
        );
    }
}

impl CallObserver for Metrics {
    fn attempt(&self, operation: &'static str, status: AttemptStatus) {
        let status = status.to_string();
        let labels = Attempt { operation, status };
        self.cloudflare.requests.get_or_create(&labels).inc();
    }

    fn rate_limit_waited(&self, waited: Duration) {
        self.cloudflare.wait.observe(waited.as_secs_f64());
    }

    fn call_ended(&self, operation: &'static str, outcome: CallOutcome) {
        let outcome = outcome.as_str();
        let labels = Call { operation, outcome };
        self.cloudflare.calls.get_or_create(&labels).inc();
    }

    fn retried(&self, operation: &'static str, reason: CallOutcome) {
        let reason = reason.as_str();
        let labels = Retry { operation, reason };
        self.cloudflare.retries.get_or_create(&labels).inc();
    }

    fn paused(&self, pause: Duration) {
        self.cloudflare.paused.inc_by(pause.as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cloudflare_outcomes_retries_and_pauses_are_counted() {
        let metrics = Metrics::default();
        metrics.call_ended("dns.batch", CallOutcome::Ok);
        metrics.call_ended("dns.batch", CallOutcome::Ok);
        metrics.call_ended("tunnel.create", CallOutcome::ServerError);
        metrics.retried("tunnel.create", CallOutcome::ServerError);
        metrics.retried("tunnel.create", CallOutcome::RateLimited);
        metrics.paused(Duration::from_secs(3));
        metrics.paused(Duration::from_millis(1500));
        metrics.attempt("tunnel.create", AttemptStatus::Http(503));
        metrics.rate_limit_waited(Duration::from_millis(50));
        let text = metrics.render();
        for line in [
            "cftunnel_cloudflare_calls_total{operation=\"dns.batch\",outcome=\"ok\"} 2",
            "cftunnel_cloudflare_calls_total{operation=\"tunnel.create\",outcome=\"5xx\"} 1",
            "cftunnel_cloudflare_retries_total{operation=\"tunnel.create\",reason=\"5xx\"} 1",
            "cftunnel_cloudflare_retries_total{operation=\"tunnel.create\",reason=\"429\"} 1",
            "cftunnel_cloudflare_requests_total{operation=\"tunnel.create\",status=\"503\"} 1",
            "cftunnel_cloudflare_ratelimit_paused_seconds_total 4.5",
            "cftunnel_cloudflare_ratelimit_wait_seconds_bucket{le=\"0.01\"} 0",
            "cftunnel_cloudflare_ratelimit_wait_seconds_bucket{le=\"0.1\"} 1",
            "cftunnel_cloudflare_ratelimit_wait_seconds_bucket{le=\"60.0\"} 1",
            "cftunnel_cloudflare_ratelimit_wait_seconds_count 1",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "{line} missing from:\n{text}"
            );
        }
    }
}
