//! What the client tells its owner about each call, so metrics reach it through a handle that
//! is passed in instead of a module it would have to know.
use std::fmt;
use std::time::Duration;

/// How one attempt of a call ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttemptStatus {
    /// Cloudflare answered with this HTTP status.
    Http(u16),
    /// The connection failed before an answer came.
    TransportError,
    /// No answer within the per-attempt timeout.
    Timeout,
}

impl fmt::Display for AttemptStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AttemptStatus::Http(status) => write!(f, "{status}"),
            AttemptStatus::TransportError => f.write_str("transport_error"),
            AttemptStatus::Timeout => f.write_str("timeout"),
        }
    }
}

/// How a call ended, after its retries: the metric label of `cftunnel_cloudflare_calls_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallOutcome {
    /// A successful answer.
    Ok,
    /// Refused with a 4xx other than 429 (not retried).
    ClientError,
    /// Still a 5xx on the last attempt.
    ServerError,
    /// Still a 429 on the last attempt.
    RateLimited,
    /// No connection or a dropped one on the last attempt.
    TransportError,
    /// No answer in time on the last attempt.
    Timeout,
    /// An answer that is not Cloudflare's envelope.
    InvalidAnswer,
    /// A write refused before it was sent: the leadership term that made it has ended.
    NotLeading,
}

impl CallOutcome {
    pub fn as_str(&self) -> &'static str {
        match self {
            CallOutcome::Ok => "ok",
            CallOutcome::ClientError => "4xx",
            CallOutcome::ServerError => "5xx",
            CallOutcome::RateLimited => "429",
            CallOutcome::TransportError => "transport_error",
            CallOutcome::Timeout => "timeout",
            CallOutcome::InvalidAnswer => "invalid_answer",
            CallOutcome::NotLeading => "not_leading",
        }
    }
}

/// Told of every attempt and every rate-limiter wait of a client.
pub trait CallObserver: fmt::Debug + Send + Sync {
    /// One attempt of `operation` (an operation id of the API, e.g. `ListDnsRecords`).
    fn attempt(&self, operation: &'static str, status: AttemptStatus);
    /// Time one call waited for its credential's rate limiter (zero when a token was free).
    fn rate_limit_waited(&self, waited: Duration);
    /// One call of `operation` ended, after every attempt it made.
    fn call_ended(&self, _operation: &'static str, _outcome: CallOutcome) {}
    /// A failed attempt of `operation` is tried again; `reason` is how it failed (`5xx`,
    /// `429`, `transport_error`, `timeout`).
    fn retried(&self, _operation: &'static str, _reason: CallOutcome) {}
    /// A 429 paused every call of its credential for `pause`.
    fn paused(&self, _pause: Duration) {}
}

/// The default observer: nobody is told.
#[derive(Debug)]
pub struct NoObserver;

impl CallObserver for NoObserver {
    fn attempt(&self, _operation: &'static str, _status: AttemptStatus) {}
    fn rate_limit_waited(&self, _waited: Duration) {}
}
