//! Reconciles of Tunnels and ClusterTunnels: how each ended and how long it took.
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

use super::Declared;

/// Upper bounds (seconds) of reconcile durations.
const BUCKETS: [f64; 10] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Ended {
    kind: &'static str,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Kind {
    kind: &'static str,
}

fn duration_histogram() -> Histogram {
    Histogram::new(BUCKETS)
}

/// `cftunnel_reconciles_total` and `cftunnel_reconcile_duration_seconds`.
#[derive(Debug)]
pub(super) struct ReconcileMetrics {
    reconciles: Family<Ended, Counter>,
    durations: Family<Kind, Histogram, fn() -> Histogram>,
}

impl Default for ReconcileMetrics {
    fn default() -> Self {
        Self {
            reconciles: Family::default(),
            durations: Family::new_with_constructor(duration_histogram),
        }
    }
}

impl ReconcileMetrics {
    pub(super) fn record(&self, kind: &'static str, succeeded: bool, elapsed: Duration) {
        let outcome = if succeeded { "success" } else { "error" };
        self.reconciles
            .get_or_create(&Ended { kind, outcome })
            .inc();
        self.durations
            .get_or_create(&Kind { kind })
            .observe(elapsed.as_secs_f64());
    }

    pub(super) fn register(&self, registry: &mut Registry) {
        registry.register(
            "cftunnel_reconciles",
            "Reconciles of Tunnels and ClusterTunnels by kind and outcome",
            Declared(self.reconciles.clone()),
        );
        registry.register_with_unit(
            "cftunnel_reconcile_duration",
            "Time one reconcile took, by kind",
            Unit::Seconds,
            Declared(self.durations.clone()),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::encoding::text;

    #[test]
    fn durations_fall_in_cumulative_buckets_by_kind() {
        let metrics = ReconcileMetrics::default();
        metrics.record("tunnel", true, Duration::from_millis(30));
        metrics.record("tunnel", false, Duration::from_secs(5));
        let mut registry = Registry::default();
        metrics.register(&mut registry);
        let mut out = String::new();
        assert_eq!(text::encode(&mut out, &registry), Ok(()));
        for line in [
            "cftunnel_reconciles_total{kind=\"tunnel\",outcome=\"success\"} 1",
            "cftunnel_reconciles_total{kind=\"tunnel\",outcome=\"error\"} 1",
            "cftunnel_reconcile_duration_seconds_bucket{le=\"0.025\",kind=\"tunnel\"} 0",
            "cftunnel_reconcile_duration_seconds_bucket{le=\"0.05\",kind=\"tunnel\"} 1",
            "cftunnel_reconcile_duration_seconds_bucket{le=\"2.5\",kind=\"tunnel\"} 1",
            "cftunnel_reconcile_duration_seconds_bucket{le=\"10.0\",kind=\"tunnel\"} 2",
            "cftunnel_reconcile_duration_seconds_bucket{le=\"+Inf\",kind=\"tunnel\"} 2",
            "cftunnel_reconcile_duration_seconds_sum{kind=\"tunnel\"} 5.03",
            "cftunnel_reconcile_duration_seconds_count{kind=\"tunnel\"} 2",
        ] {
            assert!(
                out.lines().any(|l| l == line),
                "{line} missing from:\n{out}"
            );
        }
    }
}
