//! The status writer (docs/design.md §3.3): the one task that writes the statuses of the objects
//! that declare routes or protect them — TunnelBinding status, finalizer and labels; Events on
//! labelled Services and Ingresses; Ingress `status.loadBalancer`; GatewayClass, Gateway,
//! HTTPRoute, GRPCRoute, TCPRoute and UDPRoute statuses; the tunnels' `status.routes`,
//! `status.edge`, `status.connectors` and `Connected`; AccessPolicy statuses.
//!
//! It reads four inputs ([`Inputs`]) and writes nothing else back: the latest [`StatusPlan`]
//! the route reconciler published (its route table and the tunnel records it was computed
//! with), the DNS task's latest [`DnsView`], the AccessPolicy statuses the Access reconciler
//! handed in ([`AccessStatuses`]), and the edge health task's latest [`EdgeView`] (which alone
//! wakes only the edge writes). A DNS finding rewrites statuses here without any route being
//! computed again, and no computation waits for a write: each object is written from the newest
//! plan and view there are when its turn comes, so a pass that outlives its plan goes on with
//! the next one, and a pass follows whenever any input changed meanwhile.
//!
//! The tunnel reconciler writes the rest of a tunnel's status (ids, zones, `Ready`): those are
//! what it learned from Cloudflare and must record before its next step.
//!
//! It runs in the leadership term (only the leader writes). Every write has [`WRITE_TIMEOUT`];
//! a pass with failed writes is followed by another after a backoff ([`RETRY_FIRST`] doubling
//! to [`RETRY_MAX`]) even when nothing changed, so no status is lost to a failed write.
mod access_policies;
mod bindings;
mod events;
mod facts;
mod gateway;
mod ingress;
mod tunnel_edge;
mod tunnel_routes;

pub use access_policies::AccessStatuses;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::caches::ProcessCaches;
use crate::dns_sync::{DnsView, TunnelRecord};
use crate::edge_health::EdgeView;
use crate::term::Context;
use crate::world::RouteCache;
use cftunnel_policy::routes::RouteTable;

/// The longest a status write or Event may take before it counts as failed.
pub(crate) const WRITE_TIMEOUT: Duration = Duration::from_secs(15);
/// The pause before a pass follows one with failed writes; doubles per such pass.
const RETRY_FIRST: Duration = Duration::from_secs(2);
/// The longest pause between passes while writes keep failing.
const RETRY_MAX: Duration = Duration::from_secs(60);

/// What statuses are written from: a route table and the tunnel records (ids, deletions) it
/// was computed with.
pub struct StatusPlan {
    pub table: Arc<RouteTable>,
    pub records: Arc<[TunnelRecord]>,
}

/// A write that did not happen.
#[derive(Debug, thiserror::Error)]
pub(crate) enum WriteError {
    #[error(transparent)]
    Kube(#[from] kube::Error),
    #[error("no answer within {0:?}")]
    TimedOut(Duration),
}

/// `write` within [`WRITE_TIMEOUT`], counted as a status write of `kind`.
pub(crate) async fn bounded<T>(
    ctx: &Context,
    kind: &'static str,
    write: impl Future<Output = Result<T, kube::Error>>,
) -> Result<T, WriteError> {
    let done = match tokio::time::timeout(WRITE_TIMEOUT, write).await {
        Ok(done) => done.map_err(WriteError::from),
        Err(_) => Err(WriteError::TimedOut(WRITE_TIMEOUT)),
    };
    ctx.metrics.status_written(kind, done.is_ok());
    done
}

/// What the writer reads, each made once per term in `wiring.rs`.
pub struct Inputs {
    /// The route reconciler's newest table.
    pub plans: watch::Receiver<Option<Arc<StatusPlan>>>,
    /// The DNS task's newest findings.
    pub dns: watch::Receiver<Arc<DnsView>>,
    /// The AccessPolicy statuses the Access reconciler computed.
    pub access_policies: AccessStatuses,
    /// The edge health task's newest view of every tunnel.
    pub edge: watch::Receiver<Arc<EdgeView>>,
}

/// The newest plan and DNS view, read again for each object.
pub(crate) struct Latest {
    plans: watch::Receiver<Option<Arc<StatusPlan>>>,
    dns: watch::Receiver<Arc<DnsView>>,
    /// Bumped when an AccessPolicy status is handed in.
    access: watch::Receiver<u64>,
    edge: watch::Receiver<Arc<EdgeView>>,
    /// Whether the edge health task still runs (its sender is dropped when it is off).
    edge_open: bool,
}

/// Which inputs a pass follows.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Woken {
    /// Only the edge view changed: only the edge statuses are compared.
    Edge,
    Any,
}

impl Latest {
    pub(crate) fn plan(&self) -> Option<Arc<StatusPlan>> {
        self.plans.borrow().clone()
    }

    pub(crate) fn dns(&self) -> Arc<DnsView> {
        self.dns.borrow().clone()
    }

    pub(crate) fn edge(&self) -> Arc<EdgeView> {
        self.edge.borrow().clone()
    }

    /// Marks every input as read: a change after this starts another pass.
    fn mark_seen(&mut self) {
        self.plans.borrow_and_update();
        self.dns.borrow_and_update();
        self.access.borrow_and_update();
        self.edge.borrow_and_update();
    }

    /// Waits until any input changed, or `retry` passed when it is set.
    async fn changed(&mut self, retry: Option<Duration>) -> Woken {
        let retry = async {
            match retry {
                Some(after) => tokio::time::sleep(after).await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(retry);
        loop {
            tokio::select! {
                changed = self.plans.changed() => {
                    if changed.is_err() {
                        // The route reconciler is gone (the term is ending): nothing more to
                        // write.
                        std::future::pending::<()>().await;
                    }
                }
                changed = self.dns.changed() => {
                    if changed.is_err() {
                        std::future::pending::<()>().await;
                    }
                }
                // The sender lives as long as the writer's own copy of it.
                _ = self.access.changed() => {}
                changed = self.edge.changed(), if self.edge_open => {
                    match changed {
                        Ok(()) => return Woken::Edge,
                        // Edge health is off (`--edge-interval 0`): its view never changes,
                        // and every other input is still followed.
                        Err(_) => {
                            self.edge_open = false;
                            continue;
                        }
                    }
                }
                _ = &mut retry => {}
            }
            return Woken::Any;
        }
    }
}

/// What the writer remembers between passes: what was told in Events.
#[derive(Default)]
struct Told {
    outcomes: events::Outcomes,
    /// Ingress (uid, generation, notice) already told (TLS at the edge, wildcard depth).
    ingress: std::collections::HashSet<(String, i64, ingress::Notice)>,
    /// (tunnel uid, hostname) told to have no edge certificate.
    certificates: std::collections::HashSet<(String, String)>,
}

/// Runs until its term ends, writing from what `inputs` receive.
pub async fn run(ctx: Arc<Context>, caches: ProcessCaches, inputs: Inputs) {
    let cache = RouteCache::new(&caches, &ctx.options.cluster_resource_namespace);
    let access_policies = inputs.access_policies;
    let mut latest = Latest {
        plans: inputs.plans,
        dns: inputs.dns,
        access: access_policies.subscribe(),
        edge: inputs.edge,
        edge_open: true,
    };
    let mut told = Told::default();
    let mut retry: Option<Duration> = None;
    let mut woken = Woken::Any;
    // The certificate findings the sources' statuses were last written with.
    let mut told_certificates = None;
    loop {
        latest.mark_seen();
        let mut failed = 0;
        if woken == Woken::Any {
            // Applications' records first: each opens a hostname someone waits for.
            failed += access_policies::write_access_policies(&ctx, &caches, &access_policies).await;
        }
        let edge = latest.edge();
        failed +=
            tunnel_edge::write_tunnel_edges(&ctx, &caches, &edge, &mut told.certificates).await;
        let certificates_changed = told_certificates.as_ref() != Some(&edge.certificates);
        if certificates_changed {
            // Routes' conditions carry the findings: every source is compared again.
            woken = Woken::Any;
            told_certificates = Some(edge.certificates.clone());
        }
        drop(edge);
        if woken == Woken::Any && latest.plan().is_some() {
            failed += pass(&ctx, &caches, &cache, &latest, &mut told).await;
        }
        retry = match failed {
            0 => None,
            _ => Some(retry.map_or(RETRY_FIRST, |r| (r * 2).min(RETRY_MAX))),
        };
        if failed > 0 {
            tracing::debug!(failed, retry_in = ?retry, "status writes failed");
        }
        woken = match (latest.changed(retry).await, failed) {
            // A retry writes whatever failed, whichever input it was.
            (Woken::Edge, 0) => Woken::Edge,
            _ => Woken::Any,
        };
    }
}

/// Writes every status that differs from what the newest plan and view say; returns how many
/// writes failed.
async fn pass(
    ctx: &Context,
    caches: &ProcessCaches,
    cache: &RouteCache,
    latest: &Latest,
    told: &mut Told,
) -> usize {
    let mut failed = tunnel_routes::write_tunnel_routes(ctx, caches, latest).await;
    // Each binding is let go once written: its store holds the version the write returned.
    for binding in cache.bindings() {
        let Some(plan) = latest.plan() else {
            return failed;
        };
        let dns = latest.dns();
        let edge = latest.edge();
        if let Err(error) = bindings::write_binding(ctx, &plan, &dns, &edge, &binding).await {
            failed += 1;
            tracing::warn!(binding = %format!("{}/{}", binding.metadata.namespace.as_deref().unwrap_or_default(), binding.metadata.name.as_deref().unwrap_or_default()), %error, "binding status not written");
        }
    }
    let Some(plan) = latest.plan() else {
        return failed;
    };
    failed += told
        .outcomes
        .tell(ctx, &plan.table, &latest.dns(), &latest.edge())
        .await;
    drop(plan);
    failed += ingress::write_ingresses(ctx, latest, cache.ingresses(), &mut told.ingress).await;
    if let Some(plan) = latest.plan()
        && cache.has_gateway_classes()
    {
        // The snapshot goes before statuses are written: each write replaces its object in
        // the store, and a snapshot held through the writes would keep both versions.
        let mut world = cache.world();
        let l4 = caches.gateway_api.l4_routes();
        let (dns, edge) = (latest.dns(), latest.edge());
        let table = &plan.table;
        let writes = gateway::gateway_writes(&mut world, l4, table, &plan.records, &dns, &edge);
        drop((world, plan));
        if let Some(writes) = writes {
            failed += gateway::write_gateway_status(ctx, writes).await;
        }
    }
    failed
}
