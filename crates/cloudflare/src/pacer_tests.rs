//! The pacer and the registry, under paused time.
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::*;
use crate::budget::{Budget, Pace, RateLimit};
use crate::pacer::{Limiter, Priority, Work};

fn token(t: &str) -> Credentials {
    Credentials::ApiToken(t.into())
}

fn pace(per_second: u32, burst: u32) -> Pace {
    Pace::from(RateLimit { per_second, burst })
}

/// Spawns `count` calls of `priority`, each recording its label and when it got its token.
fn spawn_calls(
    limiter: &Arc<Limiter>,
    label: &'static str,
    priority: Priority,
    count: usize,
    served: &Arc<std::sync::Mutex<Vec<(&'static str, Duration)>>>,
    start: Instant,
) -> Vec<tokio::task::JoinHandle<()>> {
    (0..count)
        .map(|_| {
            let limiter = limiter.clone();
            let served = served.clone();
            tokio::spawn(async move {
                limiter.acquire(priority).await;
                served
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .push((label, start.elapsed()));
            })
        })
        .collect()
}

/// The labels of the calls `spawn_calls` recorded, in the order they were served.
fn served_order(served: &std::sync::Mutex<Vec<(&'static str, Duration)>>) -> Vec<&'static str> {
    served
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .iter()
        .map(|(label, _)| *label)
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_budget_becomes_a_pace_that_never_spends_more_than_it_in_a_window() {
    for (requests, secs) in [(1200, 300), (900, 300), (60, 15), (45, 15), (1, 1), (7, 60)] {
        let budget = Budget {
            requests,
            window: Duration::from_secs(secs),
        };
        let pace = Pace::within(budget);
        assert!(pace.burst >= 1 && pace.tokens >= 1);
        assert!(
            pace.burst + pace.tokens <= requests.max(2),
            "{budget:?} → {pace:?}"
        );
    }
    let default = Pace::within(Budget {
        requests: 900,
        window: Duration::from_secs(300),
    });
    assert_eq!((default.tokens, default.burst), (890, 10));
    // Calls admitted in any window of the budget stay within it, counted on the pacer itself.
    let budget = Budget {
        requests: 60,
        window: Duration::from_secs(15),
    };
    let limiter = Arc::new(Limiter::new(Pace::within(budget)));
    let start = Instant::now();
    let mut at = Vec::new();
    for _ in 0..200 {
        limiter.acquire(Priority::Normal).await;
        at.push(start.elapsed());
    }
    for (i, first) in at.iter().enumerate() {
        let in_window = at[i..]
            .iter()
            .take_while(|t| **t < *first + budget.window)
            .count();
        assert!(in_window <= 60, "{in_window} calls in 15 s from {first:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn bucket_admits_burst_then_steady_rate() {
    let limiter = Limiter::new(pace(3, 10));
    let start = Instant::now();
    for _ in 0..10 {
        limiter.acquire(Priority::Normal).await;
    }
    assert_eq!(start.elapsed(), Duration::ZERO);
    limiter.acquire(Priority::Normal).await;
    // A third of a second (tokio's timer rounds up to the millisecond).
    let eleventh = start.elapsed();
    assert!(
        eleventh >= Duration::from_nanos(333_333_334) && eleventh <= Duration::from_millis(334)
    );
    for _ in 0..3 {
        limiter.acquire(Priority::Normal).await;
    }
    assert!(start.elapsed() <= Duration::from_millis(1_334));
}

#[tokio::test(start_paused = true)]
async fn waiting_calls_are_served_by_priority_then_in_arrival_order() {
    let limiter = Arc::new(Limiter::new(pace(1, 1)));
    limiter.acquire(Priority::Normal).await; // the bucket is empty now
    let start = Instant::now();
    let served = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut calls = spawn_calls(&limiter, "drift", Priority::Background, 3, &served, start);
    tokio::time::sleep(Duration::from_millis(10)).await;
    calls.extend(spawn_calls(
        &limiter,
        "sync",
        Priority::Normal,
        3,
        &served,
        start,
    ));
    tokio::time::sleep(Duration::from_millis(10)).await;
    calls.extend(spawn_calls(
        &limiter,
        "delete",
        Priority::Urgent,
        2,
        &served,
        start,
    ));
    for call in calls {
        call.await.expect("call");
    }
    let order = served_order(&served);
    assert_eq!(
        order,
        [
            "delete", "delete", "sync", "sync", "sync", "drift", "drift", "drift"
        ]
    );
    assert_eq!(limiter.waiting(), 0);
}

#[tokio::test(start_paused = true)]
async fn background_calls_leave_the_reserve_for_the_calls_that_come_later() {
    let limiter = Limiter::new(pace(1, 10));
    assert_eq!(limiter.pace().reserve(), 5);
    let start = Instant::now();
    for _ in 0..5 {
        limiter.acquire(Priority::Background).await;
    }
    assert_eq!(start.elapsed(), Duration::ZERO);
    // A deletion takes one of the five kept; the next drift call waits until six are there
    // again (one to take, five to keep): two seconds at one a second.
    limiter.acquire(Priority::Urgent).await;
    assert_eq!(start.elapsed(), Duration::ZERO);
    limiter.acquire(Priority::Background).await;
    assert_eq!(start.elapsed(), Duration::from_secs(2));
}

/// Runs `steps` normal calls one after another (a reconcile's create, reads and push), as one
/// piece of work when `as_work`; returns when its last call got its token.
fn spawn_chain(
    limiter: &Arc<Limiter>,
    steps: usize,
    as_work: bool,
    start: Instant,
) -> tokio::task::JoinHandle<Duration> {
    let limiter = limiter.clone();
    let work = as_work.then(Work::starting);
    tokio::spawn(async move {
        for _ in 0..steps {
            limiter.acquire_for(Priority::Normal, work).await;
        }
        start.elapsed()
    })
}

/// When the last call of a piece of work arriving behind a backlog of multi-step work is
/// served, with its calls dated as work or one by one.
async fn late_chain_done(as_work: bool) -> Duration {
    const STEPS: usize = 4;
    let limiter = Arc::new(Limiter::new(pace(1, 1)));
    limiter.acquire(Priority::Normal).await;
    let start = Instant::now();
    let backlog: Vec<_> = (0..20)
        .map(|_| spawn_chain(&limiter, STEPS, as_work, start))
        .collect();
    tokio::task::yield_now().await;
    let late = spawn_chain(&limiter, STEPS, as_work, start)
        .await
        .expect("late");
    for chain in backlog {
        chain.await.expect("backlog");
    }
    late
}

#[tokio::test(start_paused = true)]
async fn new_work_keeps_the_newest_turn_through_every_one_of_its_calls() {
    // Every other token goes to the newest work: its four calls are done by the eighth.
    let as_work = late_chain_done(true).await;
    assert!(as_work <= Duration::from_secs(8), "{as_work:?}");
    // Dated one by one, each backlog step that follows a served one is newer than the late
    // chain's waiting call and takes the newest turn: it waits to be the oldest instead.
    let by_call = late_chain_done(false).await;
    assert!(by_call >= Duration::from_secs(30), "{by_call:?}");
}

#[tokio::test(start_paused = true)]
async fn changes_waiting_counts_every_call_above_the_background_ones() {
    let limiter = Arc::new(Limiter::new(pace(1, 1)));
    limiter.acquire(Priority::Normal).await;
    assert!(!limiter.changes_waiting());
    let served = Arc::new(std::sync::Mutex::new(Vec::new()));
    let start = Instant::now();
    let drift = spawn_calls(&limiter, "drift", Priority::Background, 1, &served, start);
    tokio::task::yield_now().await;
    assert_eq!(limiter.waiting(), 1);
    assert!(!limiter.changes_waiting(), "only a background call waits");
    for (label, priority) in [("sync", Priority::Normal), ("delete", Priority::Urgent)] {
        let call = spawn_calls(&limiter, label, priority, 1, &served, start);
        tokio::task::yield_now().await;
        assert!(limiter.changes_waiting(), "a {label} call waits");
        for call in call {
            call.await.expect("call");
        }
    }
    assert!(!limiter.changes_waiting());
    for call in drift {
        call.await.expect("call");
    }
    assert_eq!(served_order(&served), ["sync", "delete", "drift"]);
}

#[tokio::test(start_paused = true)]
async fn a_call_that_gives_up_leaves_the_queue_and_the_next_is_served() {
    let limiter = Arc::new(Limiter::new(pace(1, 1)));
    limiter.acquire(Priority::Normal).await;
    let start = Instant::now();
    let gave_up = tokio::time::timeout(
        Duration::from_millis(100),
        limiter.acquire(Priority::Urgent),
    )
    .await;
    assert!(gave_up.is_err());
    assert_eq!(limiter.waiting(), 0);
    limiter.acquire(Priority::Normal).await;
    assert_eq!(start.elapsed(), Duration::from_secs(1));
}

#[tokio::test(start_paused = true)]
async fn pause_blocks_until_its_end_and_only_extends() {
    let limiter = Limiter::new(pace(3, 10));
    let now = Instant::now();
    limiter.pause_until(now + Duration::from_secs(7));
    limiter.pause_until(now + Duration::from_secs(3));
    assert_eq!(limiter.paused_until(), Some(now + Duration::from_secs(7)));
    limiter.acquire(Priority::Urgent).await;
    assert_eq!(now.elapsed(), Duration::from_secs(7));
    assert_eq!(limiter.paused_until(), None);
}

#[tokio::test(start_paused = true)]
async fn what_the_server_says_is_left_is_never_exceeded() {
    let limiter = Limiter::new(pace(100, 100));
    let start = Instant::now();
    limiter.server_allowance(2, start + Duration::from_secs(30));
    limiter.acquire(Priority::Normal).await;
    limiter.acquire(Priority::Normal).await;
    assert_eq!(start.elapsed(), Duration::ZERO);
    limiter.acquire(Priority::Urgent).await;
    assert_eq!(start.elapsed(), Duration::from_secs(30));
}

#[tokio::test(start_paused = true)]
async fn a_slower_server_policy_slows_the_pace_a_faster_one_does_not() {
    let limiter = Limiter::new(pace(3, 10));
    let slower = Pace::within(Budget {
        requests: 45,
        window: Duration::from_secs(60),
    });
    limiter.slow_to(slower);
    assert_eq!(limiter.pace(), slower);
    limiter.slow_to(pace(100, 100));
    assert_eq!(limiter.pace(), slower);
}

#[tokio::test(start_paused = true)]
async fn registry_shares_per_credential() {
    let registry = RateLimiters::new();
    let a1 = registry.limiter(&token("a"), Pace::from(RateLimit::default()));
    let a2 = registry
        .clone()
        .limiter(&token("a"), Pace::from(RateLimit::default()));
    let b = registry.limiter(&token("b"), Pace::from(RateLimit::default()));
    assert!(Arc::ptr_eq(&a1, &a2));
    assert!(!Arc::ptr_eq(&a1, &b));
    assert_eq!(registry.len(), 2);
    let key = Credentials::ApiKey {
        email: "e".into(),
        key: "a".into(),
    };
    let k = registry.limiter(&key, Pace::from(RateLimit::default()));
    assert!(!Arc::ptr_eq(&a1, &k));
}

#[tokio::test(start_paused = true)]
async fn background_calls_alone_spend_half_the_pace() {
    let limiter = Limiter::new(pace(10, 10));
    let start = Instant::now();
    for _ in 0..105 {
        limiter.acquire(Priority::Background).await;
    }
    // Five at once (the background bucket), then one every fifth of a second: 5/s of 10/s.
    let elapsed = start.elapsed();
    assert!(
        elapsed >= Duration::from_secs(20) && elapsed <= Duration::from_millis(20_100),
        "{elapsed:?}"
    );
    // Meanwhile the other half stayed: a change goes at once.
    let before = Instant::now();
    limiter.acquire(Priority::Normal).await;
    assert_eq!(before.elapsed(), Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn normal_calls_alternate_oldest_and_newest_so_a_late_one_skips_the_backlog() {
    let limiter = Arc::new(Limiter::new(pace(1, 1)));
    limiter.acquire(Priority::Normal).await;
    let start = Instant::now();
    let served = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut calls = Vec::new();
    for label in ["1", "2", "3", "4", "5"] {
        calls.extend(spawn_calls(
            &limiter,
            label,
            Priority::Normal,
            1,
            &served,
            start,
        ));
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // The backlog's first goes first; then "late", arrived after all of them, goes second.
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    calls.extend(spawn_calls(
        &limiter,
        "late",
        Priority::Normal,
        1,
        &served,
        start,
    ));
    for call in calls {
        call.await.expect("call");
    }
    let order = served_order(&served);
    assert_eq!(order, ["1", "late", "2", "5", "3", "4"]);
}

#[tokio::test(start_paused = true)]
async fn interactive_calls_go_before_every_normal_one_and_alternate_within_their_lane() {
    let limiter = Arc::new(Limiter::new(pace(1, 1)));
    limiter.acquire(Priority::Normal).await;
    let start = Instant::now();
    let served = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut calls = Vec::new();
    // A backlog nobody waits on, then three requests of users, one after another.
    calls.extend(spawn_calls(
        &limiter,
        "sync",
        Priority::Normal,
        3,
        &served,
        start,
    ));
    for label in ["a", "b", "c"] {
        tokio::time::sleep(Duration::from_millis(10)).await;
        calls.extend(spawn_calls(
            &limiter,
            label,
            Priority::Interactive,
            1,
            &served,
            start,
        ));
    }
    // A deletion still goes first of all.
    calls.extend(spawn_calls(
        &limiter,
        "delete",
        Priority::Urgent,
        1,
        &served,
        start,
    ));
    for call in calls {
        call.await.expect("call");
    }
    // The interactive lane alternates its oldest and newest; the backlog waits for it.
    assert_eq!(
        served_order(&served),
        ["delete", "a", "c", "b", "sync", "sync", "sync"]
    );
}

/// Interactive work behind an interactive backlog of multi-step work (forty tunnels created
/// together, then one more) keeps the newest turn of its lane through all its calls.
#[tokio::test(start_paused = true)]
async fn a_request_behind_a_burst_of_requests_waits_for_a_few_tokens_not_the_burst() {
    const STEPS: usize = 3;
    let limiter = Arc::new(Limiter::new(pace(1, 1)));
    limiter.acquire(Priority::Normal).await;
    let start = Instant::now();
    let chain = |work: Work| {
        let limiter = limiter.clone();
        tokio::spawn(async move {
            for _ in 0..STEPS {
                limiter.acquire_for(Priority::Interactive, Some(work)).await;
            }
            start.elapsed()
        })
    };
    let burst: Vec<_> = (0..40).map(|_| chain(Work::starting())).collect();
    // Each of the burst's own reconciles is dated by its request, so none arrives newer.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let late = chain(Work::starting()).await.expect("late");
    for work in burst {
        work.await.expect("burst");
    }
    // Five tokens of the burst before it arrived, then every other token is the late one's.
    assert!(
        late <= Duration::from_secs(5 + 2 * STEPS as u64),
        "{late:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn the_tokens_left_fall_with_each_call_and_refill_with_time() {
    let limiters = RateLimiters::new();
    let limiter = limiters.limiter(&token("a"), pace(2, 10));
    assert_eq!(limiter.tokens(), (10, 10));
    for _ in 0..4 {
        limiter.acquire(Priority::Normal).await;
    }
    assert_eq!(limiter.tokens(), (6, 10));
    tokio::time::advance(Duration::from_secs(1)).await;
    assert_eq!(limiter.tokens(), (8, 10));
    let each = limiters.each();
    assert_eq!(each.len(), 1);
    assert_eq!(each[0].0.len(), 12);
    assert!(token("a").fingerprint().starts_with(&each[0].0));
}
