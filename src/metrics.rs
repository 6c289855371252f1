//! The operator's metrics: reconciles, Cloudflare calls, rate-limiter waits, DNS writes,
//! tunnels and routes by state, watch restarts. `/metrics` appends them after the admission
//! series of the webhook.
//!
//! A leaf: [`Metrics`] is a handle that the wiring passes to the caches, the term context (so
//! every reconcile reaches it), the Cloudflare clients (as their [`CallObserver`]) and the health
//! server. It knows no controller type; callers hand it label values. There is one registry per
//! process ([`Metrics::process`]), as Prometheus clients keep a default registry, so operators
//! run side by side in one test process share it. Names follow Prometheus conventions: counters
//! end in `_total`, durations are histograms in `_seconds`.
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, PoisonError};
use std::time::Duration;

use cftunnel_cloudflare::{AttemptStatus, CallObserver, CallOutcome};
use cftunnel_types::TunnelKind;

/// Upper bounds (seconds) of reconcile durations.
const RECONCILE_BUCKETS: [f64; 10] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0];
/// Upper bounds (seconds) of rate-limiter waits: the budget is a few requests per second, a 429
/// pauses for its Retry-After.
const WAIT_BUCKETS: [f64; 9] = [0.001, 0.01, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0, 60.0];

#[derive(Debug, Clone, Default)]
struct Histogram {
    buckets: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Histogram {
    fn observe(&mut self, bounds: &[f64], seconds: f64) {
        self.buckets.resize(bounds.len(), 0);
        for (bound, bucket) in bounds.iter().zip(self.buckets.iter_mut()) {
            if seconds <= *bound {
                *bucket += 1;
            }
        }
        self.sum += seconds;
        self.count += 1;
    }

    /// `labels` is `key="value",` or empty.
    fn encode(&self, out: &mut String, name: &str, bounds: &[f64], labels: &str) {
        for (i, bound) in bounds.iter().enumerate() {
            let value = self.buckets.get(i).copied().unwrap_or(0);
            let _ = writeln!(out, "{name}_bucket{{{labels}le=\"{bound}\"}} {value}");
        }
        let _ = writeln!(out, "{name}_bucket{{{labels}le=\"+Inf\"}} {}", self.count);
        let labels = match labels.trim_end_matches(',') {
            "" => String::new(),
            some => format!("{{{some}}}"),
        };
        let _ = writeln!(out, "{name}_sum{labels} {}", self.sum);
        let _ = writeln!(out, "{name}_count{labels} {}", self.count);
    }
}

/// The states of the tunnels of one kind, read from a controller's store at scrape time.
pub(crate) type StateSource = Box<dyn Fn() -> Vec<&'static str> + Send + Sync>;

#[derive(Default)]
struct State {
    reconciles: BTreeMap<(&'static str, &'static str), u64>,
    reconcile_seconds: BTreeMap<&'static str, Histogram>,
    cloudflare: BTreeMap<(&'static str, String), u64>,
    cloudflare_calls: BTreeMap<(&'static str, &'static str), u64>,
    cloudflare_retries: BTreeMap<(&'static str, &'static str), u64>,
    ratelimit_wait: Histogram,
    ratelimit_paused: Duration,
    dns_writes: BTreeMap<(&'static str, &'static str), u64>,
    watch_restarts: BTreeMap<String, u64>,
    access_unknown: BTreeMap<&'static str, u64>,
    route_sources: BTreeMap<u64, BTreeMap<&'static str, u64>>,
    tunnel_sources: BTreeMap<u64, (&'static str, StateSource)>,
}

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
    state: Mutex<State>,
    next_source: AtomicU64,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

static PROCESS: LazyLock<Arc<Metrics>> = LazyLock::new(Arc::default);

impl Metrics {
    /// The registry of this process: what `/metrics` serves.
    pub fn process() -> Arc<Metrics> {
        PROCESS.clone()
    }

    fn with<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        f(&mut self.state.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// One finished reconcile of a Tunnel or ClusterTunnel: `success` when it converged or waits
    /// for something expected, `error` when it failed (and was reported in `Ready`).
    pub fn reconciled(&self, kind: TunnelKind, succeeded: bool, elapsed: Duration) {
        let kind = kind_label(kind);
        let outcome = if succeeded { "success" } else { "error" };
        self.with(|s| {
            *s.reconciles.entry((kind, outcome)).or_default() += 1;
            s.reconcile_seconds
                .entry(kind)
                .or_default()
                .observe(&RECONCILE_BUCKETS, elapsed.as_secs_f64());
        });
    }

    /// One DNS record write; `action` is create, update, take_over or delete.
    pub(crate) fn dns_written(&self, action: &'static str, succeeded: bool) {
        let result = if succeeded { "success" } else { "error" };
        self.with(|s| *s.dns_writes.entry((action, result)).or_default() += 1);
    }

    /// A watch stream failed and restarts with backoff. `what` is a type name; its last path
    /// segment is the label.
    pub(crate) fn watch_restarted(&self, what: &str) {
        let kind = short_type_name(what);
        self.with(|s| *s.watch_restarts.entry(kind).or_default() += 1);
    }

    /// The AccessPolicies became unknown (`cause`: `forbidden`, `undecodable`):
    /// hostnames not served in the open before stay closed until they are known again.
    pub(crate) fn access_policies_unknown(&self, cause: &'static str) {
        self.with(|s| *s.access_unknown.entry(cause).or_default() += 1);
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
        let id = self.next_source.fetch_add(1, Ordering::Relaxed);
        self.with(|s| s.route_sources.insert(id, BTreeMap::new()));
        TrackedRoutes {
            metrics: self.clone(),
            id,
        }
    }

    /// Counts the tunnels of one kind by the states `source` reads, while the returned guard
    /// lives (the controller that owns the store holds it).
    pub(crate) fn track_tunnels(
        self: &Arc<Self>,
        kind: TunnelKind,
        source: StateSource,
    ) -> TrackedTunnels {
        let id = self.next_source.fetch_add(1, Ordering::Relaxed);
        self.with(|s| s.tunnel_sources.insert(id, (kind_label(kind), source)));
        TrackedTunnels {
            metrics: self.clone(),
            id,
        }
    }

    /// Appends every series in Prometheus text exposition format (0.0.4).
    pub fn encode(&self, out: &mut String) {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        encode_state(&state, out);
    }

    /// The whole text, as `/metrics` serves it after the admission series.
    pub fn render(&self) -> String {
        let mut out = String::new();
        self.encode(&mut out);
        out
    }
}

impl CallObserver for Metrics {
    fn attempt(&self, operation: &'static str, status: AttemptStatus) {
        let status = status.to_string();
        self.with(|s| *s.cloudflare.entry((operation, status)).or_default() += 1);
    }

    fn rate_limit_waited(&self, waited: Duration) {
        self.with(|s| {
            s.ratelimit_wait
                .observe(&WAIT_BUCKETS, waited.as_secs_f64());
        });
    }

    fn call_ended(&self, operation: &'static str, outcome: CallOutcome) {
        let outcome = outcome.as_str();
        self.with(|s| *s.cloudflare_calls.entry((operation, outcome)).or_default() += 1);
    }

    fn retried(&self, operation: &'static str, reason: CallOutcome) {
        let reason = reason.as_str();
        self.with(|s| *s.cloudflare_retries.entry((operation, reason)).or_default() += 1);
    }

    fn paused(&self, pause: Duration) {
        self.with(|s| s.ratelimit_paused = s.ratelimit_paused.saturating_add(pause));
    }
}

fn short_type_name(what: &str) -> String {
    let inner = what.trim_end_matches('>');
    let last = inner.rsplit("::").next().unwrap_or(inner);
    last.trim_start_matches('<').to_string()
}

/// One route loop's share of the route gauge; see [`Metrics::track_routes`].
#[derive(Debug)]
pub(crate) struct TrackedRoutes {
    metrics: Arc<Metrics>,
    id: u64,
}

impl TrackedRoutes {
    /// Replaces this loop's share of the gauge with these counts of routes by reason.
    pub fn set(&self, counts: BTreeMap<&'static str, u64>) {
        self.metrics
            .with(|s| s.route_sources.insert(self.id, counts));
    }
}

impl Drop for TrackedRoutes {
    fn drop(&mut self) {
        let id = self.id;
        self.metrics.with(|s| s.route_sources.remove(&id));
    }
}

/// Unregisters a store from the tunnel gauge when dropped.
#[derive(Debug)]
pub(crate) struct TrackedTunnels {
    metrics: Arc<Metrics>,
    id: u64,
}

impl Drop for TrackedTunnels {
    fn drop(&mut self) {
        let id = self.id;
        self.metrics.with(|s| s.tunnel_sources.remove(&id));
    }
}

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// Every series of `state`.
fn encode_state(state: &State, out: &mut String) {
    let tunnels = tunnel_counts(state);
    header(
        out,
        "cftunnel_reconciles_total",
        "counter",
        "Reconciles of Tunnels and ClusterTunnels by kind and outcome.",
    );
    for ((kind, outcome), value) in &state.reconciles {
        let _ = writeln!(
            out,
            "cftunnel_reconciles_total{{kind=\"{kind}\",outcome=\"{outcome}\"}} {value}"
        );
    }
    header(
        out,
        "cftunnel_reconcile_duration_seconds",
        "histogram",
        "Time one reconcile took, by kind.",
    );
    for (kind, histogram) in &state.reconcile_seconds {
        let labels = format!("kind=\"{kind}\",");
        histogram.encode(
            out,
            "cftunnel_reconcile_duration_seconds",
            &RECONCILE_BUCKETS,
            &labels,
        );
    }
    header(
        out,
        "cftunnel_cloudflare_requests_total",
        "counter",
        "Cloudflare API requests (each attempt) by operation and HTTP status, or timeout/transport_error.",
    );
    for ((operation, status), value) in &state.cloudflare {
        let _ = writeln!(
            out,
            "cftunnel_cloudflare_requests_total{{operation=\"{operation}\",status=\"{status}\"}} {value}"
        );
    }
    header(
        out,
        "cftunnel_cloudflare_calls_total",
        "counter",
        "Cloudflare API calls by operation and how each ended after its retries (ok, 4xx, 5xx, 429, transport_error, timeout, invalid_answer, not_leading).",
    );
    for ((operation, outcome), value) in &state.cloudflare_calls {
        let _ = writeln!(
            out,
            "cftunnel_cloudflare_calls_total{{operation=\"{operation}\",outcome=\"{outcome}\"}} {value}"
        );
    }
    header(
        out,
        "cftunnel_cloudflare_retries_total",
        "counter",
        "Failed Cloudflare attempts tried again, by operation and reason (5xx, 429, transport_error, timeout).",
    );
    for ((operation, reason), value) in &state.cloudflare_retries {
        let _ = writeln!(
            out,
            "cftunnel_cloudflare_retries_total{{operation=\"{operation}\",reason=\"{reason}\"}} {value}"
        );
    }
    header(
        out,
        "cftunnel_cloudflare_ratelimit_paused_seconds_total",
        "counter",
        "Time every call of a credential was paused by Cloudflare's 429 answers (their Retry-After).",
    );
    let _ = writeln!(
        out,
        "cftunnel_cloudflare_ratelimit_paused_seconds_total {}",
        state.ratelimit_paused.as_secs_f64()
    );
    header(
        out,
        "cftunnel_cloudflare_ratelimit_wait_seconds",
        "histogram",
        "Time Cloudflare requests waited for the per-credential rate limiter.",
    );
    state.ratelimit_wait.encode(
        out,
        "cftunnel_cloudflare_ratelimit_wait_seconds",
        &WAIT_BUCKETS,
        "",
    );
    header(
        out,
        "cftunnel_dns_writes_total",
        "counter",
        "DNS record writes by action (create, update, take_over, delete) and result.",
    );
    for ((action, result), value) in &state.dns_writes {
        let _ = writeln!(
            out,
            "cftunnel_dns_writes_total{{action=\"{action}\",result=\"{result}\"}} {value}"
        );
    }
    header(
        out,
        "cftunnel_tunnels",
        "gauge",
        "Tunnels and ClusterTunnels by kind and state (the reason of Ready, Pending or Deleting).",
    );
    for ((kind, state), value) in &tunnels {
        let _ = writeln!(
            out,
            "cftunnel_tunnels{{kind=\"{kind}\",state=\"{state}\"}} {value}"
        );
    }
    header(
        out,
        "cftunnel_routes",
        "gauge",
        "Routes of TunnelBindings and labelled Services by state (the reason of each route).",
    );
    let mut routes: BTreeMap<&'static str, u64> = BTreeMap::new();
    for counts in state.route_sources.values() {
        for (route_state, value) in counts {
            *routes.entry(route_state).or_default() += value;
        }
    }
    for (route_state, value) in &routes {
        let _ = writeln!(out, "cftunnel_routes{{state=\"{route_state}\"}} {value}");
    }
    header(
        out,
        "cftunnel_watch_restarts_total",
        "counter",
        "Watches that failed and were restarted with backoff, by watched kind.",
    );
    for (kind, value) in &state.watch_restarts {
        let _ = writeln!(
            out,
            "cftunnel_watch_restarts_total{{kind=\"{kind}\"}} {value}"
        );
    }
    header(
        out,
        "cftunnel_access_policies_unknown_total",
        "counter",
        "Times the AccessPolicies became unknown (RBAC forbids reading them, one does not decode), by cause.",
    );
    for (cause, value) in &state.access_unknown {
        let _ = writeln!(
            out,
            "cftunnel_access_policies_unknown_total{{cause=\"{cause}\"}} {value}"
        );
    }
}

fn tunnel_counts(state: &State) -> BTreeMap<(&'static str, &'static str), u64> {
    let mut counts = BTreeMap::new();
    for (kind, source) in state.tunnel_sources.values() {
        for tunnel_state in source() {
            *counts.entry((*kind, tunnel_state)).or_default() += 1;
        }
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watch_kinds_are_the_last_segment_of_the_type_name() {
        assert_eq!(
            short_type_name("k8s_openapi::api::core::v1::Service"),
            "Service"
        );
        assert_eq!(
            short_type_name(
                "kube_core::metadata::PartialObjectMeta<k8s_openapi::api::core::v1::Secret>"
            ),
            "Secret"
        );
        assert_eq!(short_type_name("tunnel"), "tunnel");
    }

    #[test]
    fn histograms_are_cumulative_with_sum_and_count() {
        let mut histogram = Histogram::default();
        histogram.observe(&[0.1, 1.0], 0.5);
        histogram.observe(&[0.1, 1.0], 5.0);
        let mut text = String::new();
        histogram.encode(&mut text, "x_seconds", &[0.1, 1.0], "kind=\"tunnel\",");
        assert_eq!(
            text,
            "x_seconds_bucket{kind=\"tunnel\",le=\"0.1\"} 0\n\
             x_seconds_bucket{kind=\"tunnel\",le=\"1\"} 1\n\
             x_seconds_bucket{kind=\"tunnel\",le=\"+Inf\"} 2\n\
             x_seconds_sum{kind=\"tunnel\"} 5.5\n\
             x_seconds_count{kind=\"tunnel\"} 2\n"
        );
    }

    #[test]
    fn unlabelled_histograms_have_no_braces_on_sum_and_count() {
        let mut histogram = Histogram::default();
        histogram.observe(&[1.0], 0.0);
        let mut text = String::new();
        histogram.encode(&mut text, "w_seconds", &[1.0], "");
        assert!(text.contains("w_seconds_bucket{le=\"1\"} 1\n"), "{text}");
        assert!(text.contains("w_seconds_count 1\n"), "{text}");
    }

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
        let mut text = String::new();
        metrics.with(|s| encode_state(s, &mut text));
        for line in [
            "cftunnel_cloudflare_calls_total{operation=\"dns.batch\",outcome=\"ok\"} 2\n",
            "cftunnel_cloudflare_calls_total{operation=\"tunnel.create\",outcome=\"5xx\"} 1\n",
            "cftunnel_cloudflare_retries_total{operation=\"tunnel.create\",reason=\"5xx\"} 1\n",
            "cftunnel_cloudflare_retries_total{operation=\"tunnel.create\",reason=\"429\"} 1\n",
            "cftunnel_cloudflare_ratelimit_paused_seconds_total 4.5\n",
        ] {
            assert!(text.contains(line), "{line} missing from:\n{text}");
        }
    }
}
