//! Builder of [`CloudflareClient`]: credentials, base URL, transport, limits, timeouts.
use std::sync::Arc;
use std::time::Duration;

use url::Url;

use super::budget::{Pace, RateLimit};
use super::credentials::Credentials;
use super::engine::{CloudflareClient, Inner};
use super::error::CloudflareError;
use super::observer::{CallObserver, NoObserver};
use super::ratelimit::RateLimiters;
use super::retry::RetryPolicy;
use super::transport::Transport;

/// Cloudflare's production API base.
pub const DEFAULT_BASE_URL: &str = "https://api.cloudflare.com/client/v4";
/// Base used with an in-process Router when none is given: the Router sees paths without prefix.
pub const IN_PROCESS_BASE_URL: &str = "http://sim.invalid";
/// Default timeout of a single attempt.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Configures a [`CloudflareClient`].
#[derive(Debug)]
pub struct CloudflareClientBuilder {
    credentials: Credentials,
    base_url: Option<String>,
    transport: Option<Transport>,
    pace: Pace,
    limiters: Option<RateLimiters>,
    timeout: Duration,
    retry: RetryPolicy,
    gate: crate::WriteGate,
    observer: Arc<dyn CallObserver>,
}

impl CloudflareClient {
    /// Starts a builder. Share one [`RateLimiters`] (via `.limiters(..)`) across every client of
    /// the process, otherwise each client gets a private bucket.
    pub fn builder(credentials: Credentials) -> CloudflareClientBuilder {
        CloudflareClientBuilder {
            credentials,
            base_url: None,
            transport: None,
            pace: Pace::from(RateLimit::default()),
            limiters: None,
            timeout: DEFAULT_TIMEOUT,
            retry: RetryPolicy::default(),
            gate: crate::WriteGate::open(),
            observer: Arc::new(NoObserver),
        }
    }
}

impl CloudflareClientBuilder {
    /// API base, e.g. the simulator's URL (default [`DEFAULT_BASE_URL`]).
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = Some(url.into());
        self
    }

    /// Transport; default is a rustls reqwest client.
    pub fn transport(mut self, transport: Transport) -> Self {
        self.transport = Some(transport);
        self
    }

    /// Bucket of this credential, used if the registry does not know it yet.
    pub fn rate_limit(mut self, rate: RateLimit) -> Self {
        self.pace = Pace::from(rate);
        self
    }

    /// Pace of this credential (e.g. [`Pace::within`] a budget), used if the registry does not
    /// know it yet.
    pub fn pace(mut self, pace: Pace) -> Self {
        self.pace = pace;
        self
    }

    /// Shared limiter registry (one per process).
    pub fn limiters(mut self, limiters: RateLimiters) -> Self {
        self.limiters = Some(limiters);
        self
    }

    /// Timeout of each attempt.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Total attempts per call, the first included.
    pub fn max_attempts(mut self, attempts: u32) -> Self {
        self.retry.max_attempts = attempts;
        self
    }

    /// Backoff before the second attempt and cap of any backoff.
    pub fn backoff(mut self, base: Duration, max: Duration) -> Self {
        self.retry.base_delay = base;
        self.retry.max_delay = max;
        self
    }

    /// The permit every write checks before it is sent (default: always open).
    pub fn write_gate(mut self, gate: crate::WriteGate) -> Self {
        self.gate = gate;
        self
    }

    /// Who is told of every attempt and rate-limiter wait (default: nobody).
    pub fn observer(mut self, observer: Arc<dyn CallObserver>) -> Self {
        self.observer = observer;
        self
    }

    /// Validates the settings and builds the client.
    pub fn build(self) -> Result<CloudflareClient, CloudflareError> {
        let auth = self.credentials.auth_headers()?;
        if self.retry.max_attempts == 0 {
            return Err(CloudflareError::InvalidInput(
                "max_attempts must be at least 1".into(),
            ));
        }
        if self.pace.tokens == 0 || self.pace.burst == 0 || self.pace.window.is_zero() {
            return Err(CloudflareError::InvalidInput(
                "rate limit tokens, burst and window must be at least 1".into(),
            ));
        }
        if self.timeout.is_zero() {
            return Err(CloudflareError::InvalidInput(
                "timeout must be positive".into(),
            ));
        }
        let transport = match self.transport {
            Some(transport) => transport,
            None => Transport::http()?,
        };
        let base_text = match (&self.base_url, &transport) {
            (Some(url), _) => url.as_str(),
            (None, Transport::InProcess(_)) => IN_PROCESS_BASE_URL,
            (None, Transport::Http(_)) => DEFAULT_BASE_URL,
        };
        let base = Url::parse(base_text)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https") && !u.cannot_be_a_base())
            .filter(|u| u.query().is_none() && u.fragment().is_none())
            .filter(|u| u.username().is_empty() && u.password().is_none())
            .ok_or_else(|| {
                // The URL is not echoed: it could carry user:password.
                CloudflareError::InvalidInput(
                    "Cloudflare API base URL must be an http(s) URL without query or credentials"
                        .into(),
                )
            })?;
        let limiters = self.limiters.unwrap_or_default();
        let limiter = limiters.limiter(&self.credentials, self.pace);
        Ok(CloudflareClient::from_inner(Arc::new(Inner {
            base,
            transport,
            auth,
            limiter,
            timeout: self.timeout,
            retry: self.retry,
            gate: self.gate,
            observer: self.observer,
        })))
    }
}
