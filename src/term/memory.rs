//! Per-object memory of the tunnel controllers (failure counts, drift schedule). An entry goes
//! when its object does: the controllers follow their kinds' watch and, whenever an object
//! leaves the store (deleted, or out of the watch's scope), keep only the entries of objects
//! still in it (`forget_departed` in `tunnel_reconciler/departures.rs`), so an object deleted without a last
//! reconcile (no finalizer, never converged) leaves nothing behind.
use std::collections::HashMap;
use std::time::Instant;

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
