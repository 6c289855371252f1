//! Unit tests of the pure leader-election decisions.
use std::time::{Duration, Instant};

use jiff::Timestamp;
use proptest::prelude::*;

use super::decision::*;

const ME: &str = "cftunnel-0_abc";

fn record(holder: &str, duration_seconds: i32, transitions: i32) -> LeaseRecord {
    LeaseRecord {
        holder: holder.to_string(),
        duration_seconds,
        acquire_time: Some(Timestamp::UNIX_EPOCH),
        renew_time: Some(Timestamp::UNIX_EPOCH),
        transitions,
    }
}

fn observed_at(record: LeaseRecord, since: Instant) -> Observed {
    Observed { record, since }
}

#[test]
fn absent_lease_is_created() {
    assert_eq!(decide(ME, None, Instant::now()), Decision::Create);
}

#[test]
fn own_lease_is_renewed_even_when_it_looks_expired() {
    let t0 = Instant::now();
    let lease = observed_at(record(ME, 15, 3), t0);
    assert_eq!(
        decide(ME, Some(&lease), t0 + Duration::from_secs(60)),
        Decision::Renew
    );
}

#[test]
fn live_foreign_holder_is_waited_for() {
    let t0 = Instant::now();
    let lease = observed_at(record("other", 15, 0), t0);
    assert_eq!(
        decide(ME, Some(&lease), t0 + Duration::from_secs(5)),
        Decision::Wait {
            holder: "other".into(),
            expires_in: Duration::from_secs(10)
        }
    );
}

#[test]
fn foreign_holder_unchanged_for_its_duration_is_taken_over() {
    let t0 = Instant::now();
    let lease = observed_at(record("other", 15, 0), t0);
    assert_eq!(
        decide(ME, Some(&lease), t0 + Duration::from_secs(15)),
        Decision::TakeOver
    );
}

#[test]
fn released_lease_is_taken_over_at_once() {
    let t0 = Instant::now();
    let lease = observed_at(record("", 1, 4), t0);
    assert_eq!(decide(ME, Some(&lease), t0), Decision::TakeOver);
}

#[test]
fn expiry_is_measured_from_the_first_read_not_from_renew_time() {
    let t0 = Instant::now();
    let mut observer = Observer::default();
    // renewTime is at the Unix epoch, long past: still live for 15 s after this process reads it.
    observer.observe(Some(record("other", 15, 0)), t0);
    let later = t0 + Duration::from_secs(14);
    observer.observe(Some(record("other", 15, 0)), later);
    assert!(matches!(
        decide(ME, observer.current(), later),
        Decision::Wait { .. }
    ));
    assert_eq!(
        decide(ME, observer.current(), t0 + Duration::from_secs(15)),
        Decision::TakeOver
    );
}

#[test]
fn a_changed_record_restarts_the_clock() {
    let t0 = Instant::now();
    let mut observer = Observer::default();
    observer.observe(Some(record("other", 15, 0)), t0);
    let mut renewed = record("other", 15, 0);
    renewed.renew_time = Some(Timestamp::UNIX_EPOCH + Duration::from_secs(10));
    let t10 = t0 + Duration::from_secs(10);
    observer.observe(Some(renewed), t10);
    assert_eq!(observer.current().map(|o| o.since), Some(t10));
    assert!(matches!(
        decide(ME, observer.current(), t0 + Duration::from_secs(20)),
        Decision::Wait { .. }
    ));
}

#[test]
fn a_deleted_lease_is_forgotten() {
    let t0 = Instant::now();
    let mut observer = Observer::default();
    observer.observe(Some(record("other", 15, 0)), t0);
    observer.observe(None, t0);
    assert_eq!(decide(ME, observer.current(), t0), Decision::Create);
}

#[test]
fn created_record_holds_with_zero_transitions() {
    let now = Timestamp::UNIX_EPOCH + Duration::from_secs(100);
    assert_eq!(
        next_record(&Decision::Create, ME, 15, None, now),
        Some(LeaseRecord {
            holder: ME.into(),
            duration_seconds: 15,
            acquire_time: Some(now),
            renew_time: Some(now),
            transitions: 0,
        })
    );
}

#[test]
fn renewal_keeps_acquire_time_and_transitions() {
    let now = Timestamp::UNIX_EPOCH + Duration::from_secs(100);
    let previous = record(ME, 15, 7);
    let next = next_record(&Decision::Renew, ME, 15, Some(&previous), now);
    assert_eq!(
        next,
        Some(LeaseRecord {
            renew_time: Some(now),
            ..previous
        })
    );
}

#[test]
fn takeover_counts_a_transition_and_restarts_acquire_time() {
    let now = Timestamp::UNIX_EPOCH + Duration::from_secs(100);
    let previous = record("other", 15, 7);
    let next = next_record(&Decision::TakeOver, ME, 15, Some(&previous), now);
    assert_eq!(
        next,
        Some(LeaseRecord {
            holder: ME.into(),
            duration_seconds: 15,
            acquire_time: Some(now),
            renew_time: Some(now),
            transitions: 8,
        })
    );
}

#[test]
fn waiting_writes_nothing() {
    let wait = Decision::Wait {
        holder: "other".into(),
        expires_in: Duration::ZERO,
    };
    assert_eq!(
        next_record(&wait, ME, 15, None, Timestamp::UNIX_EPOCH),
        None
    );
}

#[test]
fn release_clears_the_holder_and_keeps_transitions() {
    let now = Timestamp::UNIX_EPOCH + Duration::from_secs(100);
    assert_eq!(
        released_record(&record(ME, 15, 2), now),
        LeaseRecord {
            holder: String::new(),
            duration_seconds: 1,
            acquire_time: Some(now),
            renew_time: Some(now),
            transitions: 2,
        }
    );
}

proptest! {
    #[test]
    fn never_takes_a_foreign_lease_before_it_expires(
        duration in 1i32..600,
        waited_ms in 0u64..600_000,
        transitions in 0i32..1000,
        holder in "[a-z0-9_-]{1,20}",
    ) {
        prop_assume!(holder != ME);
        let t0 = Instant::now();
        let lease = observed_at(record(&holder, duration, transitions), t0);
        let now = t0 + Duration::from_millis(waited_ms);
        let decision = decide(ME, Some(&lease), now);
        let expired = waited_ms >= u64::try_from(duration).unwrap_or(0) * 1000;
        prop_assert_eq!(decision == Decision::TakeOver, expired);
        prop_assert_eq!(matches!(decision, Decision::Wait { .. }), !expired);
    }

    #[test]
    fn transitions_grow_only_on_takeover(
        transitions in 0i32..i32::MAX,
        holder in "[a-z0-9_-]{0,20}",
    ) {
        let previous = record(&holder, 15, transitions);
        let now = Timestamp::UNIX_EPOCH;
        let renewed = next_record(&Decision::Renew, ME, 15, Some(&previous), now);
        let taken = next_record(&Decision::TakeOver, ME, 15, Some(&previous), now);
        prop_assert_eq!(renewed.map(|r| r.transitions), Some(transitions));
        prop_assert_eq!(taken.map(|r| r.transitions), Some(transitions.saturating_add(1)));
    }
}
