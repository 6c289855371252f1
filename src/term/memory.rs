//! Per-object memory of a reconciler (failure counts and their backoff, drift schedule). The
//! tunnel reconciler keeps its own in `tunnel_reconciler::TunnelContext`, the Access reconciler
//! its own [`Backoff`]. An entry goes when its object does: the tunnel controllers follow their
//! kinds' watch and, whenever an object leaves the store (deleted, or out of the watch's scope),
//! keep only the entries of objects still in it (`forget_departed` in
//! `tunnel_reconciler/departures.rs`), so an object deleted without a last reconcile (no
//! finalizer, never converged) leaves nothing behind.
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::options::ControllerOptions;

/// Exponential backoff per key: consecutive failures, and the delay they call for
/// (`--retry-base` doubling per failure, at most `--retry-max`).
#[derive(Debug)]
pub(crate) struct Backoff {
    failures: Mutex<Failures>,
    base: Duration,
    max: Duration,
}

impl Backoff {
    pub(crate) fn new(options: &ControllerOptions) -> Backoff {
        Backoff {
            failures: Mutex::new(Failures::default()),
            base: options.retry_base,
            max: options.retry_max,
        }
    }

    fn failures(&self) -> std::sync::MutexGuard<'_, Failures> {
        self.failures.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records one more failure of `key` and returns the delay before the next attempt.
    pub(crate) fn next(&self, key: &str) -> Duration {
        let count = self.failures().bump(key);
        let factor = 2u32.saturating_pow(count.saturating_sub(1).min(16));
        self.base.saturating_mul(factor).min(self.max)
    }

    /// Is `key` failing already, i.e. is a new failure part of a streak that was announced?
    pub(crate) fn in_streak(&self, key: &str) -> bool {
        self.failures().count(key) > 0
    }

    /// Forgets the failures of `key` after a success.
    pub(crate) fn reset(&self, key: &str) {
        self.failures().reset(key);
    }

    /// Keeps the failure counts of the keys `live` accepts.
    pub(crate) fn retain(&self, live: impl Fn(&str) -> bool) {
        self.failures().retain(live);
    }

    /// How many keys have a failure count.
    pub(crate) fn len(&self) -> usize {
        self.failures().len()
    }
}

/// Consecutive failures per object key (`Kind namespace/name`).
#[derive(Debug, Default)]
pub(crate) struct Failures {
    entries: HashMap<String, u32>,
}

impl Failures {
    /// Counts one more failure of `key`; returns the count.
    pub fn bump(&mut self, key: &str) -> u32 {
        let entry = self.entries.entry(key.to_string()).or_insert(0);
        *entry = entry.saturating_add(1);
        *entry
    }

    /// Consecutive failures of `key` so far (0: its last reconcile succeeded).
    pub fn count(&self, key: &str) -> u32 {
        self.entries.get(key).copied().unwrap_or(0)
    }

    pub fn reset(&mut self, key: &str) {
        self.entries.remove(key);
    }

    /// Keeps the entries of the keys `live` accepts.
    pub fn retain(&mut self, live: impl Fn(&str) -> bool) {
        self.entries.retain(|key, _| live(key));
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// When each object's next drift check is due, by uid.
#[derive(Debug, Default)]
pub(crate) struct DriftSchedule {
    due: HashMap<String, Instant>,
}

impl DriftSchedule {
    /// The due time of `uid`, scheduling `next` on first sight (`true`).
    pub(crate) fn get_or_schedule(&mut self, uid: &str, next: Instant) -> (Instant, bool) {
        match self.due.get(uid) {
            Some(at) => (*at, false),
            None => {
                self.due.insert(uid.to_string(), next);
                (next, true)
            }
        }
    }

    pub fn set(&mut self, uid: &str, at: Instant) {
        self.due.insert(uid.to_string(), at);
    }

    pub(crate) fn forget(&mut self, uid: &str) {
        self.due.remove(uid);
    }

    /// Keeps the schedules of the uids `live` accepts.
    pub fn retain(&mut self, live: impl Fn(&str) -> bool) {
        self.due.retain(|uid, _| live(uid));
    }

    pub fn len(&self) -> usize {
        self.due.len()
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.due.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn failures_count_up_reset_and_only_live_keys_are_kept() {
        let mut failures = Failures::default();
        assert_eq!(failures.bump("gone"), 1);
        assert_eq!(failures.bump("live"), 1);
        assert_eq!(failures.bump("live"), 2);
        failures.reset("nothing");
        assert_eq!(failures.len(), 2);
        failures.retain(|k| k == "live");
        assert_eq!(failures.len(), 1, "the gone object's count was dropped");
        assert_eq!(failures.bump("live"), 3, "a live object keeps its count");
        failures.reset("live");
        assert!(failures.is_empty());
    }

    #[test]
    fn a_drift_schedule_is_kept_while_its_object_lives() {
        let t0 = Instant::now();
        let mut schedule = DriftSchedule::default();
        let first = t0 + Duration::from_secs(60);
        assert_eq!(schedule.get_or_schedule("gone", first), (first, true));
        assert_eq!(schedule.get_or_schedule("live", first), (first, true));
        let later = t0 + Duration::from_secs(120);
        assert_eq!(
            schedule.get_or_schedule("live", later),
            (first, false),
            "a known object keeps its schedule"
        );
        schedule.retain(|uid| uid == "live");
        assert_eq!(schedule.len(), 1, "the gone object's schedule was dropped");
        schedule.forget("live");
        assert!(schedule.is_empty());
    }
}
