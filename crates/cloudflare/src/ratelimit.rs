//! Per-credential token bucket with a shared 429 pause, on tokio time (paused-clock testable).
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use super::credentials::Credentials;

const NANOS_PER_SEC: u128 = 1_000_000_000;
/// Idle limiters are pruned from a registry only once it holds this many.
const PRUNE_ABOVE: usize = 64;

/// Steady rate and burst of one credential's bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    /// Tokens added per second (Cloudflare allows 1,200 per 5 minutes, i.e. 4/s, shared).
    pub per_second: u32,
    /// Bucket capacity: calls admitted at once after a quiet period.
    pub burst: u32,
}

impl Default for RateLimit {
    fn default() -> Self {
        Self {
            per_second: 3,
            burst: 10,
        }
    }
}

/// Bucket state; credit is counted in `per_second`-scaled nanoseconds so arithmetic is exact.
#[derive(Debug)]
struct Bucket {
    /// One token is worth `NANOS_PER_SEC` credit units.
    credit: u128,
    refilled_at: Instant,
    paused_until: Option<Instant>,
}

/// The limiter of one credential, shared by every client built with it.
#[derive(Debug)]
pub struct Limiter {
    rate: RateLimit,
    bucket: Mutex<Bucket>,
}

impl Limiter {
    fn new(rate: RateLimit) -> Self {
        Self {
            rate,
            bucket: Mutex::new(Bucket {
                credit: capacity(rate),
                refilled_at: Instant::now(),
                paused_until: None,
            }),
        }
    }

    /// Waits until the credential is not paused and a token is available, then takes it.
    /// Returns how long it waited.
    pub async fn acquire(&self) -> Duration {
        let started = Instant::now();
        loop {
            let wait = self.try_take(Instant::now());
            match wait {
                None => return started.elapsed(),
                Some(wait) => tokio::time::sleep(wait).await,
            }
        }
    }

    /// Takes a token if possible, else says how long to wait before trying again.
    fn try_take(&self, now: Instant) -> Option<Duration> {
        let mut bucket = self.bucket.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(until) = bucket.paused_until {
            if until > now {
                return Some(until - now);
            }
            bucket.paused_until = None;
        }
        let elapsed = now.saturating_duration_since(bucket.refilled_at).as_nanos();
        let per_second = u128::from(self.rate.per_second.max(1));
        bucket.credit = (bucket.credit + elapsed * per_second).min(capacity(self.rate));
        bucket.refilled_at = now;
        if bucket.credit >= NANOS_PER_SEC {
            bucket.credit -= NANOS_PER_SEC;
            return None;
        }
        let missing = NANOS_PER_SEC - bucket.credit;
        let nanos = missing.div_ceil(per_second);
        Some(Duration::from_nanos(
            u64::try_from(nanos).unwrap_or(u64::MAX),
        ))
    }

    /// Blocks every call of this credential until `until` (a 429 told us to back off).
    pub(crate) fn pause_until(&self, until: Instant) {
        let mut bucket = self.bucket.lock().unwrap_or_else(PoisonError::into_inner);
        if bucket.paused_until.is_none_or(|current| current < until) {
            bucket.paused_until = Some(until);
        }
    }

    /// End of the current pause, if one is in force.
    pub fn paused_until(&self) -> Option<Instant> {
        let bucket = self.bucket.lock().unwrap_or_else(PoisonError::into_inner);
        bucket.paused_until.filter(|until| *until > Instant::now())
    }

    /// The rate this limiter enforces.
    pub fn rate(&self) -> RateLimit {
        self.rate
    }

    /// Full and not paused: dropping it loses nothing.
    fn is_idle(&self, now: Instant) -> bool {
        let bucket = self.bucket.lock().unwrap_or_else(PoisonError::into_inner);
        let elapsed = now.saturating_duration_since(bucket.refilled_at).as_nanos();
        let refilled = bucket.credit + elapsed * u128::from(self.rate.per_second.max(1));
        refilled >= capacity(self.rate) && bucket.paused_until.is_none_or(|until| until <= now)
    }
}

fn capacity(rate: RateLimit) -> u128 {
    u128::from(rate.burst.max(1)) * NANOS_PER_SEC
}

/// Registry of limiters keyed by credential fingerprint; clone it into every client factory.
///
/// Clients built with the same credential and the same registry share one bucket and one 429
/// pause. The first client of a credential fixes its rate.
#[derive(Debug, Clone, Default)]
pub struct RateLimiters {
    inner: Arc<Mutex<HashMap<String, Arc<Limiter>>>>,
}

impl RateLimiters {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// The limiter of `credentials`, created with `rate` if this registry has none yet.
    pub fn limiter(&self, credentials: &Credentials, rate: RateLimit) -> Arc<Limiter> {
        let key = credentials.fingerprint();
        let mut map = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(existing) = map.get(&key) {
            return Arc::clone(existing);
        }
        if map.len() >= PRUNE_ABOVE {
            let now = Instant::now();
            map.retain(|_, l| Arc::strong_count(l) > 1 || !l.is_idle(now));
        }
        let limiter = Arc::new(Limiter::new(rate));
        map.insert(key, Arc::clone(&limiter));
        limiter
    }

    /// Number of credentials tracked.
    pub fn len(&self) -> usize {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// True when no credential is tracked.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(t: &str) -> Credentials {
        Credentials::ApiToken(t.into())
    }

    #[tokio::test(start_paused = true)]
    async fn bucket_admits_burst_then_steady_rate() {
        let limiter = Limiter::new(RateLimit {
            per_second: 3,
            burst: 10,
        });
        let start = Instant::now();
        for _ in 0..10 {
            assert_eq!(limiter.try_take(start), None);
        }
        let wait = limiter.try_take(start).unwrap();
        assert_eq!(wait, Duration::from_nanos(333_333_334));
        assert_eq!(limiter.try_take(start + wait), None);
        assert!(limiter.try_take(start + wait).is_some());
        // Exactly three more tokens accrue per second.
        let later = start + wait + Duration::from_secs(1);
        for _ in 0..3 {
            assert_eq!(limiter.try_take(later), None);
        }
        assert!(limiter.try_take(later).is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn pause_blocks_until_its_end_and_only_extends() {
        let limiter = Limiter::new(RateLimit::default());
        let now = Instant::now();
        limiter.pause_until(now + Duration::from_secs(7));
        limiter.pause_until(now + Duration::from_secs(3));
        assert_eq!(limiter.try_take(now), Some(Duration::from_secs(7)));
        assert_eq!(limiter.paused_until(), Some(now + Duration::from_secs(7)));
        limiter.acquire().await;
        assert_eq!(now.elapsed(), Duration::from_secs(7));
        assert_eq!(limiter.paused_until(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn registry_shares_per_credential() {
        let registry = RateLimiters::new();
        let a1 = registry.limiter(&token("a"), RateLimit::default());
        let a2 = registry.clone().limiter(&token("a"), RateLimit::default());
        let b = registry.limiter(&token("b"), RateLimit::default());
        assert!(Arc::ptr_eq(&a1, &a2));
        assert!(!Arc::ptr_eq(&a1, &b));
        assert_eq!(registry.len(), 2);
        let key = Credentials::ApiKey {
            email: "e".into(),
            key: "a".into(),
        };
        let k = registry.limiter(&key, RateLimit::default());
        assert!(!Arc::ptr_eq(&a1, &k));
    }
}
