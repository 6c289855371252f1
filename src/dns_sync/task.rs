//! The DNS task of a term: it receives each new route table from the route reconciler and syncs
//! on it, paced, and when a retry or drift sync comes due.
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::TunnelRecord;
use super::schedule::{DnsSync, DnsView};
use crate::term::Context;
use crate::term::dns_guard::DnsWriters;
use cftunnel_policy::routes::RouteTable;

/// Least time between the start of one DNS sync and the start of the next one that a route
/// change triggers. A lone change after a quiet spell is synced at once (after [`DEBOUNCE`]); a
/// stream of changes costs one batch per interval, and its last record lands at most this long
/// after its last change (plus the sync itself).
///
/// Choice: 10 s. A thousand routes created over 100 s cost about 20 batch requests (each
/// round writes all that arrived since the last, up to the plan's batch size), well inside
/// Cloudflare's budget, and no record waits more than a few seconds past the interval. At 5 s
/// the same stream cost twice the rounds (40 requests when the creates were slow).
pub(crate) const DNS_COALESCE: Duration = Duration::from_secs(10);

/// What the DNS task syncs: a route table and the tunnels as they were when it was computed.
pub(crate) struct DnsInput {
    /// The DNS part of the table ([`RouteTable::dns_only`]).
    pub table: Arc<RouteTable>,
    pub records: Arc<[TunnelRecord]>,
    /// Hostnames that get no new record: protected, their Access application not there yet.
    pub held: Arc<std::collections::BTreeSet<String>>,
}

/// The DNS task: syncs on every new input, and when a retry or drift sync comes due. `dns` is
/// what it shares with tunnel deletions (zone locks, retired ids, each tunnel's other zones);
/// its findings go out on `view`.
pub(crate) async fn run_dns(
    ctx: Arc<Context>,
    dns: DnsWriters,
    mut input: watch::Receiver<Option<Arc<DnsInput>>>,
    view: watch::Sender<Arc<DnsView>>,
) {
    let mut dns = DnsSync::new(&ctx, dns);
    let newest = input.clone();
    loop {
        let current = input.borrow_and_update().clone();
        let ran_at = current.is_some().then(tokio::time::Instant::now);
        if let Some(current) = current {
            // A newer input than this round's means another round follows it.
            let more_coming = || {
                newest
                    .borrow()
                    .as_ref()
                    .is_some_and(|n| !Arc::ptr_eq(n, &current))
            };
            dns.run(
                &ctx,
                &current.table,
                &current.records,
                &current.held,
                &view,
                &more_coming,
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
                // not once per route-table change. `input` keeps only the newest table. A
                // round that left creates to this one goes on at once: its batches are full.
                if let Some(ran_at) = ran_at
                    && !dns.unfinished()
                {
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
