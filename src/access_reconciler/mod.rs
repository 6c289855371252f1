//! The Access reconciler (docs/design.md §3.7): for each AccessPolicy, the Cloudflare Access
//! applications of the hostnames it protects, its reusable policies, its status and its
//! finalizer. It never renders anything: the route reconciler publishes which hostnames are
//! protected (`term::access`), the tunnel reconciler renders them closed or checked, and this
//! reconciler waits for what the tunnels applied before each step that could open a route:
//! - an application is made only once every tunnel serving its hostname applied it closed;
//! - the status records the application (AUD, team) only after it exists, and that record is
//!   what opens the hostname (with cloudflared checking the AUD);
//! - an application is deleted only once no tunnel's applied rules check its AUD (after a
//!   policy's deletion or a target's, its routes render public first).
//!
//! One task, policies in turn: a policy is reconciled when what it reads changed (its spec,
//! the hostnames it protects, what their tunnels applied), when a step waits, after a failure
//! (with backoff) and at the drift interval. Access calls go through the credential's pacer.
mod account;
mod context;
mod deletion;
mod events;
mod reconcile;
mod status;

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::caches::ProcessCaches;
use crate::dns_sync::TunnelRecord;
use crate::term::Context;
use crate::term::access::AccessShared;
use crate::term::route_index::RouteReader;
use crate::world::RouteCache;
use cftunnel_policy::access::{AccessGuard, PolicyKey};
use cftunnel_types::TunnelIdentity;
use cftunnel_types::access_policy::AccessPolicy;
use context::AccessContext;

/// How soon a step that waits for a tunnel's render is looked at again.
pub(crate) const STEP_WAIT: Duration = Duration::from_secs(2);
/// Quiet time after a change before policies are looked at: a burst is one pass.
const DEBOUNCE: Duration = Duration::from_millis(300);

/// Why a reconcile of a policy stopped short.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AccessError {
    #[error(transparent)]
    Reconcile(#[from] crate::term::ReconcileError),
    /// A deleted policy's applications or policies could not be deleted yet.
    #[error("{0}")]
    Cleanup(String),
}

/// What a reconcile asks for next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Next {
    /// Look again after this long, whatever changes.
    After(Duration),
    /// Done; the drift interval (or a change) brings it back.
    Settled,
}

/// `cftunnel_access_applications` and `cftunnel_access_targets`, read from the policies'
/// statuses at scrape time for as long as the term runs.
fn track_gauges(ctx: &AccessContext, caches: &ProcessCaches) -> [crate::metrics::TrackedCounts; 2] {
    use crate::metrics::Counted;
    let policies = caches.access_policies.clone();
    let applications = ctx.metrics.track_counts(
        Counted::AccessApplications,
        Box::new(move || application_counts(&policies.all())),
    );
    let policies = caches.access_policies.clone();
    let targets = ctx.metrics.track_counts(
        Counted::AccessTargets,
        Box::new(move || target_counts(&policies.all())),
    );
    [applications, targets]
}

/// Applications by state: `protecting` (recorded for a target's hostname) or `retiring`.
fn application_counts(policies: &[Arc<AccessPolicy>]) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for status in policies.iter().filter_map(|p| p.status.as_ref()) {
        let protecting = status.targets.iter().flatten().map(|t| t.hostnames.len());
        let retiring = status.retiring.as_ref().map_or(0, Vec::len);
        for (state, n) in [("protecting", protecting.sum()), ("retiring", retiring)] {
            if n > 0 {
                *counts.entry(state.to_string()).or_default() += n as u64;
            }
        }
    }
    counts
}

/// Targets by their reason; a target with none is fully protected, counted as `Ready`.
fn target_counts(policies: &[Arc<AccessPolicy>]) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for status in policies.iter().filter_map(|p| p.status.as_ref()) {
        for target in status.targets.iter().flatten() {
            let reason = target.reason.as_deref().unwrap_or("Ready");
            *counts.entry(reason.to_string()).or_default() += 1;
        }
    }
    counts
}

/// What a pass reads besides the policy.
pub(crate) struct World<'a> {
    pub guard: &'a AccessGuard,
    pub records: &'a [TunnelRecord],
    /// Tunnels not being deleted.
    pub live: &'a BTreeSet<TunnelIdentity>,
}

struct Remembered {
    input: u64,
    due: Option<Instant>,
}

/// Runs until its term ends. `routes` is read for whether a first table is published;
/// `access` for the Access guard and what each tunnel applied, whose changes wake it; each
/// policy's status goes to the status writer through `statuses`.
pub async fn run(
    ctx: Arc<Context>,
    caches: ProcessCaches,
    routes: RouteReader,
    access: Arc<AccessShared>,
    statuses: crate::status_writer::AccessStatuses,
) {
    let ctx = AccessContext::new(ctx, routes, access, statuses);
    let cache = RouteCache::new(&caches, &ctx.options.cluster_resource_namespace);
    let _gauges = track_gauges(&ctx, &caches);
    caches.synced().await;
    let mut changes = caches.subscribe();
    let mut access = ctx.access.subscribe();
    let mut memory: HashMap<PolicyKey, Remembered> = HashMap::new();
    let mut orgs = account::Organizations::default();
    loop {
        changes.borrow_and_update();
        access.borrow_and_update();
        // Every watch event wakes this loop: with no policy there is nothing to read.
        let policies = caches.access_policies.all();
        if ctx.routes.current().is_some() && !(policies.is_empty() && memory.is_empty()) {
            let guard = ctx.access.guard();
            let records = cache.tunnel_records();
            let live: BTreeSet<TunnelIdentity> = records
                .iter()
                .filter(|r| !r.deleting)
                .map(|r| r.identity.clone())
                .collect();
            let now = Instant::now();
            for policy in &policies {
                let key = PolicyKey::of(policy);
                let input = fingerprint(policy, &guard, &ctx, &live);
                let due = match memory.get(&key) {
                    None => true,
                    Some(seen) => seen.input != input || seen.due.is_some_and(|d| d <= now),
                };
                if !due {
                    continue;
                }
                let world = World {
                    guard: &guard,
                    records: &records,
                    live: &live,
                };
                let mut after = (**policy).clone();
                let next = match reconcile::reconcile(&ctx, policy, &world, &mut orgs).await {
                    Ok((next, written)) => {
                        ctx.reset_backoff(&backoff_key(&key));
                        after.status = written.or(after.status);
                        next
                    }
                    Err(error) => {
                        let wait = ctx.next_backoff(&backoff_key(&key));
                        tracing::warn!(policy = %key, %error, retry_in = ?wait, "AccessPolicy not reconciled");
                        Next::After(wait)
                    }
                };
                let due = match next {
                    Next::After(wait) => Some(Instant::now() + wait),
                    Next::Settled => (!ctx.options.drift_interval.is_zero())
                        .then(|| Instant::now() + ctx.options.jittered_drift_interval()),
                };
                // The input as it is after the reconcile's own writes: they need no second pass.
                let input = fingerprint(&after, &ctx.access.guard(), &ctx, &live);
                memory.insert(key, Remembered { input, due });
            }
            let keys: BTreeSet<PolicyKey> = policies.iter().map(|p| PolicyKey::of(p)).collect();
            memory.retain(|k, _| keys.contains(k));
            let live: BTreeSet<String> = keys.iter().map(backoff_key).collect();
            ctx.retain_backoff(|k| live.contains(k.strip_suffix(" calls").unwrap_or(k)));
        }
        let next_due = memory.values().filter_map(|m| m.due).min();
        tokio::select! {
            changed = changes.changed() => {
                if changed.is_err() {
                    return;
                }
            }
            _ = access.changed() => {}
            _ = sleep_until(next_due) => {}
        }
        tokio::time::sleep(DEBOUNCE).await;
    }
}

fn backoff_key(key: &PolicyKey) -> String {
    format!("AccessPolicy {key}")
}

async fn sleep_until(due: Option<Instant>) {
    match due {
        Some(at) => tokio::time::sleep_until(tokio::time::Instant::from_std(at)).await,
        None => std::future::pending::<()>().await,
    }
}

/// What a reconcile of `policy` reads, hashed: its spec and deletion, the hostnames it
/// protects with their tunnels and whether each tunnel applied them protected, and for each
/// application its status records whether a tunnel still checks its AUD. Its status itself is
/// left out: the reconcile writes it, and the guard follows it.
fn fingerprint(
    policy: &AccessPolicy,
    guard: &AccessGuard,
    ctx: &AccessContext,
    live: &BTreeSet<TunnelIdentity>,
) -> u64 {
    let key = PolicyKey::of(policy);
    let mut hasher = DefaultHasher::new();
    policy.metadata.uid.hash(&mut hasher);
    policy.metadata.generation.hash(&mut hasher);
    policy
        .metadata
        .deletion_timestamp
        .is_some()
        .hash(&mut hasher);
    policy.metadata.finalizers.hash(&mut hasher);
    for (hostname, guarded) in guard.of_policy(&key) {
        hostname.hash(&mut hasher);
        guarded.target.hash(&mut hasher);
        for tunnel in &guarded.tunnels {
            tunnel.hash(&mut hasher);
            ctx.access
                .applied_protected(tunnel, hostname)
                .hash(&mut hasher);
            ctx.access.has_applied(tunnel).hash(&mut hasher);
        }
    }
    for refusal in guard.refused_of(&key) {
        refusal.message.hash(&mut hasher);
    }
    for recorded in status::recorded(policy) {
        recorded.aud.hash(&mut hasher);
        ctx.access.carries(&recorded.aud, live).hash(&mut hasher);
    }
    hasher.finish()
}

/// The tunnel record of `identity`.
pub(crate) fn record_of<'a>(
    records: &'a [TunnelRecord],
    identity: &TunnelIdentity,
) -> Option<&'a TunnelRecord> {
    records.iter().find(|r| &r.identity == identity)
}
