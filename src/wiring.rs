//! How `cftunnel run` is wired, in one place.
//!
//! ```text
//! process scope (every replica)
//! ├── start-up: CRD check, webhook certificates, storage migration      (startup/)
//! ├── ProcessCaches: Tunnels, ClusterTunnels, TunnelBindings, Services,
//! │   namespaces — one watch each                                       (caches/)
//! ├── webhook: admission from a view of those caches, /readyz, /metrics (admission_view/, webhook/)
//! └── elector: one term per leadership                                  (leader/)
//!     └── term scope (leader only; cancelled and awaited when leadership ends)
//!         ├── TermCaches: Secrets and ConfigMaps (metadata), cloudflared
//!         │   Deployments and DaemonSets — one watch each               (caches/)
//!         ├── route reconciler                                          (route_reconciler/)
//!         ├── DNS task                                                  (dns_sync/)
//!         ├── status writer                                             (status_writer/)
//!         ├── edge health: each tunnel's word at Cloudflare's edge       (edge_health/)
//!         ├── Tunnel, ClusterTunnel and AccessTunnel controllers        (tunnel_reconciler/)
//!         ├── Access reconciler                                         (access_reconciler/)
//!         ├── network reconciler: private routes, virtual networks      (network_reconciler/)
//!         ├── Secret guard sweeps and retries                           (tunnel_reconciler/secret_guard.rs)
//!         └── checksum watcher                                          (checksum_watcher.rs)
//!     all of them sharing one Context                                   (term/context.rs)
//! ```
//!
//! The `Context` holds only what every component reads. What one component hands another is
//! made once per term in [`run_term`] and given to both explicitly:
//!
//! ```text
//! route reconciler ──RoutePublisher──▶ RouteReader ──▶ tunnel reconciler, Access reconciler
//!                  ──AccessShared (guard)─────────────▶ Access reconciler
//!   tunnel reconciler ──AccessShared (what each tunnel applied)──▶ Access reconciler
//!                  ──SharedTunnels, Asks, re-runs─────▶ tunnel reconciler
//!                  ──DnsInput (watch)─────────────────▶ DNS task
//!                  ──StatusPlan (watch)───────────────▶ status writer
//! DNS task ──DnsView (watch)──▶ status writer, route reconciler (SharedTunnel re-runs)
//! DNS task ◀──DnsWriters (zone locks, retired ids, other zones)──▶ tunnel deletions
//! Access reconciler ──AccessStatuses──▶ status writer
//! edge health ──EdgeView (watch)──▶ status writer
//! ```
//!
//! Everything long-lived is spawned through a [`Scope`], so it ends with its owner. Stop order
//! (SIGTERM): the term ends first (reconcilers stop, every task of the term is awaited, the
//! lease is released), then the webhook stops serving, then the process caches stop. The API
//! client outlives all of them.
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use tokio::sync::{mpsc, watch};

use crate::admission_view::serve::serve_webhook;
use crate::caches::WatchScope;
use crate::caches::{ProcessCaches, TermCaches, child_namespaces};
use crate::dns_sync::DnsView;
use crate::dns_sync::task::run_dns;
use crate::edge_health::EdgeView;
use crate::leader::{LeaderElectionConfig, LeaderStatus, report_to_metrics, run_while_leading};
use crate::metrics::Metrics;
use crate::route_reconciler;
use crate::scope::Scope;
use crate::status_writer::{self, AccessStatuses};
use crate::term::access::AccessShared;
use crate::term::asks::Asks;
use crate::term::cluster::wait_for_cluster_id;
use crate::term::dns_guard::DnsWriters;
use crate::term::route_index::route_index;
use crate::term::shared::SharedTunnels;
use crate::term::{Context, ControllerOptions};
use crate::tunnel_reconciler::{self, TunnelContext};
use crate::webhook::WebhookConfig;
use cftunnel_cloudflare::RateLimiters;

/// How long the process caches and start-up tasks may take to stop at the end.
const PROCESS_GRACE: Duration = Duration::from_secs(5);

/// What `cftunnel run` needs once its arguments are read.
pub struct Settings {
    pub client: Client,
    pub election: Option<LeaderElectionConfig>,
    pub watch: WatchScope,
    pub webhook: WebhookConfig,
    pub options: ControllerOptions,
    pub startup: crate::startup::StartupArgs,
}

/// Runs every part of `cftunnel run` until `shutdown` resolves (or the webhook fails), then
/// stops them in order.
pub async fn run(
    settings: Settings,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let Settings {
        client,
        election,
        watch,
        webhook,
        options,
        startup,
    } = settings;
    let process = Scope::root("process");
    let metrics = Metrics::process();
    // One bucket per credential for the process: a 429 pause is kept across re-elections.
    let limiters = RateLimiters::new();
    metrics.track_limiters(limiters.clone());
    crate::startup::prepare(
        &process,
        &client,
        &startup,
        &webhook.cert_file,
        &webhook.key_file,
    )
    .await?;
    let caches = ProcessCaches::start(&process, &client, &watch, &metrics);
    let (stop_webhook, webhook_stopped) = tokio::sync::oneshot::channel::<()>();
    let handle = serve_webhook(
        &process,
        &client,
        caches.clone(),
        webhook,
        metrics.clone(),
        async move {
            let _ = webhook_stopped.await;
        },
    )
    .await?;
    let leader = LeaderStatus::new();
    process.spawn(
        "leader-metrics",
        report_to_metrics(leader.clone(), handle.metrics().clone()),
    );
    tracing::info!(https = %handle.https_addr(), health = %handle.health_addr(), "cftunnel is serving");
    let until_stopped = {
        let process = process.clone();
        async move {
            tokio::select! {
                () = shutdown => {}
                () = process.cancelled() => {}
            }
        }
    };
    let elector = run_while_leading(
        client.clone(),
        election,
        leader,
        process.clone(),
        until_stopped,
        move |term| {
            run_term(
                term,
                client.clone(),
                options.clone(),
                watch.clone(),
                caches.clone(),
                metrics.clone(),
                limiters.clone(),
            )
        },
    );
    let served = handle.join();
    tokio::pin!(elector, served);
    let (elected, served) = tokio::select! {
        elected = &mut elector => {
            let _ = stop_webhook.send(());
            (elected, served.await)
        }
        served = &mut served => {
            // The webhook ended on its own: stop leading and end the process with its error.
            process.cancel();
            (elector.await, served)
        }
    };
    process.shutdown(PROCESS_GRACE).await;
    served?;
    elected?;
    Ok(())
}

/// One leadership term: the term's caches, the route reconciler, both tunnel controllers, the
/// Secret guard and the checksum watcher, all spawned in `term`. Returns when `term` ends.
pub async fn run_term(
    term: Scope,
    client: Client,
    options: ControllerOptions,
    watch: WatchScope,
    caches: ProcessCaches,
    metrics: Arc<Metrics>,
    limiters: RateLimiters,
) {
    let cluster = wait_for_cluster_id(&client, options.cluster_id.as_deref()).await;
    let ctx = Arc::new(Context::new(
        client.clone(),
        options,
        watch,
        term.clone(),
        metrics.clone(),
        limiters,
        cluster,
    ));
    let namespaces = child_namespaces(&ctx.scope, &ctx.options.cluster_resource_namespace);
    let children = TermCaches::start(&term, &client, &namespaces, &metrics);
    // What the components hand each other in this term, each made once here and given to
    // the components that write it and those that read it.
    let (routes, route_reader) = route_index();
    let access = Arc::new(AccessShared::default());
    let shared_tunnels = Arc::new(SharedTunnels::default());
    let asks = Arc::new(Asks::default());
    let dns = DnsWriters::default();
    let (route_tx, route_rx) = mpsc::unbounded_channel();
    let (dns_input, dns_input_rx) = watch::channel(None);
    let (dns_view_tx, dns_view) = watch::channel(Arc::new(DnsView::default()));
    let (statuses, plans) = watch::channel(None);
    let access_statuses = AccessStatuses::default();
    let (edge_tx, edge_view) = watch::channel(Arc::new(EdgeView::default()));
    tunnel_reconciler::start_secret_guard(&ctx);
    term.spawn(
        "checksum-watcher",
        crate::checksum_watcher::run(client, children.clone(), metrics),
    );
    term.spawn(
        "access-tunnels",
        tunnel_reconciler::access_tunnel::run(ctx.clone(), children.clone()),
    );
    term.spawn(
        "access-policies",
        crate::access_reconciler::run(
            ctx.clone(),
            caches.clone(),
            route_reader.clone(),
            access.clone(),
            access_statuses.clone(),
        ),
    );
    // The DNS task shares `dns` with tunnel deletions.
    term.spawn(
        "dns",
        run_dns(ctx.clone(), dns.clone(), dns_input_rx, dns_view_tx),
    );
    term.spawn(
        "networks",
        crate::network_reconciler::run(ctx.clone(), caches.clone()),
    );
    term.spawn(
        "edge-health",
        crate::edge_health::run(ctx.clone(), caches.clone(), children.clone(), edge_tx),
    );
    term.spawn(
        "statuses",
        status_writer::run(
            ctx.clone(),
            caches.clone(),
            status_writer::Inputs {
                plans,
                dns: dns_view.clone(),
                access_policies: access_statuses,
                edge: edge_view,
            },
        ),
    );
    let tunnel_ctx = Arc::new(TunnelContext::new(
        ctx.clone(),
        route_reader,
        access.clone(),
        shared_tunnels.clone(),
        asks.clone(),
        dns.clone(),
    ));
    let outputs = route_reconciler::Outputs {
        triggers: route_tx,
        routes,
        access,
        shared_tunnels,
        asks,
        dns: dns_input,
        statuses,
    };
    futures::join!(
        route_reconciler::run(ctx, caches.clone(), dns_view, outputs),
        tunnel_reconciler::run_controllers(
            tunnel_ctx,
            caches.tunnels.clone(),
            caches.cluster_tunnels.clone(),
            children,
            route_rx
        ),
    );
}

/// The reconcilers alone, without election or webhook (tests, the demo): their own process
/// caches and term, all stopped when this future is dropped (aborting its task is enough).
pub async fn run_reconcilers(client: Client, options: ControllerOptions, watch: WatchScope) {
    let process = Scope::root("reconcilers");
    let _stop_on_drop = process.cancel_on_drop();
    let metrics = Metrics::process();
    let caches = ProcessCaches::start(&process, &client, &watch, &metrics);
    let term = process.child("term");
    run_term(
        term,
        client,
        options,
        watch,
        caches,
        metrics,
        RateLimiters::new(),
    )
    .await;
}
