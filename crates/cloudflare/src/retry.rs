//! Which failures are retried, and how long to wait between attempts.
use std::time::Duration;

use http::HeaderMap;
use rand::Rng;

/// Wait after a 429 that carries no usable `Retry-After`. Cloudflare's block lasts up to five
/// minutes; a retry that is still blocked gets a fresh 429 and pauses again, so a shorter
/// default recovers sooner without hammering (at most one call per pause).
pub const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(60);
/// Upper bound on an honoured `Retry-After`, so that one bad header cannot stall for hours.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(600);

/// Bounded retries with jittered exponential backoff.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Total attempts per call, the first included (at least 1).
    pub max_attempts: u32,
    /// Backoff before the second attempt; doubles for each further one.
    pub base_delay: Duration,
    /// Cap of a single backoff.
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 5,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(30),
        }
    }
}

impl RetryPolicy {
    /// Ceiling of the backoff after failed attempt number `attempt` (1-based), before jitter.
    pub(crate) fn ceiling(&self, attempt: u32) -> Duration {
        let factor = 1u32
            .checked_shl(attempt.saturating_sub(1))
            .unwrap_or(u32::MAX);
        self.base_delay
            .checked_mul(factor)
            .unwrap_or(self.max_delay)
            .min(self.max_delay)
    }

    /// Backoff after failed attempt `attempt`: uniform in [ceiling/2, ceiling] ("equal jitter"),
    /// so concurrent callers spread out but never retry immediately.
    pub fn backoff(&self, attempt: u32) -> Duration {
        let ceiling = self.ceiling(attempt);
        let half = ceiling / 2;
        let spread = u64::try_from((ceiling - half).as_millis()).unwrap_or(u64::MAX);
        let extra = if spread == 0 {
            0
        } else {
            rand::rng().random_range(0..=spread)
        };
        half + Duration::from_millis(extra)
    }
}

/// HTTP statuses worth another attempt: 429 and server errors.
pub(crate) fn is_retryable_status(status: u16) -> bool {
    status == 429 || (500..=599).contains(&status)
}

/// `Retry-After` in seconds (HTTP dates are not used by Cloudflare), bounded.
pub fn retry_after(headers: &HeaderMap) -> Duration {
    headers
        .get(http::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs)
        .map_or(DEFAULT_RETRY_AFTER, |d| d.min(MAX_RETRY_AFTER))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_is_capped() {
        let policy = RetryPolicy {
            max_attempts: 10,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(1),
        };
        assert_eq!(policy.ceiling(1), Duration::from_millis(100));
        assert_eq!(policy.ceiling(2), Duration::from_millis(200));
        assert_eq!(policy.ceiling(4), Duration::from_millis(800));
        assert_eq!(policy.ceiling(5), Duration::from_secs(1));
        assert_eq!(policy.ceiling(60), Duration::from_secs(1));
        for attempt in 1..8 {
            let d = policy.backoff(attempt);
            assert!(d >= policy.ceiling(attempt) / 2 && d <= policy.ceiling(attempt));
        }
    }

    #[test]
    fn retry_after_parses_seconds_with_default_and_cap() {
        let mut headers = HeaderMap::new();
        assert_eq!(retry_after(&headers), DEFAULT_RETRY_AFTER);
        headers.insert(http::header::RETRY_AFTER, "7".parse().unwrap());
        assert_eq!(retry_after(&headers), Duration::from_secs(7));
        headers.insert(http::header::RETRY_AFTER, "99999".parse().unwrap());
        assert_eq!(retry_after(&headers), MAX_RETRY_AFTER);
        headers.insert(http::header::RETRY_AFTER, "soon".parse().unwrap());
        assert_eq!(retry_after(&headers), DEFAULT_RETRY_AFTER);
    }

    #[test]
    fn only_429_and_5xx_are_retryable() {
        assert!(is_retryable_status(429));
        assert!(is_retryable_status(500));
        assert!(is_retryable_status(503));
        for s in [400, 401, 403, 404, 409, 422] {
            assert!(!is_retryable_status(s));
        }
    }
}
