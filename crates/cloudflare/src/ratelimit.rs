//! The registry of per-credential pacers ([`crate::Limiter`]): one per credential per process.
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::time::Instant;

use super::budget::Pace;
use super::credentials::Credentials;
use super::pacer::Limiter;

/// Idle limiters are pruned from a registry only once it holds this many.
const PRUNE_ABOVE: usize = 64;

/// Registry of limiters keyed by credential fingerprint; clone it into every client factory.
///
/// Clients built with the same credential and the same registry share one bucket and one 429
/// pause. The first client of a credential fixes its pace (a server's slower policy may slow it).
#[derive(Debug, Clone, Default)]
pub struct RateLimiters {
    inner: Arc<Mutex<HashMap<String, Arc<Limiter>>>>,
}

impl RateLimiters {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// The limiter of `credentials`, created with `pace` if this registry has none yet.
    pub fn limiter(&self, credentials: &Credentials, pace: Pace) -> Arc<Limiter> {
        let key = credentials.fingerprint();
        let mut map = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(existing) = map.get(&key) {
            return Arc::clone(existing);
        }
        if map.len() >= PRUNE_ABOVE {
            let now = Instant::now();
            map.retain(|_, l| Arc::strong_count(l) > 1 || !l.is_idle(now));
        }
        let limiter = Arc::new(Limiter::new(pace));
        map.insert(key, Arc::clone(&limiter));
        limiter
    }

    /// Every credential's pacer, by the first 12 hex digits of its fingerprint (which name
    /// it without revealing it).
    pub fn each(&self) -> Vec<(String, Arc<Limiter>)> {
        let map = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        map.iter()
            .map(|(key, limiter)| (key.chars().take(12).collect(), Arc::clone(limiter)))
            .collect()
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
#[path = "pacer_tests.rs"]
mod tests;
