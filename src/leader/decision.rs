//! The pure core of leader election: given the lease as read and how long it has looked the
//! same on this process's clock, what a candidate does next, and the record it writes.
//!
//! Expiry is judged on the local monotonic clock from the moment this process first read the
//! current record, never from `renewTime` (written by another machine's wall clock): clock skew
//! between nodes cannot make a live leader look expired. The cost is that a lease left behind
//! by a crashed holder is taken over one `leaseDurationSeconds` after this process first sees
//! it, even if its `renewTime` is old.
use std::time::{Duration, Instant};

use jiff::Timestamp;

/// `leaseDurationSeconds` written on release, as Kubernetes' own leader election does.
pub const RELEASED_DURATION_SECONDS: i32 = 1;

/// The leader-election fields of a coordination.k8s.io/v1 Lease `spec`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseRecord {
    /// `holderIdentity`; empty when the lease was released (or never held).
    pub holder: String,
    /// `leaseDurationSeconds`: how long after the last observed change the lease may be taken.
    pub duration_seconds: i32,
    /// `acquireTime`: when the current holder took the lease.
    pub acquire_time: Option<Timestamp>,
    /// `renewTime`: when the holder last wrote the lease.
    pub renew_time: Option<Timestamp>,
    /// `leaseTransitions`: how many times the lease changed hands.
    pub transitions: i32,
}

impl LeaseRecord {
    /// `leaseDurationSeconds` as a duration (a negative value counts as zero).
    pub fn lease_duration(&self) -> Duration {
        Duration::from_secs(u64::try_from(self.duration_seconds).unwrap_or(0))
    }
}

/// A record and the local instant this process first read it unchanged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observed {
    /// What the lease said.
    pub record: LeaseRecord,
    /// When that record was first read (the clock restarts on every change).
    pub since: Instant,
}

impl Observed {
    /// The holder, if the lease names one and it changed within its duration before `now`.
    pub(crate) fn live_holder(&self, now: Instant) -> Option<&str> {
        let unchanged_for = now.saturating_duration_since(self.since);
        (!self.record.holder.is_empty() && unchanged_for < self.record.lease_duration())
            .then_some(self.record.holder.as_str())
    }

    /// How long until the holder may be considered gone (zero once it is).
    pub(crate) fn expires_in(&self, now: Instant) -> Duration {
        (self.since + self.record.lease_duration()).saturating_duration_since(now)
    }
}

/// Keeps the last distinct record of one lease and when it was first read.
#[derive(Clone, Debug, Default)]
pub struct Observer {
    current: Option<Observed>,
}

impl Observer {
    /// Notes what a read returned at `now` (`None`: the lease does not exist).
    pub(crate) fn observe(&mut self, record: Option<LeaseRecord>, now: Instant) {
        self.current = match (self.current.take(), record) {
            (Some(previous), Some(record)) if previous.record == record => Some(previous),
            (_, Some(record)) => Some(Observed { record, since: now }),
            (_, None) => None,
        };
    }

    /// The last record read, if the lease existed.
    pub fn current(&self) -> Option<&Observed> {
        self.current.as_ref()
    }
}

/// What a candidate does with the lease it just read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// There is no lease: create it, holding it.
    Create,
    /// It names this candidate: renew it (same `acquireTime` and `leaseTransitions`).
    Renew,
    /// Released (empty holder) or expired: take it over (`leaseTransitions` + 1).
    TakeOver,
    /// Another holder is live: look again later.
    Wait {
        /// The live holder.
        holder: String,
        /// Time left before it may be considered gone, if nothing changes.
        expires_in: Duration,
    },
}

/// The decision for candidate `identity`, given the lease as observed and the local time.
pub fn decide(identity: &str, lease: Option<&Observed>, now: Instant) -> Decision {
    let Some(observed) = lease else {
        return Decision::Create;
    };
    if observed.record.holder == identity {
        return Decision::Renew;
    }
    match observed.live_holder(now) {
        Some(holder) => Decision::Wait {
            holder: holder.to_string(),
            expires_in: observed.expires_in(now),
        },
        None => Decision::TakeOver,
    }
}

/// The record to write for `decision` (none for [`Decision::Wait`]), at wall-clock time `now`.
pub fn next_record(
    decision: &Decision,
    identity: &str,
    duration_seconds: i32,
    previous: Option<&LeaseRecord>,
    now: Timestamp,
) -> Option<LeaseRecord> {
    let held = |acquire_time, transitions| LeaseRecord {
        holder: identity.to_string(),
        duration_seconds,
        acquire_time: Some(acquire_time),
        renew_time: Some(now),
        transitions,
    };
    let previous_transitions = previous.map_or(0, |p| p.transitions);
    match decision {
        Decision::Create => Some(held(now, 0)),
        Decision::Renew => Some(held(
            previous.and_then(|p| p.acquire_time).unwrap_or(now),
            previous_transitions,
        )),
        Decision::TakeOver => Some(held(now, previous_transitions.saturating_add(1))),
        Decision::Wait { .. } => None,
    }
}

/// The record written on graceful shutdown: no holder, a one-second duration, same transitions.
pub fn released_record(previous: &LeaseRecord, now: Timestamp) -> LeaseRecord {
    LeaseRecord {
        holder: String::new(),
        duration_seconds: RELEASED_DURATION_SECONDS,
        acquire_time: Some(now),
        renew_time: Some(now),
        transitions: previous.transitions,
    }
}
