//! Tunnels and routes by state, counted when `/metrics` is scraped: a collector reads the
//! tunnels from the controllers' stores and sums the route counts the route loops last set.
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

const TUNNELS_HELP: &str =
    "Tunnels and ClusterTunnels by kind and state (the reason of Ready, Pending or Deleting).";
const ROUTES_HELP: &str =
    "Routes of TunnelBindings and labelled Services by state (the reason of each route).";

/// The states of the tunnels of one kind, read from a controller's store at scrape time.
pub(crate) type StateSource = Box<dyn Fn() -> Vec<&'static str> + Send + Sync>;

#[derive(Default)]
struct Sources {
    /// Each route loop's counts of routes by reason.
    routes: BTreeMap<u64, BTreeMap<&'static str, u64>>,
    /// Each tunnel controller's kind label and the states of its tunnels.
    tunnels: BTreeMap<u64, (&'static str, StateSource)>,
}

/// The `cftunnel_tunnels` and `cftunnel_routes` gauges: a [`Collector`] over the sources the
/// controllers register while they run.
#[derive(Clone, Default)]
pub(super) struct StateGauges {
    sources: Arc<Mutex<Sources>>,
    next_source: Arc<AtomicU64>,
}

impl std::fmt::Debug for StateGauges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateGauges").finish_non_exhaustive()
    }
}

impl StateGauges {
    fn sources(&self) -> MutexGuard<'_, Sources> {
        self.sources.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn register(&self, registry: &mut Registry) {
        registry.register_collector(Box::new(self.clone()));
    }

    pub(super) fn track_routes(&self) -> TrackedRoutes {
        let id = self.next_source.fetch_add(1, Ordering::Relaxed);
        self.sources().routes.insert(id, BTreeMap::new());
        TrackedRoutes {
            gauges: self.clone(),
            id,
        }
    }

    pub(super) fn track_tunnels(&self, kind: &'static str, source: StateSource) -> TrackedTunnels {
        let id = self.next_source.fetch_add(1, Ordering::Relaxed);
        self.sources().tunnels.insert(id, (kind, source));
        TrackedTunnels {
            gauges: self.clone(),
            id,
        }
    }

    /// Tunnels by kind and state, read from their stores now.
    fn tunnel_counts(&self) -> BTreeMap<(&'static str, &'static str), u64> {
        let mut counts = BTreeMap::new();
        for (kind, source) in self.sources().tunnels.values() {
            for state in source() {
                *counts.entry((*kind, state)).or_default() += 1;
            }
        }
        counts
    }

    /// Routes by state, summed over the route loops.
    fn route_counts(&self) -> BTreeMap<&'static str, u64> {
        let mut counts = BTreeMap::new();
        for loop_counts in self.sources().routes.values() {
            for (state, count) in loop_counts {
                *counts.entry(*state).or_default() += count;
            }
        }
        counts
    }
}

impl Collector for StateGauges {
    /// Both families, with their HELP and TYPE even while they have no series (see
    /// [`super::Declared`]).
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let mut family =
            encoder.encode_descriptor("cftunnel_tunnels", TUNNELS_HELP, None, MetricType::Gauge)?;
        for ((kind, state), count) in self.tunnel_counts() {
            let labels = [("kind", kind), ("state", state)];
            ConstGauge::new(count).encode(family.encode_family(&labels)?)?;
        }
        let mut family =
            encoder.encode_descriptor("cftunnel_routes", ROUTES_HELP, None, MetricType::Gauge)?;
        for (state, count) in self.route_counts() {
            ConstGauge::new(count).encode(family.encode_family(&[("state", state)])?)?;
        }
        Ok(())
    }
}

/// One route loop's share of the route gauge; see [`super::Metrics::track_routes`].
#[derive(Debug)]
pub(crate) struct TrackedRoutes {
    gauges: StateGauges,
    id: u64,
}

impl TrackedRoutes {
    /// Replaces this loop's share of the gauge with these counts of routes by reason.
    pub fn set(&self, counts: BTreeMap<&'static str, u64>) {
        self.gauges.sources().routes.insert(self.id, counts);
    }
}

impl Drop for TrackedRoutes {
    fn drop(&mut self) {
        self.gauges.sources().routes.remove(&self.id);
    }
}

/// Unregisters a store from the tunnel gauge when dropped.
#[derive(Debug)]
pub(crate) struct TrackedTunnels {
    gauges: StateGauges,
    id: u64,
}

impl Drop for TrackedTunnels {
    fn drop(&mut self) {
        self.gauges.sources().tunnels.remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::encoding::text;

    fn render(gauges: &StateGauges) -> String {
        let mut registry = Registry::default();
        gauges.register(&mut registry);
        let mut out = String::new();
        assert_eq!(text::encode(&mut out, &registry), Ok(()));
        out
    }

    #[test]
    fn tunnels_and_routes_are_counted_while_their_sources_live() {
        let gauges = StateGauges::default();
        let tunnels =
            gauges.track_tunnels("tunnel", Box::new(|| vec!["Ready", "Ready", "Pending"]));
        let first = gauges.track_routes();
        let second = gauges.track_routes();
        first.set(BTreeMap::from([("Routed", 2), ("ServiceNotFound", 1)]));
        second.set(BTreeMap::from([("Routed", 3)]));
        let text = render(&gauges);
        for line in [
            "# TYPE cftunnel_tunnels gauge",
            "cftunnel_tunnels{kind=\"tunnel\",state=\"Ready\"} 2",
            "cftunnel_tunnels{kind=\"tunnel\",state=\"Pending\"} 1",
            "# TYPE cftunnel_routes gauge",
            "cftunnel_routes{state=\"Routed\"} 5",
            "cftunnel_routes{state=\"ServiceNotFound\"} 1",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "{line} missing from:\n{text}"
            );
        }
        drop((tunnels, first));
        let text = render(&gauges);
        assert!(!text.contains("cftunnel_tunnels{"), "{text}");
        assert!(text.contains("# TYPE cftunnel_tunnels gauge\n"), "{text}");
        assert!(
            text.lines()
                .any(|l| l == "cftunnel_routes{state=\"Routed\"} 3"),
            "{text}"
        );
        assert!(!text.contains("ServiceNotFound"), "{text}");
    }
}
