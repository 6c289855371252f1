//! The route reconciler (SPEC §3.2, §3.3): watches tunnels, TunnelBindings, Services and
//! namespace labels; computes every tunnel's routes ([`crate::routes`]); hands them to the tunnel
//! reconciler (the single writer of config.yaml) through a shared [`RouteIndex`], triggering only
//! the tunnels whose routes changed; syncs DNS per zone ([`crate::dns`]); writes TunnelBinding
//! status and finalizers, and Events on labelled Services.
//!
//! A burst of edits is debounced into one computation (and so one render, one rollout per
//! tunnel). A tunnel's own DNS records are removed by its deletion, before the tunnel itself.
mod cache;
mod dns;
mod index;
mod status;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc::UnboundedSender;

pub use cache::{RouteCache, TunnelRecord};
pub use dns::{DnsProblem, DnsSync};
pub use index::{RouteIndex, changed_tunnels};

use crate::admission::TunnelIdentity;
use crate::controller::Context;
use crate::routes::compute_routes;

/// Quiet time after a change before routes are recomputed: a burst becomes one render.
pub const DEBOUNCE: Duration = Duration::from_millis(500);

/// Runs until the process ends. `triggers` receives the tunnels whose routes changed.
pub async fn run(ctx: Arc<Context>, triggers: UnboundedSender<TunnelIdentity>) {
    let (mut cache, synced) = RouteCache::start(
        &ctx.client,
        &ctx.scope,
        &ctx.options.cluster_resource_namespace,
    );
    synced.await;
    tracing::info!("route caches synced");
    let mut dns = DnsSync::new(&ctx);
    let mut statuses = status::StatusWriter::default();
    loop {
        cache.mark_seen();
        let table = Arc::new(compute_routes(&cache.world()));
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
        dns.run(&ctx, &table, &records, &force).await;
        statuses
            .write(&ctx, &table, &dns, &records, &bindings)
            .await;
        let due = dns.next_due();
        tokio::select! {
            _ = cache.changed() => tokio::time::sleep(DEBOUNCE).await,
            _ = sleep_until(due) => {}
        }
    }
}

async fn sleep_until(due: Option<std::time::Instant>) {
    match due {
        Some(at) => tokio::time::sleep_until(tokio::time::Instant::from_std(at)).await,
        None => std::future::pending::<()>().await,
    }
}
