//! One credential's pacer: a token bucket that serves waiting calls by [`Priority`], then in
//! arrival order, with a shared 429 pause and what the server's `Ratelimit` header says is left.
//! On tokio time, so tests run it under a paused clock.
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use super::budget::Pace;

/// How urgent a call is: its lane. Waiting calls are served lane by lane, so a deletion never
/// queues behind a first sync, work a user just asked for never queues behind work nobody is
/// waiting for, and drift checks never delay a change. Within [`Priority::Urgent`] and
/// [`Priority::Background`] calls go in arrival order. Within [`Priority::Interactive`] and
/// [`Priority::Normal`] each lane alternates between its oldest and its newest waiting work: a
/// backlog drains in order at no less than half of what its lane is given, and work that
/// arrives behind it (a user's new tunnel among a thousand created together) waits for a
/// token or two instead of the whole backlog.
///
/// A call's age is that of its [`Work`] when it has one (every call of a reconcile shares the
/// reconcile's, and every reconcile of one request of a user shares the request's): a
/// tunnel's create, token read, configuration read and push are one piece of work, so a new
/// tunnel keeps the newest place through all of them. Ordered by call alone, each step of the
/// backlog would arrive newer than the new tunnel's waiting call and take the newest turn from
/// it, leaving it to wait until it became the oldest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Priority {
    /// A user's removal: deletions and their clean-up.
    Urgent,
    /// Work a user asked for while cftunnel runs (a tunnel created or its spec changed), until
    /// it is done: served before every other change.
    Interactive,
    /// Changes nobody is waiting on at this moment: the first sync of what existed before
    /// cftunnel started, route and DNS follow-ups, retries. Creates, token reads, pushes and
    /// DNS writes are here unless their work is a user's request.
    #[default]
    Normal,
    /// Checks that find nothing most of the time (drift checks). They never take the bucket's
    /// last [`Pace::reserve`] tokens, so a call of a higher priority arriving later finds one,
    /// and together they spend at most half the pace, so the other half is always there for
    /// changes.
    Background,
}

/// The age of a piece of work (a reconcile) whose calls queue as one: taken when the work
/// starts, from the same process-wide sequence that dates calls without one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Work(u64);

impl Work {
    /// Work starting now: newer than every call and every work before it.
    pub fn starting() -> Work {
        Work(next_arrival())
    }
}

/// Calls and pieces of work are dated on one scale.
fn next_arrival() -> u64 {
    static ARRIVALS: AtomicU64 = AtomicU64::new(1);
    ARRIVALS.fetch_add(1, AtomicOrdering::Relaxed)
}

/// A waiting call: its priority, the age of its work (its own arrival when it has none), its
/// own arrival.
type Key = (Priority, u64, u64);

/// The first key of the background calls: every key before it is a change.
const BACKGROUND: Key = (Priority::Background, 0, 0);

/// Bucket state; credit is counted in units where one token is worth `pace.window` in
/// nanoseconds and each elapsed nanosecond adds `pace.tokens` units, so arithmetic is exact.
#[derive(Debug)]
struct Bucket {
    credit: u128,
    refilled_at: Instant,
    paused_until: Option<Instant>,
    /// The server said this many calls are left until this instant (`Ratelimit: r, t`).
    allowance: Option<(u32, Instant)>,
    /// Background calls' own bucket: filled at the same rate, each of their calls costs two
    /// tokens of it (half the pace), holding at most [`Pace::reserve`] such calls.
    background: u128,
}

#[derive(Debug)]
struct State {
    pace: Pace,
    bucket: Bucket,
    /// Waiting calls by [`Key`]; only the [`State::head`] may take a token.
    queue: BTreeMap<Key, Arc<Notify>>,
    /// Per alternating lane ([`Priority::Interactive`], [`Priority::Normal`]): the next call
    /// of the lane served is its newest waiting one (else its oldest).
    newest_next: [bool; 2],
}

/// The pacer of one credential, shared by every client built with it.
#[derive(Debug)]
pub struct Limiter {
    state: Mutex<State>,
}

impl Limiter {
    pub(crate) fn new(pace: Pace) -> Self {
        Self {
            state: Mutex::new(State {
                pace,
                bucket: Bucket {
                    credit: pace.capacity(),
                    refilled_at: Instant::now(),
                    paused_until: None,
                    allowance: None,
                    background: pace.background_capacity(),
                },
                queue: BTreeMap::new(),
                newest_next: [false; 2],
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits until every call queued before it of its priority or a higher one has gone, the
    /// credential is not paused and a token is available, then takes it. Returns how long it
    /// waited. A caller that gives up (its future dropped) leaves the queue.
    pub async fn acquire(&self, priority: Priority) -> Duration {
        self.acquire_for(priority, None).await
    }

    /// Like [`Limiter::acquire`], for a call of `work`: it waits as old as the work is.
    pub async fn acquire_for(&self, priority: Priority, work: Option<Work>) -> Duration {
        let started = Instant::now();
        let ticket = Ticket::enqueue(self, priority, work);
        loop {
            let wait = {
                let mut state = self.lock();
                match state.head() {
                    Some(head) if head == ticket.key => {
                        match state.try_take(Instant::now(), priority) {
                            None => {
                                state.queue.remove(&ticket.key);
                                // Alternate only while there is a choice.
                                if let Some(lane) = alternating(priority)
                                    && state.waiting_in(priority)
                                {
                                    state.newest_next[lane] = !state.newest_next[lane];
                                }
                                state.wake_head();
                                drop(state);
                                ticket.served();
                                return started.elapsed();
                            }
                            Some(wait) => Some(wait),
                        }
                    }
                    _ => None,
                }
            };
            match wait {
                Some(wait) => {
                    tokio::select! {
                        _ = tokio::time::sleep(wait) => {}
                        _ = ticket.notify.notified() => {}
                    }
                }
                None => ticket.notify.notified().await,
            }
        }
    }

    /// A token taken and not spent (a [`crate::Turn`] dropped unused) goes back to the bucket,
    /// so work that gave way costs the credential nothing.
    pub(crate) fn give_back(&self) {
        let mut state = self.lock();
        state.refill(Instant::now());
        let token = state.pace.token();
        state.bucket.credit = (state.bucket.credit + token).min(state.pace.capacity());
        state.wake_head();
    }

    /// Is every call of this credential held by a 429's pause now?
    pub(crate) fn is_paused(&self) -> bool {
        self.paused_until().is_some()
    }

    /// Blocks every call of this credential until `until` (a 429 told us to back off).
    pub(crate) fn pause_until(&self, until: Instant) {
        let mut state = self.lock();
        let bucket = &mut state.bucket;
        if bucket.paused_until.is_none_or(|current| current < until) {
            bucket.paused_until = Some(until);
        }
    }

    /// The server's word on what is left: at most `remaining` calls until `until`. With none
    /// left, every call waits for `until`.
    pub(crate) fn server_allowance(&self, remaining: u32, until: Instant) {
        let mut state = self.lock();
        state.bucket.allowance = Some((remaining, until));
    }

    /// The server's policy is slower than this pacer's: pace at `slower` from now on.
    pub(crate) fn slow_to(&self, slower: Pace) {
        let mut state = self.lock();
        if slower.is_slower_than(&state.pace) {
            let now = Instant::now();
            state.refill(now);
            state.pace = slower;
            let capacity = slower.capacity();
            state.bucket.credit = state.bucket.credit.min(capacity);
            state.bucket.background = state.bucket.background.min(slower.background_capacity());
            state.wake_head();
        }
    }

    /// End of the current pause, if one is in force.
    pub fn paused_until(&self) -> Option<Instant> {
        let state = self.lock();
        state
            .bucket
            .paused_until
            .filter(|until| *until > Instant::now())
    }

    /// The pace this limiter keeps.
    pub fn pace(&self) -> Pace {
        self.lock().pace
    }

    /// Calls that could go at once now (the bucket's whole tokens), and the most it holds.
    pub fn tokens(&self) -> (u64, u64) {
        let mut state = self.lock();
        state.refill(Instant::now());
        let token = state.pace.token();
        let whole = |credit: u128| u64::try_from(credit / token).unwrap_or(u64::MAX);
        (whole(state.bucket.credit), whole(state.pace.capacity()))
    }

    /// Calls waiting for a token now.
    pub fn waiting(&self) -> usize {
        self.lock().queue.len()
    }

    /// Are calls of a higher priority than [`Priority::Background`] waiting for a token? While
    /// they are, a background call would wait for all of them: a check that can be put off
    /// asks this first instead of parking its caller behind a backlog.
    pub fn changes_waiting(&self) -> bool {
        let state = self.lock();
        state.queue.range(..BACKGROUND).next().is_some()
    }

    /// Full, not paused and nobody waiting: dropping it loses nothing.
    pub(crate) fn is_idle(&self, now: Instant) -> bool {
        let mut state = self.lock();
        state.refill(now);
        state.queue.is_empty()
            && state.bucket.credit >= state.pace.capacity()
            && state.bucket.paused_until.is_none_or(|until| until <= now)
    }
}

impl State {
    fn refill(&mut self, now: Instant) {
        let elapsed = now
            .saturating_duration_since(self.bucket.refilled_at)
            .as_nanos();
        let added = elapsed * u128::from(self.pace.tokens.max(1));
        self.bucket.credit = (self.bucket.credit + added).min(self.pace.capacity());
        self.bucket.background =
            (self.bucket.background + added).min(self.pace.background_capacity());
        self.bucket.refilled_at = now;
    }

    /// Takes a token for a call of `priority` if one may go now, else says how long to wait.
    fn try_take(&mut self, now: Instant, priority: Priority) -> Option<Duration> {
        if let Some(until) = self.bucket.paused_until {
            if until > now {
                return Some(until - now);
            }
            self.bucket.paused_until = None;
        }
        match self.bucket.allowance {
            Some((_, until)) if until <= now => self.bucket.allowance = None,
            Some((0, until)) => return Some(until - now),
            _ => {}
        }
        self.refill(now);
        let token = self.pace.token();
        let background = priority == Priority::Background;
        let (needed, own) = match background {
            true => (token * u128::from(1 + self.pace.reserve()), 2 * token),
            false => (token, 0),
        };
        let missing = needed
            .saturating_sub(self.bucket.credit)
            .max(own.saturating_sub(self.bucket.background));
        if missing == 0 {
            self.bucket.credit -= token;
            self.bucket.background -= own;
            if let Some((left, _)) = &mut self.bucket.allowance {
                *left = left.saturating_sub(1);
            }
            return None;
        }
        let nanos = missing.div_ceil(u128::from(self.pace.tokens.max(1)));
        Some(Duration::from_nanos(
            u64::try_from(nanos).unwrap_or(u64::MAX),
        ))
    }

    /// The call that may take the next token: of the highest priority waiting, the oldest, or
    /// in an alternating lane every other time the newest.
    fn head(&self) -> Option<Key> {
        let (&oldest, _) = self.queue.iter().next()?;
        match alternating(oldest.0) {
            Some(lane) if self.newest_next[lane] => {
                let newest = self.queue.range(..lane_end(oldest.0)).next_back();
                Some(newest.map_or(oldest, |(&key, _)| key))
            }
            _ => Some(oldest),
        }
    }

    /// Are calls of `priority` waiting?
    fn waiting_in(&self, priority: Priority) -> bool {
        self.queue
            .range((priority, 0, 0)..lane_end(priority))
            .next()
            .is_some()
    }

    fn wake_head(&self) {
        if let Some(notify) = self.head().and_then(|key| self.queue.get(&key)) {
            notify.notify_one();
        }
    }
}

/// The lanes that alternate between their oldest and newest work, by index.
fn alternating(priority: Priority) -> Option<usize> {
    match priority {
        Priority::Interactive => Some(0),
        Priority::Normal => Some(1),
        Priority::Urgent | Priority::Background => None,
    }
}

/// The first key after every call of `priority`.
fn lane_end(priority: Priority) -> Key {
    match priority {
        Priority::Urgent => (Priority::Interactive, 0, 0),
        Priority::Interactive => (Priority::Normal, 0, 0),
        Priority::Normal => BACKGROUND,
        Priority::Background => (Priority::Background, u64::MAX, u64::MAX),
    }
}

/// A place in the queue; leaving it (served or given up) wakes the next call.
struct Ticket<'l> {
    limiter: &'l Limiter,
    key: Key,
    notify: Arc<Notify>,
    served: bool,
}

impl<'l> Ticket<'l> {
    fn enqueue(limiter: &'l Limiter, priority: Priority, work: Option<Work>) -> Self {
        let mut state = limiter.lock();
        let arrival = next_arrival();
        let key = (priority, work.map_or(arrival, |w| w.0), arrival);
        let notify = Arc::new(Notify::new());
        state.queue.insert(key, notify.clone());
        Ticket {
            limiter,
            key,
            notify,
            served: false,
        }
    }

    fn served(mut self) {
        self.served = true;
    }
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        if self.served {
            return;
        }
        let mut state = self.limiter.lock();
        state.queue.remove(&self.key);
        state.wake_head();
    }
}
