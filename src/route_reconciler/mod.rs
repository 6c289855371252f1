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
mod ingress_status;
mod status;
mod world;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

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
    let route_gauge = ctx.metrics.track_routes();
    loop {
        cache.mark_seen();
        view_rx.borrow_and_update();
        let world = cache.world();
        let mut table = compute_routes(&world);
        if let Some(published) = ctx.routes.current() {
            table.share_unchanged(&published);
        }
        let table = Arc::new(table);
        route_gauge.set(routes_by_reason(&table));
        // The guard goes first: a tunnel that finds its routes finds their protections too.
        let guard = cftunnel_policy::access::guard(&caches.access_policies.all(), &table);
        let held = Arc::new(guard.held());
        let protections_changed = ctx.access.publish(guard);
        let previous = ctx.routes.publish(table.clone());
        for tunnel in changed_tunnels(previous.as_deref(), &table) {
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
        statuses
            .write(&ctx, &table, &view, &records, &bindings, &cache.ingresses())
            .await;
        gateway_status::write_gateway_status(&ctx, &world, &table, &records, &view).await;
        tokio::select! {
            _ = cache.changed() => tokio::time::sleep(DEBOUNCE).await,
            changed = view_rx.changed() => {
                if changed.is_err() {
                    std::future::pending::<()>().await;
                }
            }
        }
    }
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
