//! The route reconciler (docs/design.md §3.2, §3.3): watches tunnels, TunnelBindings, Services,
//! namespace labels, Ingresses and the Gateway API kinds; computes every tunnel's routes ([`cftunnel_policy::routes`]); hands them to the tunnel
//! reconciler (the single writer of config.yaml) through a shared [`RouteIndex`], triggering only
//! the tunnels whose routes changed; syncs DNS per zone ([`cftunnel_policy::dns`]); writes TunnelBinding
//! status and finalizers, and Events on labelled Services. With each table it publishes the
//! Access guard (`cftunnel_policy::access`): which hostnames AccessPolicies protect, which
//! tunnels must re-render for it, and which hostnames DNS must not publish yet.
//!
//! A burst of edits is debounced into one computation (and so one render, one rollout per
//! tunnel). A tunnel's own DNS records are removed by its deletion, before the tunnel itself.
mod gateway_status;
mod give_way;
mod ingress_status;
mod status;
mod world;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::watch;

pub use world::RouteCache;

use crate::caches::ProcessCaches;
use crate::dns_sync::DnsView;
use crate::dns_sync::task::{DnsInput, run_dns};
use crate::term::Context;
use cftunnel_policy::routes::{RouteTable, changed_tunnels, compute_routes};
use cftunnel_types::TunnelIdentity;

/// Quiet time after a change before routes are recomputed: a burst becomes one render.
pub(crate) const DEBOUNCE: Duration = Duration::from_millis(500);

/// The longest pause after an iteration ([`pause_after`]): how long a route edit may wait
/// behind a first sync of tens of thousands of routes.
const MAX_PAUSE: Duration = Duration::from_secs(20);

/// The wait after a change: [`DEBOUNCE`], or as long as the last iteration took when that was
/// longer, up to [`MAX_PAUSE`]. During a first sync of tens of thousands of routes every status
/// written comes back as a change; without the pause the reconciler would build a whole new
/// table every iteration, and the garbage of those tables, not the tables themselves, set the
/// process's peak memory. A new or deleted tunnel ends the pause ([`tunnels_differ`]).
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

/// Runs until its term ends (the DNS task is spawned in `ctx.term`). `triggers` receives the
/// tunnels whose routes changed.
///
/// DNS runs in its own task: a first sync of many hostnames is paced by the Cloudflare rate
/// limit (minutes for a thousand), and route changes must reach config.yaml meanwhile.
pub async fn run(
    ctx: Arc<Context>,
    caches: ProcessCaches,
    triggers: UnboundedSender<TunnelIdentity>,
) {
    let mut cache = RouteCache::new(&caches, &ctx.options.cluster_resource_namespace);
    caches.synced().await;
    tracing::info!("route caches synced");
    let (input_tx, input_rx) = watch::channel::<Option<Arc<DnsInput>>>(None);
    let (view_tx, mut view_rx) = watch::channel(Arc::new(DnsView::default()));
    ctx.term
        .spawn("dns", run_dns(ctx.clone(), input_rx, view_tx));
    let mut statuses = status::StatusWriter::default();
    let mut known: Option<Known> = None;
    let route_gauge = ctx.metrics.track_routes();
    loop {
        let started = Instant::now();
        cache.mark_seen();
        view_rx.borrow_and_update();
        let mut world = cache.world();
        let mut table = compute_routes(&world);
        if let Some(published) = ctx.routes.current() {
            table.share_unchanged(&published);
        }
        let table = Arc::new(table);
        route_gauge.set(routes_by_reason(&table));
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
        let protections_changed = ctx.access.publish(guard.clone());
        let previous = ctx.routes.publish(table.clone(), guard);
        // A tunnel new since the last table: its routes (a binding applied with it) usually
        // arrive a moment after it, so the next table comes soon (docs/design.md §3.8).
        let grew = previous
            .as_ref()
            .is_some_and(|p| table.tunnels.keys().any(|t| !p.tunnels.contains_key(t)));
        for tunnel in changed_tunnels(previous.as_deref(), &table) {
            // A change after the term's first table is a user's (docs/design.md §3.8).
            if previous.is_some() {
                ctx.asks.routes_changed(tunnel.to_string());
            }
            let _ = triggers.send(tunnel);
        }
        drop(previous);
        for tunnel in protections_changed {
            let _ = triggers.send(tunnel);
        }
        let records = cache.tunnel_records();
        let bindings = cache.bindings();
        let dns_table = table.dns_only(input_tx.borrow().as_ref().map(|input| &*input.table));
        input_tx.send_replace(Some(Arc::new(DnsInput {
            table: Arc::new(dns_table),
            records: records.clone(),
            held,
        })));
        let view = view_rx.borrow().clone();
        // The tunnel reconciler writes the SharedTunnel condition: re-run those that changed.
        for tunnel in ctx.shared_tunnels.replace(view.shared()) {
            let _ = triggers.send(tunnel);
        }
        // The snapshot goes before statuses are written: each write replaces its object in
        // the store, and a snapshot held through the writes would keep both versions.
        let gateway = gateway_status::gateway_writes(&mut world, &table, &records, &view);
        drop(world);
        let mut give_way = give_way::GiveWay::new(give_way::WRITE_SLICE, || {
            (grew && cache.has_changed()) || tunnels_differ(&cache.live_tunnels(), &table)
        });
        statuses
            .write(&ctx, &table, &view, &records, bindings, &mut give_way)
            .await;
        if !give_way.now() {
            statuses
                .write_ingresses(&ctx, &table, &records, &cache.ingresses())
                .await;
        }
        if let Some(gateway) = gateway {
            gateway_status::write_gateway_status(&ctx, gateway, &mut give_way).await;
        }
        drop((records, view));
        let took = started.elapsed();
        tracing::debug!(took_ms = took.as_millis() as u64, "route iteration");
        let pause = match grew {
            true => DEBOUNCE,
            false => pause_after(took),
        };
        tokio::select! {
            _ = cache.changed() => wait_out(&mut cache, &table, pause).await,
            changed = view_rx.changed() => {
                if changed.is_err() {
                    std::future::pending::<()>().await;
                }
            }
        }
    }
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
