//! The route reconciler (docs/design.md §3.2, §3.3): watches tunnels, TunnelBindings, Services,
//! namespace labels, Ingresses and the Gateway API kinds ([`crate::world`]); computes every
//! tunnel's routes ([`cftunnel_policy::routes`]) and hands them on, never waiting for any of
//! their consumers:
//! - to the tunnel reconciler (the single writer of config.yaml) through the term's
//!   `RouteIndex` ([`RoutePublisher`]), triggering only the tunnels whose routes changed;
//! - with each table the Access guard (`cftunnel_policy::access`): which hostnames
//!   AccessPolicies protect, which tunnels must re-render for it, and which hostnames DNS must
//!   not publish yet;
//! - to the DNS task ([`crate::dns_sync`]), whose findings come back as a `DnsView`;
//! - to the status writer ([`crate::status_writer`]), which writes every source's status from
//!   the newest table and DNS view.
//!
//! A burst of edits is debounced into one computation (and so one render, one rollout per
//! tunnel). A DNS finding recomputes nothing here: it goes to the status writer, and only the
//! tunnels whose shared hostnames changed are re-run. A tunnel's own DNS records are removed by
//! its deletion, before the tunnel itself.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::watch;

use crate::caches::ProcessCaches;
use crate::dns_sync::task::DnsInput;
use crate::dns_sync::{DnsView, TunnelRecord};
use crate::status_writer::StatusPlan;
use crate::term::Context;
use crate::term::access::AccessShared;
use crate::term::asks::Asks;
use crate::term::route_index::RoutePublisher;
use crate::term::shared::SharedTunnels;
use crate::world::RouteCache;
use cftunnel_policy::routes::{RouteTable, changed_tunnels, compute_routes};
use cftunnel_types::TunnelIdentity;

/// Quiet time after a change before routes are recomputed: a burst becomes one render.
pub(crate) const DEBOUNCE: Duration = Duration::from_millis(500);

/// The longest pause after an iteration ([`pause_after`]): how long a route edit may wait
/// behind a first sync of tens of thousands of routes.
const MAX_PAUSE: Duration = Duration::from_secs(20);

/// The wait after a change: [`DEBOUNCE`], or as long as the last iteration took when that was
/// longer, up to [`MAX_PAUSE`]. During a first sync of tens of thousands of routes every status
/// the status writer writes comes back as a change; without the pause the reconciler would
/// build a whole new table every iteration, and the garbage of those tables, not the tables
/// themselves, set the process's peak memory. A new or deleted tunnel ends the pause
/// ([`tunnels_differ`]).
fn pause_after(iteration: Duration) -> Duration {
    iteration.clamp(DEBOUNCE, MAX_PAUSE)
}

/// Waits out the pause after a change: at least [`DEBOUNCE`], then until `pause` has passed or
/// the tunnels differ from those `table` knows.
async fn wait_out(cache: &mut RouteCache, table: &RouteTable, pause: Duration) {
    let deadline = tokio::time::Instant::now() + pause;
    tokio::time::sleep(DEBOUNCE).await;
    while !tunnels_differ(&cache.live_tunnels(), table) {
        tokio::select! {
            _ = tokio::time::sleep_until(deadline) => return,
            _ = cache.changed() => {}
        }
    }
}

/// What the route reconciler writes for other components: made once per term in `wiring.rs`,
/// each read by the components named.
pub struct Outputs {
    /// The tunnels whose routes, protections or other clusters' hostnames changed: the tunnel
    /// reconciler re-runs each.
    pub triggers: UnboundedSender<TunnelIdentity>,
    /// Each table with its Access guard; read by the tunnel reconciler (each tunnel's routes
    /// and protections) and the Access reconciler.
    pub routes: RoutePublisher,
    /// The Access guard, published with each table; read by the Access reconciler, to which
    /// the tunnel reconciler reports what each tunnel applied.
    pub access: Arc<AccessShared>,
    /// Other clusters' hostnames on each tunnel, from the DNS task's findings; read by the
    /// tunnel reconciler for the `SharedTunnel` condition.
    pub shared_tunnels: Arc<SharedTunnels>,
    /// Route changes after the term's first table, as a user's asks; the tunnel reconciler
    /// serves them in their lane (docs/design.md §3.8).
    pub asks: Arc<Asks>,
    /// Each table's hostnames with the tunnel records and the hostnames held closed; read by
    /// the DNS task.
    pub(crate) dns: watch::Sender<Option<Arc<DnsInput>>>,
    /// Each table with the tunnel records it was computed with; read by the status writer.
    pub statuses: watch::Sender<Option<Arc<StatusPlan>>>,
}

/// Runs until its term ends. What it computes goes out through `outputs`; `dns_view` (the DNS
/// task's findings) is read only for the tunnels whose other clusters' hostnames moved.
///
/// DNS runs in its own task: a first sync of many hostnames is paced by the Cloudflare rate
/// limit (minutes for a thousand), and route changes must reach config.yaml meanwhile. Statuses
/// are written by theirs: thousands of writes in a first sync must not hold back a table.
pub async fn run(
    ctx: Arc<Context>,
    caches: ProcessCaches,
    mut dns_view: watch::Receiver<Arc<DnsView>>,
    outputs: Outputs,
) {
    let Outputs {
        triggers,
        routes,
        access,
        shared_tunnels,
        asks,
        dns: input_tx,
        statuses: plan_tx,
    } = outputs;
    let mut cache = RouteCache::new(&caches, &ctx.options.cluster_resource_namespace);
    caches.synced().await;
    tracing::info!("route caches synced");
    let mut known: Option<Known> = None;
    let route_gauge = ctx.metrics.track_routes();
    let view = dns_view.clone();
    let _dns_problems = ctx.metrics.track_counts(
        crate::metrics::Counted::DnsProblems,
        Box::new(move || view.borrow().problem_counts()),
    );
    // The table last computed, with the digest of what it was computed from.
    let mut computed: Option<(u64, Arc<RouteTable>)> = None;
    loop {
        let started = Instant::now();
        cache.mark_seen();
        let inputs = cache.route_inputs();
        let reused = computed
            .as_ref()
            .is_some_and(|(digest, _)| *digest == inputs);
        let table = match &computed {
            // Nothing routes read changed (a status written, a tunnel's id recorded): the
            // guard, DNS and statuses below still take the newest policies and tunnels.
            Some((_, table)) if reused => table.clone(),
            _ => {
                let table = compute(&cache, &routes);
                ctx.metrics.route_computed();
                route_gauge.set(routes_by_reason(&table));
                computed = Some((inputs, table.clone()));
                table
            }
        };
        // The guard is published with its table: a tunnel renders its routes and their
        // protections from one table (docs/design.md §3.7).
        let mut guard = cftunnel_policy::access::guard(&caches.access_policies.all(), &table);
        // Policies that cannot be known open nothing new (caches/access.rs); the last table
        // and guard computed while they could be are what was open.
        let guard = match caches.access_policies.unknown() {
            Some(why) => {
                let before = known.as_ref().map(|(t, g): &Known| (&**t, &**g));
                guard.close_unknown(&table, before, &why);
                Arc::new(guard)
            }
            None => {
                let guard = Arc::new(guard);
                known = Some((table.clone(), guard.clone()));
                guard
            }
        };
        let held = Arc::new(guard.held());
        let protections_changed = access.publish(guard.clone());
        let previous = routes.publish(table.clone(), guard);
        // A tunnel new since the last table: its routes (a binding applied with it) usually
        // arrive a moment after it, so the next table comes soon (docs/design.md §3.8).
        let grew = previous
            .as_ref()
            .is_some_and(|p| table.tunnels.keys().any(|t| !p.tunnels.contains_key(t)));
        for tunnel in changed_tunnels(previous.as_deref(), &table) {
            // A change after the term's first table is a user's (docs/design.md §3.8).
            if previous.is_some() {
                asks.routes_changed(tunnel.to_string());
            }
            let _ = triggers.send(tunnel);
        }
        drop(previous);
        for tunnel in protections_changed {
            let _ = triggers.send(tunnel);
        }
        let records: Arc<[TunnelRecord]> = cache.tunnel_records().into();
        let dns_table = table.dns_only(input_tx.borrow().as_ref().map(|input| &*input.table));
        input_tx.send_replace(Some(Arc::new(DnsInput {
            table: Arc::new(dns_table),
            records: records.clone(),
            held,
        })));
        plan_tx.send_replace(Some(Arc::new(StatusPlan {
            table: table.clone(),
            records,
        })));
        let took = started.elapsed();
        tracing::debug!(
            took_ms = took.as_millis() as u64,
            computed = !reused,
            "route iteration"
        );
        let pause = match grew {
            true => DEBOUNCE,
            false => pause_after(took),
        };
        loop {
            tokio::select! {
                _ = cache.changed() => {
                    wait_out(&mut cache, &table, pause).await;
                    break;
                }
                changed = dns_view.changed() => {
                    if changed.is_err() {
                        std::future::pending::<()>().await;
                    }
                    // The tunnel reconciler writes the SharedTunnel condition: re-run those
                    // whose other clusters' hostnames changed. Nothing else here reads DNS.
                    let view = dns_view.borrow_and_update().clone();
                    for tunnel in shared_tunnels.replace(view.shared()) {
                        let _ = triggers.send(tunnel);
                    }
                }
            }
        }
    }
}

/// Computes the routes of the world `cache` reads; routes unchanged since the published table
/// share its entries.
fn compute(cache: &RouteCache, routes: &RoutePublisher) -> Arc<RouteTable> {
    let world = cache.world();
    let mut table = compute_routes(&world);
    drop(world);
    if let Some(published) = routes.current() {
        table.share_unchanged(&published);
    }
    Arc::new(table)
}

/// The last table and guard computed while every AccessPolicy was known.
type Known = (Arc<RouteTable>, Arc<cftunnel_policy::access::AccessGuard>);

/// Whether `live` (the tunnels not being deleted) differ from the tunnels `table` was computed
/// for: one created, or one deleted or being deleted, since. A pause must not hold those back: a
/// new tunnel's reconcile waits for a table that knows it, and a deleted tunnel's DNS records
/// are removed before it.
fn tunnels_differ(live: &[TunnelIdentity], table: &RouteTable) -> bool {
    live.len() != table.tunnels.len() || live.iter().any(|id| !table.tunnels.contains_key(id))
}

/// The routes of `table` by reason, for the route gauge.
fn routes_by_reason(table: &RouteTable) -> BTreeMap<&'static str, u64> {
    let mut counts: BTreeMap<&'static str, u64> = BTreeMap::new();
    for source in table.sources.values() {
        for route in &source.routes {
            *counts.entry(route.reason.as_str()).or_default() += 1;
        }
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_iteration_pauses_as_long_as_it_took_up_to_the_cap() {
        assert_eq!(pause_after(Duration::from_millis(20)), DEBOUNCE);
        assert_eq!(pause_after(Duration::from_secs(2)), Duration::from_secs(2));
        assert_eq!(pause_after(Duration::from_secs(90)), MAX_PAUSE);
    }

    fn id(name: &str) -> TunnelIdentity {
        TunnelIdentity {
            kind: cftunnel_types::TunnelKind::Tunnel,
            namespace: "ns".into(),
            name: name.into(),
        }
    }

    #[test]
    fn a_tunnel_created_or_deleted_since_the_table_ends_the_pause() {
        let mut table = RouteTable::default();
        table.tunnels.insert(id("a"), Default::default());
        table.tunnels.insert(id("b"), Default::default());
        assert!(!tunnels_differ(&[id("b"), id("a")], &table));
        // Created: one more than the table knows.
        assert!(tunnels_differ(&[id("a"), id("b"), id("c")], &table));
        // Deleted (or being deleted): one fewer.
        assert!(tunnels_differ(&[id("a")], &table));
        // As many, but not the same ones.
        assert!(tunnels_differ(&[id("a"), id("c")], &table));
    }
}
