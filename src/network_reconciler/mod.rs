//! The network reconciler (docs/design.md §3.11): private routes through tunnels. For each
//! account, the IP routes and hostname routes its NetworkRoutes ask for (`cftunnel_policy::
//! private`), made, changed and deleted through the credential's pacer, each marked in its
//! comment with this cluster's id and its owner; and the VirtualNetworks cftunnel makes or
//! adopts.
//!
//! One task per leadership term, all NetworkRoutes in one pass, read from the process's caches
//! (every replica watches both kinds for admission, `caches::network`): a pass runs when what it
//! reads changed (NetworkRoutes, VirtualNetworks, Services, tunnels, namespaces), at the drift
//! interval, and after a failure (with backoff). An account is listed (every route of the
//! account: two list calls and the default network) only when what its NetworkRoutes ask for
//! changed since its last sync, after a failure, or at the drift interval; so a restart lists
//! each account once and the steady state makes no call outside drift checks.
//!
//! Deletion: a NetworkRoute's routes are deleted before its finalizer goes; routes whose
//! tunnel is gone are deleted from the account they were placed in (remembered for the
//! term). A route whose comment does not carry this cluster's marker is never changed or
//! deleted: held by someone else, it is a `Conflict` in the status.
mod networks;
mod resolve;
mod status;
mod sync;

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::ResourceExt;

use cftunnel_types::network::NetworkRoute;

use crate::caches::ProcessCaches;
use crate::term::Context;
use crate::term::credentials::read_api_secret;
use cftunnel_cloudflare::Priority;
use cftunnel_policy::private::{OwnerDigest, desired_routes};
use resolve::{AccountKey, Group};
use status::Verdict;

/// Quiet time after a change before a pass: a burst is one pass.
const DEBOUNCE: Duration = Duration::from_millis(300);
/// How soon a pass that failed or waits for something is tried again.
const RETRY: Duration = Duration::from_secs(5);

/// What the reconciler remembers of one account between passes.
struct Synced {
    /// Digest of what its NetworkRoutes asked for at the last successful sync.
    input: u64,
    /// When it is listed again (drift check, or retry after a failure).
    due: Option<Instant>,
    outcome: sync::AccountOutcome,
}

/// Runs until its term ends.
pub async fn run(ctx: Arc<Context>, caches: ProcessCaches) {
    // The caches wait for NetworkRoutes and VirtualNetworks to be probed (and listed when
    // served); a kind not served is empty, and an empty kind asks nothing to be deleted.
    caches.synced().await;
    tracing::info!("network reconciler started");
    let mut changes = caches.subscribe();
    let mut synced: HashMap<AccountKey, Synced> = HashMap::new();
    let mut placed = resolve::Placed::default();
    loop {
        changes.borrow_and_update();
        let next = pass(&ctx, &caches, &mut synced, &mut placed).await;
        let sleep = tokio::time::sleep(next.unwrap_or(Duration::from_secs(3600)));
        tokio::select! {
            _ = changes.changed() => {}
            _ = sleep => {}
        }
        tokio::time::sleep(DEBOUNCE).await;
    }
}

/// One pass over every NetworkRoute and VirtualNetwork; returns when the next is due.
async fn pass(
    ctx: &Context,
    caches: &ProcessCaches,
    synced: &mut HashMap<AccountKey, Synced>,
    placed: &mut resolve::Placed,
) -> Option<Duration> {
    let routes = caches.private_networks.routes.all();
    let networks = caches.private_networks.networks.all();
    // Every watch event of the process wakes this task: with nothing private anywhere (no
    // NetworkRoute, VirtualNetwork, TCP or UDP route, nothing placed before) a pass has
    // nothing to do, so none is computed.
    let l4 = caches.gateway_api.l4_routes();
    let idle = routes.is_empty()
        && networks.is_empty()
        && l4.tcp.is_empty()
        && l4.udp.is_empty()
        && placed.owners.is_empty()
        && synced.is_empty();
    if idle {
        return None;
    }
    let mut waiting = networks::reconcile(ctx, &networks, &routes).await;
    // The finalizer goes on before any route of a NetworkRoute is made; the status is then
    // written over the object as the patch left it.
    let mut current: HashMap<(String, String), NetworkRoute> = HashMap::new();
    for route in routes
        .iter()
        .filter(|r| r.metadata.deletion_timestamp.is_none())
    {
        match status::add_finalizer(ctx, route).await {
            Some(updated) => {
                let key = (route.namespace().unwrap_or_default(), route.name_any());
                current.insert(key, updated);
            }
            None => waiting = true,
        }
    }
    let resolved = resolve::resolve(
        caches,
        &routes,
        &networks,
        &ctx.options.cluster_resource_namespace,
        placed,
    );
    let now = Instant::now();
    let mut outcomes: BTreeMap<OwnerDigest, &sync::AccountOutcome> = BTreeMap::new();
    let mut next: Option<Instant> = None;
    // Accounts of an earlier pass that no NetworkRoute asks anything of now: synced once more
    // so their routes go (only remembered owners' routes are ever deleted).
    for (key, group) in &resolved.groups {
        let desired =
            desired_routes(&ctx.cluster, &group.sources).with_departed(group.departed.iter());
        let input = digest(&desired);
        let memory = synced.get(key);
        let due = match memory {
            None => true,
            Some(m) => m.input != input || m.due.is_some_and(|d| d <= now),
        };
        if due {
            let outcome = match sync_account(ctx, key, group, &desired).await {
                Ok(outcome) => outcome,
                Err((message, unreachable)) => sync::AccountOutcome {
                    failure: Some(message),
                    unreachable,
                    ..sync::AccountOutcome::default()
                },
            };
            if let Some(warning) = &outcome.over_limit {
                tracing::warn!(account = %key.account, "{warning}");
            }
            let retry = outcome.failure.is_some()
                || outcome
                    .entries
                    .values()
                    .flat_map(|e| e.values())
                    .any(|o| o.state == "Pending" || o.state == "Error");
            let due = match retry {
                true => Some(Instant::now() + RETRY),
                false => (!ctx.options.drift_interval.is_zero())
                    .then(|| Instant::now() + ctx.options.jittered_drift_interval()),
            };
            synced.insert(
                key.clone(),
                Synced {
                    input,
                    due,
                    outcome,
                },
            );
        }
    }
    placed.remember(&resolved);
    // A Gateway whose routes are all gone is forgotten (its object has no finalizer to wait on).
    placed.owners.retain(|digest, (key, owner)| {
        owner.kind != cftunnel_policy::private::OwnerKind::Gateway
            || resolved
                .groups
                .get(key)
                .is_some_and(|g| g.sources.iter().any(|s| s.owner().digest() == *digest))
            || !synced
                .get(key)
                .is_some_and(|m| m.outcome.failure.is_none() && m.outcome.cleared.contains(digest))
    });
    synced.retain(|key, _| resolved.groups.contains_key(key));
    for (key, memory) in synced.iter() {
        if let Some(due) = memory.due {
            next = Some(next.map_or(due, |n| n.min(due)));
        }
        let _ = key;
        for (owner, _) in memory.outcome.entries.iter() {
            outcomes.insert(owner.clone(), &memory.outcome);
        }
    }
    // Statuses, and the finalizers of deleted NetworkRoutes whose routes are gone.
    for route in &routes {
        let owner = status::owner(route);
        let digest = owner.digest();
        if route.metadata.deletion_timestamp.is_some() {
            let account = placed.owners.get(&digest).map(|(k, _)| k.clone());
            let memory = account.as_ref().and_then(|k| synced.get(k));
            let key = (route.namespace().unwrap_or_default(), route.name_any());
            let tunnel_gone = resolved
                .refused
                .get(&key)
                .is_some_and(|(reason, _)| *reason == resolve::REASON_TUNNEL_NOT_FOUND);
            let cleared = match memory {
                Some(memory) => {
                    memory.outcome.failure.is_none() && memory.outcome.cleared.contains(&digest)
                }
                // Never placed in this term's memory: nothing of it is known to clean.
                None => account.is_none(),
            };
            // Its tunnel and its account's credentials are gone (a namespace deleted whole):
            // nothing can reach its routes any more. A tunnel deleted at Cloudflare took them
            // (deleted with cascade); an existing one may keep them: say so, and let it go.
            let abandoned =
                !cleared && tunnel_gone && memory.is_some_and(|m| m.outcome.unreachable);
            if abandoned {
                status::cleanup_incomplete(
                    ctx,
                    route,
                    memory.and_then(|m| m.outcome.failure.as_deref()),
                )
                .await;
            }
            let cleared = cleared || abandoned;
            if cleared && status::remove_finalizer(ctx, route).await {
                placed.owners.remove(&digest);
            } else if !cleared {
                waiting = true;
            }
            continue;
        }
        let key = (route.namespace().unwrap_or_default(), route.name_any());
        let verdict = match resolved.refused.get(&key) {
            Some((reason, message)) => Verdict::Refused(reason, message),
            None => Verdict::Accepted(outcomes.get(&digest).and_then(|o| o.entries.get(&digest))),
        };
        let route = current.get(&key).unwrap_or(route);
        if !status::write(ctx, route, status::status_of(route, &verdict)).await {
            waiting = true;
        }
    }
    if waiting {
        let retry = Instant::now() + RETRY;
        next = Some(next.map_or(retry, |n| n.min(retry)));
    }
    next.map(|n| n.saturating_duration_since(Instant::now()))
}

/// Lists the account and carries out its plan.
async fn sync_account(
    ctx: &Context,
    key: &AccountKey,
    group: &Group,
    desired: &cftunnel_policy::private::DesiredRoutes,
) -> Result<sync::AccountOutcome, (String, bool)> {
    let secret = read_api_secret(&ctx.client, &group.secret_namespace, &group.details)
        .await
        .map_err(|e| (e.to_string(), true))?;
    let cf = ctx
        .cloudflare
        .client_at(secret.credentials, Priority::Normal)
        .map_err(|e| (e.to_string(), true))?;
    let listed = sync::list(&cf, &key.account)
        .await
        .map_err(|e| (e.to_string(), false))?;
    Ok(sync::sync(&cf, &key.account, &ctx.cluster, desired, &listed).await)
}

fn digest(desired: &cftunnel_policy::private::DesiredRoutes) -> u64 {
    let mut hasher = DefaultHasher::new();
    format!("{desired:?}").hash(&mut hasher);
    hasher.finish()
}
