//! What the Tunnel and ClusterTunnel controllers get: the term's [`Context`], what they read
//! from and report to other components (handed in by `wiring.rs`), and their own memory.
use std::collections::HashSet;
use std::ops::Deref;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::term::Context;
use crate::term::access::AccessShared;
use crate::term::asks::Asks;
use crate::term::claims::Claims;
use crate::term::dns_guard::DnsWriters;
use crate::term::memory::{Backoff, DriftSchedule};
use crate::term::route_index::RouteReader;
use crate::term::shared::SharedTunnels;
use crate::term::slots::Slots;

/// Tunnel reconciles that talk to the API server at once. The controllers run every due
/// reconcile at once, so that each waits for Cloudflare at its credential's pacer, where
/// priorities order them (a deletion or a new tunnel does not queue behind a first sync of a
/// thousand). The parts before and after Cloudflare (reading Secrets; rendering and applying,
/// which hold rendered objects and API answers and make a process's peak memory) each take
/// one of these slots, so a thousand reconciles never open a thousand API requests at once.
pub(crate) const API_SLOTS: usize = 8;

/// The tunnel controllers' context: the term's [`Context`] (reachable through `Deref`, so the
/// many `ctx.client`, `ctx.options`, `ctx.cloudflare` reads and the helpers taking `&Context`
/// stay as they are), the hand-offs they read and write, and the memory only they keep.
pub struct TunnelContext {
    pub ctx: Arc<Context>,
    /// Read: every tunnel's routes and protections, published by the route reconciler.
    pub routes: RouteReader,
    /// Written: the protections each tunnel applied (`AccessShared::applied`), which the Access
    /// reconciler waits for.
    pub access: Arc<AccessShared>,
    /// Read: other clusters' hostnames on each tunnel (the DNS task's findings, published by
    /// the route reconciler), for the `SharedTunnel` condition.
    pub shared_tunnels: Arc<SharedTunnels>,
    /// Read: the open request of each tunnel object, route changes among them (written by the
    /// route reconciler); met and forgotten here.
    pub asks: Arc<Asks>,
    /// Shared with the DNS task: the zone locks, retired tunnel ids and each tunnel's other
    /// zones, which a deletion cleans.
    pub dns: DnsWriters,
    /// Every tunnel object, for the one-object-per-tunnel-id rule (set when the controllers
    /// start; unset, nothing is checked).
    pub claims: OnceLock<Claims>,
    /// Reconciles talking to the API server at once (see [`API_SLOTS`]), served by lane.
    pub api_slots: Slots,
    /// Consecutive failures per object, for exponential backoff (no hot loop).
    failures: Backoff,
    /// When each object's next drift check is due, by uid (in memory: a restart only delays it).
    drift_due: Mutex<DriftSchedule>,
}

/// The term's context is what most of a reconcile reads; the controllers' own fields are
/// named where they are used.
impl Deref for TunnelContext {
    type Target = Context;

    fn deref(&self) -> &Context {
        &self.ctx
    }
}

impl TunnelContext {
    pub fn new(
        ctx: Arc<Context>,
        routes: RouteReader,
        access: Arc<AccessShared>,
        shared_tunnels: Arc<SharedTunnels>,
        asks: Arc<Asks>,
        dns: DnsWriters,
    ) -> TunnelContext {
        TunnelContext {
            failures: Backoff::new(&ctx.options),
            ctx,
            routes,
            access,
            shared_tunnels,
            asks,
            dns,
            claims: OnceLock::new(),
            api_slots: Slots::new(API_SLOTS),
            drift_due: Mutex::new(DriftSchedule::default()),
        }
    }

    /// Records one more failure of `key` and returns the delay before the next attempt.
    pub(crate) fn next_backoff(&self, key: &str) -> Duration {
        self.failures.next(key)
    }

    /// Is `key` failing already, i.e. is a new failure part of a streak that was announced?
    pub(crate) fn in_failure_streak(&self, key: &str) -> bool {
        self.failures.in_streak(key)
    }

    /// Forgets the failures of `key` after a success.
    pub(crate) fn reset_backoff(&self, key: &str) {
        self.failures.reset(key);
    }

    /// The drift schedule of `uid` (scheduled one jittered interval from now on first sight);
    /// `true` when it was first seen now.
    fn drift_at(&self, uid: &str) -> (Instant, bool) {
        let next = Instant::now() + self.options.jittered_drift_interval();
        let mut due = self.drift_due.lock().unwrap_or_else(|p| p.into_inner());
        due.get_or_schedule(uid, next)
    }

    /// Is a drift check of `uid` due now? The first sight only schedules one.
    pub(crate) fn drift_due(&self, uid: &str) -> bool {
        if self.options.drift_interval.is_zero() {
            return false;
        }
        let (at, first) = self.drift_at(uid);
        !first && at <= Instant::now()
    }

    /// Schedules the next drift check of `uid` one jittered interval from now.
    pub(crate) fn drift_checked(&self, uid: &str) {
        let next = Instant::now() + self.options.jittered_drift_interval();
        let mut due = self.drift_due.lock().unwrap_or_else(|p| p.into_inner());
        due.set(uid, next);
    }

    /// Puts off a due drift check of `uid` that would have waited behind changes at the pacer:
    /// it comes due again after a twentieth of the interval (1 to 30 s, jittered).
    pub(crate) fn drift_put_off(&self, uid: &str) {
        let delay = (self.options.jittered_drift_interval() / 20)
            .clamp(Duration::from_secs(1), Duration::from_secs(30));
        let mut due = self.drift_due.lock().unwrap_or_else(|p| p.into_inner());
        due.set(uid, Instant::now() + delay);
    }

    /// Time until the next drift check of `uid` (`None`: drift checks are off).
    pub(crate) fn drift_requeue(&self, uid: &str) -> Option<Duration> {
        if self.options.drift_interval.is_zero() {
            return None;
        }
        let (at, _) = self.drift_at(uid);
        let wait = at.saturating_duration_since(Instant::now());
        Some(wait.max(Duration::from_millis(100)))
    }

    /// Forgets `uid` once its object is gone.
    pub(crate) fn forget_drift(&self, uid: &str) {
        let mut due = self.drift_due.lock().unwrap_or_else(|p| p.into_inner());
        due.forget(uid);
    }

    /// Keeps the failure counts, drift schedules and asks of live objects only: `keys` are
    /// their `Kind namespace/name`, `uids` their uids.
    pub(crate) fn forget_all_but(&self, keys: &HashSet<String>, uids: &HashSet<String>) {
        self.failures.retain(|key| keys.contains(key));
        let mut due = self.drift_due.lock().unwrap_or_else(|p| p.into_inner());
        due.retain(|uid| uids.contains(uid));
        drop(due);
        self.asks
            .retain(|uid| uids.contains(uid), |tunnel| keys.contains(tunnel));
    }

    /// How many objects have a failure count and a drift schedule in memory.
    pub fn remembered(&self) -> (usize, usize) {
        let due = self
            .drift_due
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .len();
        (self.failures.len(), due)
    }
}
