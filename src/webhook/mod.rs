//! Admission and conversion webhook: HTTPS transport, certificate reload, health and metrics.
//!
//! Decisions live behind [`Policy`]; this module only moves reviews in and out.
mod body;
mod budget;
mod decode_cost;
mod handlers;
mod health;
mod idle;
mod large;
mod log_limit;
mod metrics;
mod server;
mod tls;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse};
use kube::core::conversion::{ConversionRequest, ConversionResponse};

pub use body::{BadRequest, decode_admission, decode_conversion};
pub use budget::{BodyBudget, Budgets, SMALL_BODY_BYTES};
pub use decode_cost::decode_cost;
pub use handlers::{REQUEST_TIMEOUT, router, router_with_budget, router_with_metrics};
pub use health::health_router;
pub use log_limit::{LINES_PER_INTERVAL, LOG_INTERVAL};
pub use metrics::{Endpoint, Outcome, WebhookMetrics};
pub use server::{ServingHandle, serve};
pub use tls::{ReloadOutcome, ReloadingResolver, TlsError, server_config};

/// Default poll interval for the certificate files.
pub(crate) const DEFAULT_RELOAD_INTERVAL: Duration = Duration::from_secs(10);
/// Default request body limit; the API server caps objects at 3 MiB as well.
pub const DEFAULT_MAX_BODY_BYTES: usize = 3 * 1024 * 1024;
/// Default number of admission requests handled at once.
pub(crate) const DEFAULT_MAX_CONCURRENCY: usize = 256;
/// Default bytes of request bodies held at once (see [`BodyBudget`]): reserved from a
/// request's `Content-Length` before its body is read.
pub(crate) const DEFAULT_MAX_BYTES_IN_FLIGHT: usize = 8 * 1024 * 1024;
/// Part of [`DEFAULT_MAX_BYTES_IN_FLIGHT`] only ordinary reviews (≤ [`SMALL_BODY_BYTES`]) use.
pub(crate) const DEFAULT_SMALL_BODY_RESERVE: usize = 4 * 1024 * 1024;
/// Default bytes that decoding and deciding the reviews in flight may take, reserved from
/// each body's [`decode_cost`] (weighed by the endpoint's [`Endpoint::cost_factor`]) once it
/// is read and before it is decoded; a review that finds no room gets 429, one that could
/// never fit gets 413.
///
/// Why the shipped 256Mi memory limit holds, whatever the requests: memory is bounded by
/// - the process at rest, ~15 MiB;
/// - bodies: at most [`DEFAULT_MAX_BYTES_IN_FLIGHT`] (8 MiB) held, ×2 while one is collected
///   from its frames: 16 MiB;
/// - decoding and deciding: at most this budget, 100 MiB. A decode cost is an upper estimate
///   from the body's shape (objects, members, elements, strings), not its size times a guessed
///   factor, so a body of 3 MiB of tiny objects (~130× its size) is refused instead of
///   decoded. Reviews at the 3 MiB body limit of typical shape cost 25–40× their body
///   (a 2.3 MiB TunnelBinding of 30,000 subjects on `/validate`: 90 MiB; a 2.5 MiB Deployment
///   of 60,000 env entries on `/mutate`: 66 MiB): one such review at a time fits the shared
///   94 MiB, and ordinary reviews are decided in the 6 MiB reserve beside it;
/// - connections: up to [`DEFAULT_MAX_CONCURRENCY`] requests with TLS and HTTP buffers of
///   ~64 KiB each, 16 MiB.
///
/// Worst case ≈ 15 + 16 + 100 + 16 = 147 MiB: under the 153 MiB that is 60 % of the limit.
/// BENCHMARKS.md measures it with 256 concurrent reviews at the body limit.
pub const DEFAULT_MAX_DECODE_BYTES: usize = 100 * 1024 * 1024;
/// Part of [`DEFAULT_MAX_DECODE_BYTES`] only reviews with small bodies (≤ [`SMALL_BODY_BYTES`])
/// use, so a large review being decided never makes ordinary ones wait.
pub(crate) const DEFAULT_SMALL_DECODE_RESERVE: usize = 6 * 1024 * 1024;
/// A connection with no request in flight for this long is closed (HTTP/1.1 and HTTP/2 alike,
/// and a client that completed the TLS handshake but never sent a request).
pub(crate) const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// Decides admission and conversion; implemented by the policy layer. Pure and fast; no I/O.
pub trait Policy: Send + Sync + 'static {
    /// Answers a validating admission request.
    fn validate(&self, request: &AdmissionRequest<DynamicObject>) -> AdmissionResponse;
    /// Answers a mutating admission request, possibly with a JSON patch.
    fn mutate(&self, request: &AdmissionRequest<DynamicObject>) -> AdmissionResponse;
    /// Converts custom resources between API versions.
    fn convert(&self, request: &ConversionRequest) -> ConversionResponse;
}

/// Where and how the webhook listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookConfig {
    /// HTTPS address for admission and conversion reviews.
    pub listen: SocketAddr,
    /// Plain-HTTP address for `/healthz`, `/readyz` and `/metrics`.
    pub health_listen: SocketAddr,
    /// PEM certificate chain, leaf first; re-read on every poll.
    pub cert_file: PathBuf,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1); re-read on every poll.
    pub key_file: PathBuf,
    /// How often the certificate files are checked for a new pair.
    pub reload_interval: Duration,
    /// Largest accepted request body; larger bodies get 413.
    pub max_body_bytes: usize,
    /// Admission requests handled at once; more wait for a slot.
    pub max_concurrency: usize,
    /// Bytes of request bodies held at once; a request that does not fit gets 429.
    pub max_bytes_in_flight: usize,
    /// Bytes that decoding the reviews in flight may take (see [`DEFAULT_MAX_DECODE_BYTES`]).
    pub max_decode_bytes: usize,
    /// Connections with no request in flight for this long are closed.
    pub idle_timeout: Duration,
}

impl WebhookConfig {
    /// A configuration with default interval, body limit and concurrency.
    pub fn new(
        listen: SocketAddr,
        health_listen: SocketAddr,
        cert_file: PathBuf,
        key_file: PathBuf,
    ) -> Self {
        Self {
            listen,
            health_listen,
            cert_file,
            key_file,
            reload_interval: DEFAULT_RELOAD_INTERVAL,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            max_concurrency: DEFAULT_MAX_CONCURRENCY,
            max_bytes_in_flight: DEFAULT_MAX_BYTES_IN_FLIGHT,
            max_decode_bytes: DEFAULT_MAX_DECODE_BYTES,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
        }
    }
}

/// Whether the caches are synced, and whether the API server answers. Admission answers wait
/// for the first (an empty cache approves everything), conversion does not; `/readyz` wants
/// both, so a replica that lost the API server leaves the Services' endpoints until it is back.
#[derive(Debug, Clone, Default)]
pub struct Readiness(Arc<ReadinessFlags>);

#[derive(Debug, Default)]
struct ReadinessFlags {
    synced: AtomicBool,
    api_unreachable: AtomicBool,
}

/// Why `/readyz` answers 503.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotReady {
    CachesNotSynced,
    ApiServerUnreachable,
}

impl Readiness {
    /// Starts not ready.
    pub fn new() -> Self {
        Self::default()
    }

    /// Marks the caches synced or not.
    pub fn set_ready(&self, ready: bool) {
        self.0.synced.store(ready, Ordering::Release);
    }

    /// Records whether the API server answers (it is assumed to until told otherwise).
    pub fn set_api_reachable(&self, reachable: bool) {
        self.0.api_unreachable.store(!reachable, Ordering::Release);
    }

    /// True once the caches have synced: admission may be answered.
    pub fn is_ready(&self) -> bool {
        self.0.synced.load(Ordering::Acquire)
    }

    /// What `/readyz` says: ready when the caches synced and the API server answers.
    pub fn serving(&self) -> Result<(), NotReady> {
        if !self.is_ready() {
            return Err(NotReady::CachesNotSynced);
        }
        if self.0.api_unreachable.load(Ordering::Acquire) {
            return Err(NotReady::ApiServerUnreachable);
        }
        Ok(())
    }
}

/// Why the webhook could not start or stopped abnormally.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    #[error("cannot load the serving certificate: {0}")]
    Tls(#[from] TlsError),
    #[error("cannot build the TLS configuration: {0}")]
    TlsConfig(#[source] rustls::Error),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("the health server failed: {0}")]
    Health(#[source] std::io::Error),
    #[error("a webhook task ended unexpectedly: {0}")]
    Task(#[source] tokio::task::JoinError),
}

impl WebhookError {
    /// Short stable label for metrics and logs.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Self::Tls(_) => "tls",
            Self::TlsConfig(_) => "tls_config",
            Self::Bind { .. } => "bind",
            Self::Health(_) => "health",
            Self::Task(_) => "task",
        }
    }
}

/// Resolves once shutdown has been asked for (or the sender is gone).
pub(crate) async fn until_stopped(stopped: &mut tokio::sync::watch::Receiver<bool>) {
    let _ = stopped.wait_for(|s| *s).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readiness_is_shared_between_clones() {
        let readiness = Readiness::new();
        let clone = readiness.clone();
        assert!(!clone.is_ready());
        readiness.set_ready(true);
        assert!(clone.is_ready());
        clone.set_ready(false);
        assert!(!readiness.is_ready());
    }

    #[test]
    fn serving_wants_synced_caches_and_a_reachable_api_server() {
        let readiness = Readiness::new();
        assert_eq!(readiness.serving(), Err(NotReady::CachesNotSynced));
        readiness.set_ready(true);
        assert_eq!(readiness.serving(), Ok(()));
        readiness.set_api_reachable(false);
        assert_eq!(readiness.serving(), Err(NotReady::ApiServerUnreachable));
        assert!(
            readiness.is_ready(),
            "admission still answers from its caches"
        );
        readiness.set_api_reachable(true);
        assert_eq!(readiness.serving(), Ok(()));
    }

    #[test]
    fn config_new_uses_documented_defaults() {
        let addr: SocketAddr = ([127, 0, 0, 1], 0).into();
        let config = WebhookConfig::new(addr, addr, "c".into(), "k".into());
        assert_eq!(config.reload_interval, Duration::from_secs(10));
        assert_eq!(config.max_body_bytes, 3 * 1024 * 1024);
        assert_eq!(config.max_concurrency, 256);
        assert_eq!(config.max_bytes_in_flight, 8 * 1024 * 1024);
        assert_eq!(config.max_decode_bytes, 100 * 1024 * 1024);
        assert_eq!(config.idle_timeout, Duration::from_secs(30));
    }
}
