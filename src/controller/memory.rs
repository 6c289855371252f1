//! Per-object memory of the tunnel controllers (failure counts, drift schedule), bounded in
//! time: an object that is deleted without a last reconcile (an existingTunnel object holds no
//! finalizer; the controller never runs for an object that is gone) leaves an entry nobody
//! touches again. An entry is dropped once it is stale: a failure count not bumped for two
//! longest retry delays (a failing object is retried well within one), a drift check overdue
//! by two intervals (a live object is requeued for it within one). Dropping a live object's
//! stale entry only restarts its backoff at the first delay, or its drift schedule.
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Consecutive failures per object key, with when each was last counted.
#[derive(Debug, Default)]
pub struct Failures {
    entries: HashMap<String, (u32, Instant)>,
}

impl Failures {
    /// Counts one more failure of `key`; returns the count. Prunes entries older than `keep`.
    pub fn bump(&mut self, key: &str, now: Instant, keep: Duration) -> u32 {
        self.entries
            .retain(|_, (_, at)| now.saturating_duration_since(*at) <= keep);
        let entry = self.entries.entry(key.to_string()).or_insert((0, now));
        entry.0 = entry.0.saturating_add(1);
        entry.1 = now;
        entry.0
    }

    pub fn reset(&mut self, key: &str) {
        self.entries.remove(key);
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// When each object's next drift check is due, by uid.
#[derive(Debug, Default)]
pub struct DriftSchedule {
    due: HashMap<String, Instant>,
}

impl DriftSchedule {
    /// The due time of `uid`, scheduling `next` on first sight. Prunes entries overdue by more
    /// than `keep`.
    pub fn get_or_schedule(
        &mut self,
        uid: &str,
        next: Instant,
        now: Instant,
        keep: Duration,
    ) -> (Instant, bool) {
        self.due
            .retain(|_, at| now.saturating_duration_since(*at) <= keep);
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

    pub fn forget(&mut self, uid: &str) {
        self.due.remove(uid);
    }

    pub fn len(&self) -> usize {
        self.due.len()
    }

    pub fn is_empty(&self) -> bool {
        self.due.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEEP: Duration = Duration::from_secs(600);

    #[test]
    fn failures_count_up_reset_and_stale_entries_of_gone_objects_are_dropped() {
        let t0 = Instant::now();
        let mut failures = Failures::default();
        assert_eq!(failures.bump("gone", t0, KEEP), 1);
        assert_eq!(failures.bump("live", t0, KEEP), 1);
        let later = t0 + Duration::from_secs(300);
        assert_eq!(failures.bump("live", later, KEEP), 2);
        failures.reset("nothing");
        assert_eq!(failures.len(), 2);
        let much_later = t0 + KEEP + Duration::from_secs(1);
        assert_eq!(failures.bump("live", much_later, KEEP), 3);
        assert_eq!(failures.len(), 1, "the gone object's count was dropped");
        failures.reset("live");
        assert!(failures.is_empty());
    }

    #[test]
    fn a_drift_schedule_of_a_gone_object_is_dropped_once_overdue() {
        let t0 = Instant::now();
        let mut schedule = DriftSchedule::default();
        let first = t0 + Duration::from_secs(60);
        assert_eq!(
            schedule.get_or_schedule("gone", first, t0, KEEP),
            (first, true)
        );
        assert_eq!(
            schedule.get_or_schedule("live", first, t0, KEEP),
            (first, true)
        );
        let later = t0 + Duration::from_secs(120);
        assert_eq!(
            schedule.get_or_schedule("live", later, later, KEEP),
            (first, false),
            "a known object keeps its schedule"
        );
        schedule.set("live", later + Duration::from_secs(600));
        let much_later = first + KEEP + Duration::from_secs(1);
        schedule.get_or_schedule("live", much_later, much_later, KEEP);
        assert_eq!(schedule.len(), 1, "the gone object's schedule was dropped");
        schedule.forget("live");
        assert!(schedule.is_empty());
    }
}
