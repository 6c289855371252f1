//! The operator's metrics: reconciles, Cloudflare calls, rate-limiter waits, DNS writes,
//! tunnels and routes by state, each tunnel's edge status and pods, route computations, status writes, watch restarts,
//! AccessPolicies unknown, DNS problems and Access applications and targets by state. `/metrics` serves them
//! with the webhook's admission metrics.
//!
//! A leaf: [`Metrics`] is a handle that the wiring passes to the caches, the term context (so
//! every reconcile reaches it), the Cloudflare clients (as their [`CallObserver`]) and the health
//! server. It knows no controller type; callers hand it label values. Its metrics are
//! `prometheus_client` metrics, one set per process ([`Metrics::process`]), as Prometheus
//! clients keep a default registry, so operators run side by side in one test process count
//! into the same series; [`Metrics::register`] adds them to the registry `/metrics` encodes.
//! Names follow Prometheus conventions: counters end in `_total` (the encoder adds it), durations
//! are histograms in `_seconds`. Every family, its type and its labels are listed in
//! `tests/data/metrics.txt`, which a test compares with what `/metrics` serves.
//!
//! [`CallObserver`]: cftunnel_cloudflare::CallObserver
mod budget;
mod cloudflare;
mod counts;
mod declared;
mod dns;
mod edge;
mod pipeline;
mod reconcile;
mod state;
mod watches;

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use cftunnel_types::TunnelKind;
use prometheus_client::encoding::text;
use prometheus_client::registry::Registry;

use budget::BudgetGauges;
use cloudflare::CloudflareMetrics;
use counts::CountGauges;
pub(crate) use counts::{CountSource, Counted, TrackedCounts};
pub(crate) use declared::Declared;
use dns::DnsMetrics;
use edge::EdgeGauges;
pub(crate) use edge::{EdgeSample, EdgeSource, TrackedEdges};
use pipeline::PipelineMetrics;
use reconcile::ReconcileMetrics;
use state::StateGauges;
pub(crate) use state::{StateSource, TrackedRoutes, TrackedTunnels};
use watches::WatchMetrics;

/// Label value of a tunnel kind.
fn kind_label(kind: TunnelKind) -> &'static str {
    match kind {
        TunnelKind::Tunnel => "tunnel",
        TunnelKind::ClusterTunnel => "clustertunnel",
    }
}

/// The metrics handle. Cheap to share (`Arc`); every method takes `&self`.
#[derive(Default)]
pub struct Metrics {
    reconcile: ReconcileMetrics,
    cloudflare: CloudflareMetrics,
    dns: DnsMetrics,
    pipeline: PipelineMetrics,
    watches: WatchMetrics,
    state: StateGauges,
    edge: EdgeGauges,
    budget: BudgetGauges,
    counts: CountGauges,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

static PROCESS: LazyLock<Arc<Metrics>> = LazyLock::new(Arc::default);

impl Metrics {
    /// The metrics of this process: what `/metrics` serves.
    pub fn process() -> Arc<Metrics> {
        PROCESS.clone()
    }

    /// Adds every metric to `registry`; the registry shares them, so it encodes what this handle
    /// counts from then on.
    pub(crate) fn register(&self, registry: &mut Registry) {
        self.reconcile.register(registry);
        self.cloudflare.register(registry);
        self.dns.register(registry);
        self.pipeline.register(registry);
        self.state.register(registry);
        self.edge.register(registry);
        self.budget.register(registry);
        self.counts.register(registry);
        self.watches.register(registry);
    }

    /// These metrics alone, in OpenMetrics text as `/metrics` serves them.
    pub fn render(&self) -> String {
        let mut registry = Registry::default();
        self.register(&mut registry);
        let mut out = String::new();
        if let Err(error) = text::encode(&mut out, &registry) {
            tracing::warn!(%error, "the operator's metrics could not be encoded");
        }
        out
    }

    /// One finished reconcile of a Tunnel or ClusterTunnel: `success` when it converged or waits
    /// for something expected, `error` when it failed (and was reported in `Ready`).
    pub fn reconciled(&self, kind: TunnelKind, succeeded: bool, elapsed: Duration) {
        self.reconcile.record(kind_label(kind), succeeded, elapsed);
    }

    /// One DNS record write; `action` is create, update, take_over or delete.
    pub(crate) fn dns_written(&self, action: &'static str, succeeded: bool) {
        self.dns.written(action, succeeded);
    }

    /// The route reconciler computed a route table.
    pub(crate) fn route_computed(&self) {
        self.pipeline.route_computed();
    }

    /// The status writer wrote (or failed to write) one object of `kind`, or recorded an Event.
    pub(crate) fn status_written(&self, kind: &'static str, succeeded: bool) {
        self.pipeline.status_written(kind, succeeded);
    }

    /// A watch stream failed and restarts with backoff. `what` is a type name; its last path
    /// segment is the label.
    pub(crate) fn watch_restarted(&self, what: &str) {
        self.watches.restarted(what);
    }

    /// The AccessPolicies became unknown (`cause`: `forbidden`, `undecodable`, `watch_failed`):
    /// hostnames not served in the open before stay closed until they are known again.
    pub(crate) fn access_policies_unknown(&self, cause: &'static str) {
        self.watches.access_policies_unknown(cause);
    }

    /// Counts a controller event that is a failed watch of its queue (the controller restarts
    /// it).
    pub(crate) fn controller_event<T, E1, E2>(
        &self,
        kind: &str,
        result: &Result<T, kube::runtime::controller::Error<E1, E2>>,
    ) where
        E1: std::error::Error + 'static,
        E2: std::error::Error + 'static,
    {
        if let Err(kube::runtime::controller::Error::QueueError(_)) = result {
            self.watch_restarted(kind);
        }
    }

    /// A share of the route gauge for one route loop, dropped with the loop (at the end of its
    /// term), so a deposed leader's routes and those of finished loops are never counted.
    pub(crate) fn track_routes(self: &Arc<Self>) -> TrackedRoutes {
        self.state.track_routes()
    }

    /// Each credential's budget, read from the process's pacers at scrape time.
    pub(crate) fn track_limiters(&self, limiters: cftunnel_cloudflare::RateLimiters) {
        self.budget.track(limiters);
    }

    /// Each tunnel's word at the edge and its pods, as `source` reads them at scrape time,
    /// while the returned guard lives (the edge health task holds it for its term).
    pub(crate) fn track_edges(&self, source: EdgeSource) -> TrackedEdges {
        self.edge.track(source)
    }

    /// Counts into `family` what `source` reads at scrape time, while the returned guard lives
    /// (the task that holds what it reads keeps it for its term).
    pub(crate) fn track_counts(&self, family: Counted, source: CountSource) -> TrackedCounts {
        self.counts.track(family, source)
    }

    /// Counts the tunnels of one kind by the states `source` reads, while the returned guard
    /// lives (the controller that owns the store holds it).
    pub(crate) fn track_tunnels(
        self: &Arc<Self>,
        kind: TunnelKind,
        source: StateSource,
    ) -> TrackedTunnels {
        self.state.track_tunnels(kind_label(kind), source)
    }
}
