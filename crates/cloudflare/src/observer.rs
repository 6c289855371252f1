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

/// Told of every attempt and every rate-limiter wait of a client.
pub trait CallObserver: fmt::Debug + Send + Sync {
    /// One attempt of `operation` (an operation id of the API, e.g. `ListDnsRecords`).
    fn attempt(&self, operation: &'static str, status: AttemptStatus);
    /// Time one call waited for its credential's rate limiter (zero when a token was free).
    fn rate_limit_waited(&self, waited: Duration);
}

/// The default observer: nobody is told.
#[derive(Debug)]
pub struct NoObserver;

impl CallObserver for NoObserver {
    fn attempt(&self, _operation: &'static str, _status: AttemptStatus) {}
    fn rate_limit_waited(&self, _waited: Duration) {}
}
