//! The route reconciler (docs/design.md §3.2, §3.3): watches tunnels, TunnelBindings, Services and
//! namespace labels; computes every tunnel's routes ([`cftunnel_policy::routes`]); hands them to the tunnel
//! reconciler (the single writer of config.yaml) through a shared [`RouteIndex`], triggering only
//! the tunnels whose routes changed; syncs DNS per zone ([`cftunnel_policy::dns`]); writes TunnelBinding
//! status and finalizers, and Events on labelled Services.
//!
//! A burst of edits is debounced into one computation (and so one render, one rollout per
//! tunnel). A tunnel's own DNS records are removed by its deletion, before the tunnel itself.
mod cache;
mod dns;
mod dns_credentials;
mod dns_groups;
mod previous_zones;
mod status;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::watch;

pub use cache::{RouteCache, TunnelRecord};
pub use cftunnel_policy::routes::{RouteIndex, changed_tunnels};
pub use dns::{DnsProblem, DnsSync, DnsView};

use crate::caches::ProcessCaches;
use crate::controller::Context;
use cftunnel_policy::routes::{RouteTable, compute_routes};
use cftunnel_types::TunnelIdentity;

/// Quiet time after a change before routes are recomputed: a burst becomes one render.
pub const DEBOUNCE: Duration = Duration::from_millis(500);

/// Least time between the start of one DNS sync and the start of the next one that a route
/// change triggers. A lone change after a quiet spell is synced at once (after [`DEBOUNCE`]); a
/// stream of changes costs one batch per interval, and its last record lands at most this long
/// after its last change (plus the sync itself).
///
/// Choice: 10 s. A thousand routes created over 100 s cost about 20 batch requests (each
/// round writes all that arrived since the last, up to the plan's batch size), well inside
/// Cloudflare's budget, and no record waits more than a few seconds past the interval. At 5 s
/// the same stream cost twice the rounds (40 requests when the creates were slow).
pub const DNS_COALESCE: Duration = Duration::from_secs(10);

/// What the DNS task syncs: a route table and the tunnels as they were when it was computed.
struct DnsInput {
    table: Arc<RouteTable>,
    records: Vec<TunnelRecord>,
    /// Tunnels with a binding being deleted: their group is synced even right after a start.
    force: BTreeSet<TunnelIdentity>,
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
    let route_gauge = crate::metrics::TrackedRoutes::new();
    loop {
        cache.mark_seen();
        view_rx.borrow_and_update();
        let table = Arc::new(compute_routes(&cache.world()));
        route_gauge.computed(&table);
        let previous = ctx.routes.publish(table.clone());
        for tunnel in changed_tunnels(previous.as_deref(), &table) {
            let _ = triggers.send(tunnel);
        }
        let records = cache.tunnel_records();
        let bindings = cache.bindings();
        let force: BTreeSet<TunnelIdentity> = bindings
            .iter()
            .filter(|b| b.metadata.deletion_timestamp.is_some())
            .filter_map(|b| status::binding_tunnel(b))
            .collect();
        input_tx.send_replace(Some(Arc::new(DnsInput {
            table: table.clone(),
            records: records.clone(),
            force,
        })));
        let view = view_rx.borrow().clone();
        statuses
            .write(&ctx, &table, &view, &records, &bindings)
            .await;
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

/// The DNS task: syncs on every new input, and when a retry or drift sync comes due.
async fn run_dns(
    ctx: Arc<Context>,
    mut input: watch::Receiver<Option<Arc<DnsInput>>>,
    view: watch::Sender<Arc<DnsView>>,
) {
    let mut dns = DnsSync::new(&ctx);
    loop {
        let current = input.borrow_and_update().clone();
        let ran_at = current.is_some().then(tokio::time::Instant::now);
        if let Some(current) = current {
            dns.run(
                &ctx,
                &current.table,
                &current.records,
                &current.force,
                &view,
            )
            .await;
        }
        tokio::select! {
            changed = input.changed() => {
                if changed.is_err() {
                    return;
                }
                // Routes arriving one after another over a minute (a rollout of many
                // bindings, a restored backup) are synced every few seconds in a few batches,
                // not once per route-table change. `input` keeps only the newest table.
                if let Some(ran_at) = ran_at {
                    tokio::time::sleep_until(ran_at + DNS_COALESCE).await;
                }
            }
            _ = sleep_until(dns.next_due()) => {}
        }
    }
}

async fn sleep_until(due: Option<std::time::Instant>) {
    match due {
        Some(at) => tokio::time::sleep_until(tokio::time::Instant::from_std(at)).await,
        None => std::future::pending::<()>().await,
    }
}
