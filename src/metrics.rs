//! Process-wide metrics of the operator: reconciles, Cloudflare calls, rate-limiter waits, DNS
//! writes, tunnels and routes by state, watch restarts. `/metrics` appends them after the
//! admission series of [`crate::webhook::WebhookMetrics`].
//!
//! One registry per process (a static): the code paths that record are deep in the reconcilers
//! and the Cloudflare client, and each records with a one-line call. Names follow Prometheus
//! conventions: counters end in `_total`, durations are histograms in `_seconds`.
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{LazyLock, Mutex, PoisonError};
use std::time::Duration;

use kube::runtime::reflector::Store;

use crate::controller::TunnelKindAdapter;
use crate::dns_sync::{TunnelDnsReport, WriteKind};
use cftunnel_policy::routes::RouteTable;

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

/// Counts tunnels of one kind by state, read from a controller's store at scrape time.
type StateSource = Box<dyn Fn() -> Vec<&'static str> + Send + Sync>;

#[derive(Default)]
struct State {
    reconciles: BTreeMap<(&'static str, &'static str), u64>,
    reconcile_seconds: BTreeMap<&'static str, Histogram>,
    cloudflare: BTreeMap<(&'static str, String), u64>,
    ratelimit_wait: Histogram,
    dns_writes: BTreeMap<(&'static str, &'static str), u64>,
    watch_restarts: BTreeMap<String, u64>,
    route_sources: BTreeMap<u64, BTreeMap<&'static str, u64>>,
    tunnel_sources: BTreeMap<u64, (&'static str, StateSource)>,
}

static REGISTRY: LazyLock<Mutex<State>> = LazyLock::new(|| Mutex::new(State::default()));
static NEXT_SOURCE: AtomicU64 = AtomicU64::new(0);

fn with<R>(f: impl FnOnce(&mut State) -> R) -> R {
    f(&mut REGISTRY.lock().unwrap_or_else(PoisonError::into_inner))
}

/// Label value of a tunnel kind.
fn kind_label(kind: cftunnel_types::TunnelKind) -> &'static str {
    match kind {
        cftunnel_types::TunnelKind::Tunnel => "tunnel",
        cftunnel_types::TunnelKind::ClusterTunnel => "clustertunnel",
    }
}

/// One finished reconcile of a Tunnel or ClusterTunnel: `success` when it converged or waits
/// for something expected, `error` when it failed (and was reported in `Ready`).
pub fn reconciled(kind: cftunnel_types::TunnelKind, succeeded: bool, elapsed: Duration) {
    let kind = kind_label(kind);
    let outcome = if succeeded { "success" } else { "error" };
    with(|s| {
        *s.reconciles.entry((kind, outcome)).or_default() += 1;
        s.reconcile_seconds
            .entry(kind)
            .or_default()
            .observe(&RECONCILE_BUCKETS, elapsed.as_secs_f64());
    });
}

/// Tells the metrics of every Cloudflare call attempt and rate-limiter wait (the client's
/// observer).
#[derive(Debug, Default)]
pub struct CloudflareCalls;

impl cftunnel_cloudflare::CallObserver for CloudflareCalls {
    fn attempt(&self, operation: &'static str, status: cftunnel_cloudflare::AttemptStatus) {
        let status = status.to_string();
        with(|s| *s.cloudflare.entry((operation, status)).or_default() += 1);
    }

    fn rate_limit_waited(&self, waited: Duration) {
        with(|s| {
            s.ratelimit_wait
                .observe(&WAIT_BUCKETS, waited.as_secs_f64());
        });
    }
}

/// The writes of one zone sync (its per-tunnel reports), by action and result.
pub fn dns_synced_zone(reports: &[TunnelDnsReport]) {
    with(|s| {
        for tunnel in reports {
            for written in &tunnel.written {
                *s.dns_writes
                    .entry((write_label(written.kind), "success"))
                    .or_default() += 1;
            }
            for failed in &tunnel.errors {
                *s.dns_writes
                    .entry((failed.kind.as_str(), "error"))
                    .or_default() += 1;
            }
        }
    });
}

fn write_label(kind: WriteKind) -> &'static str {
    match kind {
        WriteKind::Create => "create",
        WriteKind::Update => "update",
        WriteKind::TakeOver => "take_over",
        WriteKind::Delete => "delete",
    }
}

/// A watch stream failed and restarts with backoff. `what` is a type name; its last path
/// segment is the label.
pub fn watch_restarted(what: &str) {
    let kind = short_type_name(what);
    with(|s| *s.watch_restarts.entry(kind).or_default() += 1);
}

/// Counts a controller event that is a failed watch of its queue (the controller restarts it).
pub fn controller_event<T, E1, E2>(
    kind: &str,
    result: &Result<T, kube::runtime::controller::Error<E1, E2>>,
) where
    E1: std::error::Error + 'static,
    E2: std::error::Error + 'static,
{
    if let Err(kube::runtime::controller::Error::QueueError(_)) = result {
        watch_restarted(kind);
    }
}

fn short_type_name(what: &str) -> String {
    let inner = what.trim_end_matches('>');
    let last = inner.rsplit("::").next().unwrap_or(inner);
    last.trim_start_matches('<').to_string()
}

/// The routes of one route loop in the route gauge; dropped with the loop (at the end of its
/// term), so a deposed leader's routes and those of finished loops are never counted.
#[derive(Debug)]
pub struct TrackedRoutes {
    id: u64,
}

impl TrackedRoutes {
    pub fn new() -> Self {
        let id = NEXT_SOURCE.fetch_add(1, Ordering::Relaxed);
        with(|s| s.route_sources.insert(id, BTreeMap::new()));
        Self { id }
    }

    /// Replaces this loop's share of the gauge with the routes of `table`, by reason.
    pub fn computed(&self, table: &RouteTable) {
        let mut counts: BTreeMap<&'static str, u64> = BTreeMap::new();
        for source in table.sources.values() {
            for route in &source.routes {
                *counts.entry(route.reason.as_str()).or_default() += 1;
            }
        }
        with(|s| s.route_sources.insert(self.id, counts));
    }
}

impl Default for TrackedRoutes {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for TrackedRoutes {
    fn drop(&mut self) {
        let id = self.id;
        with(|s| s.route_sources.remove(&id));
    }
}

/// Counts the tunnels of `store` by state while the returned guard lives (the controller that
/// owns the store holds it).
pub fn track_tunnels<K: TunnelKindAdapter>(store: Store<K>) -> TrackedTunnels {
    let id = NEXT_SOURCE.fetch_add(1, Ordering::Relaxed);
    let source: StateSource = Box::new(move || {
        store
            .state()
            .iter()
            .map(|tunnel| tunnel_state(tunnel.as_ref()))
            .collect()
    });
    with(|s| s.tunnel_sources.insert(id, (kind_label(K::KIND), source)));
    TrackedTunnels { id }
}

/// Unregisters a store from the tunnel gauge when dropped.
#[derive(Debug)]
pub struct TrackedTunnels {
    id: u64,
}

impl Drop for TrackedTunnels {
    fn drop(&mut self) {
        let id = self.id;
        with(|s| s.tunnel_sources.remove(&id));
    }
}

/// `Deleting`, the reason of `Ready`, or `Pending` before the first status.
fn tunnel_state<K: TunnelKindAdapter>(tunnel: &K) -> &'static str {
    if tunnel.meta().deletion_timestamp.is_some() {
        return "Deleting";
    }
    let reason = tunnel
        .tunnel_status()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .map(|c| c.reason.as_str());
    match reason {
        Some(reason) => STATES
            .iter()
            .find(|s| **s == reason)
            .copied()
            .unwrap_or("Unknown"),
        None => "Pending",
    }
}

/// Reasons of `Ready` a tunnel can carry (bounded label values).
const STATES: [&str; 17] = [
    "Ready",
    "InvalidSpec",
    "SecretNotFound",
    "SecretKeyMissing",
    "CloudflareAuthFailed",
    "CloudflareError",
    "AccountNotFound",
    "ZoneNotFound",
    "TunnelNotFound",
    "TunnelDeleted",
    "TunnelNameConflict",
    "TunnelIdConflict",
    "RemotelyManagedTunnel",
    "CredentialsInvalid",
    "NameConflict",
    "RenderFailed",
    "KubernetesError",
];

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// Appends every series in Prometheus text exposition format (0.0.4).
pub fn encode(out: &mut String) {
    let state = REGISTRY.lock().unwrap_or_else(PoisonError::into_inner);
    let tunnels = tunnel_counts(&state);
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

/// The whole text, as `/metrics` serves it after the admission series.
pub fn render() -> String {
    let mut out = String::new();
    encode(&mut out);
    out
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
}
