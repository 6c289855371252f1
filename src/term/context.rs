//! What every reconcile shares: the Kubernetes client, the event recorder, the Cloudflare rate
//! limiters (the process's, so every credential has exactly one bucket and a 429 pause outlives
//! a re-election) and the options.
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::Client;
use kube::runtime::events::Reporter;

use super::recorder::Recorder;

use super::cloudflare::Cloudflare;
use super::memory::{DriftSchedule, Failures};
pub use super::options::{
    ControllerOptions, DEFAULT_CLOUDFLARED_IMAGE, DEFAULT_CLUSTER_RESOURCE_NAMESPACE,
};
use crate::caches::WatchScope;
use crate::metrics::Metrics;
use crate::scope::Scope;
use cftunnel_cloudflare::RateLimiters;
use cftunnel_policy::dns::{ClusterId, DnsOptions};

/// Tunnel reconciles that talk to the API server at once. The controllers run every due
/// reconcile at once, so that each waits for Cloudflare at its credential's pacer, where
/// priorities order them (a deletion or a new tunnel does not queue behind a first sync of a
/// thousand). The parts before and after Cloudflare (reading Secrets; rendering and applying,
/// which hold rendered objects and API answers and make a process's peak memory) each take
/// one of these slots, so a thousand reconciles never open a thousand API requests at once.
pub(crate) const API_SLOTS: usize = 8;

/// Shared state of both controllers.
pub struct Context {
    pub client: Client,
    pub recorder: Recorder,
    pub options: ControllerOptions,
    pub scope: WatchScope,
    /// The leadership term (or standalone run) this context belongs to: everything the
    /// reconcilers spawn runs in it, and every Cloudflare write checks its permit.
    pub term: Scope,
    /// The process's metrics; reconciles, DNS writes and Cloudflare calls record here.
    pub metrics: Arc<Metrics>,
    /// This cluster's identity in the DNS ownership marker and TXT.
    pub cluster: ClusterId,
    /// Builds the term's Cloudflare clients; keeps what the term learned from Cloudflare.
    pub cloudflare: Cloudflare,
    /// Every tunnel's routes, published by the route reconciler.
    pub routes: std::sync::Arc<cftunnel_policy::published::RouteIndex>,
    /// Other clusters' hostnames on each tunnel, published by the route reconciler from the
    /// DNS task's findings.
    pub shared_tunnels: super::shared::SharedTunnels,
    /// The Access guard and the protections each tunnel applied (`term/access.rs`).
    pub access: super::access::AccessShared,
    /// Zones other than its own that a tunnel's records were placed in (by tunnel id), so its
    /// deletion removes them there too.
    pub dns_zones: super::dns_guard::TunnelZones,
    /// One DNS sync per zone at a time (route reconciler and deletions).
    pub dns_guard: super::dns_guard::DnsGuard,
    /// Every tunnel object, for the one-object-per-tunnel-id rule (set when the controllers
    /// start; unset, nothing is checked).
    pub claims: std::sync::OnceLock<super::claims::Claims>,
    /// Reconciles talking to the API server at once (see [`API_SLOTS`]), served by lane.
    pub api_slots: super::slots::Slots,
    /// The open request of each tunnel object: the lane and date of its reconciles.
    pub asks: super::asks::Asks,
    /// Consecutive failures per object, for exponential backoff (no hot loop).
    failures: Mutex<Failures>,
    /// When each object's next drift check is due, by uid (in memory: a restart only delays it).
    drift_due: Mutex<DriftSchedule>,
}

impl Context {
    pub fn new(
        client: Client,
        options: ControllerOptions,
        scope: WatchScope,
        term: Scope,
        metrics: Arc<Metrics>,
        limiters: RateLimiters,
        cluster: ClusterId,
    ) -> Context {
        let reporter = Reporter {
            controller: "cftunnel".to_string(),
            instance: std::env::var("POD_NAME").ok(),
        };
        Context {
            recorder: Recorder::new(client.clone(), reporter),
            cloudflare: Cloudflare::new(limiters, &options, term.write_gate(), metrics.clone()),
            client,
            options,
            scope,
            term,
            metrics,
            cluster,
            routes: Default::default(),
            shared_tunnels: Default::default(),
            access: Default::default(),
            dns_zones: Default::default(),
            dns_guard: Default::default(),
            claims: Default::default(),
            api_slots: super::slots::Slots::new(API_SLOTS),
            asks: Default::default(),
            failures: Mutex::new(Failures::default()),
            drift_due: Mutex::new(DriftSchedule::default()),
        }
    }

    /// The DNS options of every sync of this term, the DNS task's and the deletions' alike.
    pub fn dns_options(&self) -> DnsOptions {
        DnsOptions {
            overwrite_unmanaged: self.options.overwrite_unmanaged_dns,
            cluster_id: Some(self.cluster.clone()),
            batch: self.options.dns_batch,
            batch_memory: self.cloudflare.batch_memory(),
            quota_memory: self.cloudflare.quota_memory(),
            ..DnsOptions::default()
        }
    }

    /// Records one more failure of `key` and returns the delay before the next attempt.
    pub(crate) fn next_backoff(&self, key: &str) -> Duration {
        let mut failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        let count = failures.bump(key);
        let factor = 2u32.saturating_pow(count.saturating_sub(1).min(16));
        self.options
            .retry_base
            .saturating_mul(factor)
            .min(self.options.retry_max)
    }

    /// Is `key` failing already, i.e. is a new failure part of a streak that was announced?
    pub(crate) fn in_failure_streak(&self, key: &str) -> bool {
        let failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        failures.count(key) > 0
    }

    /// Forgets the failures of `key` after a success.
    pub(crate) fn reset_backoff(&self, key: &str) {
        let mut failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        failures.reset(key);
    }

    /// The drift schedule of `uid` (scheduled one jittered interval from now on first sight);
    /// `true` when it was first seen now.
    fn drift_at(&self, uid: &str) -> (Instant, bool) {
        let next = Instant::now() + self.jittered_drift_interval();
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
        let next = Instant::now() + self.jittered_drift_interval();
        let mut due = self.drift_due.lock().unwrap_or_else(|p| p.into_inner());
        due.set(uid, next);
    }

    /// Puts off a due drift check of `uid` that would have waited behind changes at the pacer:
    /// it comes due again after a twentieth of the interval (1 to 30 s, jittered).
    pub(crate) fn drift_put_off(&self, uid: &str) {
        let delay = (self.jittered_drift_interval() / 20)
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

    /// Keeps the failure counts and drift schedules of live objects only: `keys` are their
    /// `Kind namespace/name`, `uids` their uids.
    pub(crate) fn forget_all_but(&self, keys: &HashSet<String>, uids: &HashSet<String>) {
        let mut failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        failures.retain(|key| keys.contains(key));
        drop(failures);
        let mut due = self.drift_due.lock().unwrap_or_else(|p| p.into_inner());
        due.retain(|uid| uids.contains(uid));
        drop(due);
        self.asks
            .retain(|uid| uids.contains(uid), |tunnel| keys.contains(tunnel));
    }

    /// How many objects have a failure count and a drift schedule in memory.
    pub fn remembered(&self) -> (usize, usize) {
        let failures = self
            .failures
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .len();
        let due = self
            .drift_due
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .len();
        (failures, due)
    }

    /// The drift interval ±10 %, so many tunnels do not check in lockstep.
    pub(crate) fn jittered_drift_interval(&self) -> Duration {
        use rand::Rng;
        let factor = rand::rng().random_range(0.9..=1.1);
        self.options.drift_interval.mul_f64(factor)
    }
}
