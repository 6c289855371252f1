//! HTTPS accept loop (tokio-rustls + hyper auto HTTP/1.1 and HTTP/2) and the plain-HTTP health server.
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, watch};
use tokio::task::{JoinHandle, JoinSet};
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt as _;
use tower::limit::GlobalConcurrencyLimitLayer;

use super::budget::{BodyBudget, Budgets};
use super::idle::Activity;
use super::metrics::WebhookMetrics;
use super::tls::{ReloadOutcome, ReloadingResolver, TlsError, server_config};
use super::{
    DEFAULT_SMALL_BODY_RESERVE, DEFAULT_SMALL_DECODE_RESERVE, Policy, Readiness, WebhookConfig,
    WebhookError, health_router, router_with_budget, until_stopped,
};
use crate::metrics::Metrics;
use crate::scope::Scope;

/// A client that has not finished its TLS handshake by then is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// A client that has not sent its request headers by then is dropped.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Open connections get this long to finish after shutdown starts.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);
/// An idle connection gets this long to close cleanly (HTTP/2 GOAWAY) before it is dropped.
const IDLE_CLOSE_GRACE: Duration = Duration::from_secs(2);
/// HTTP/2 flow-control windows: how much of a request body a client may send before the
/// webhook reads it. Small, so bodies waiting for room in the budget stay in the client.
const H2_STREAM_WINDOW: u32 = 64 * 1024;
const H2_CONNECTION_WINDOW: u32 = 128 * 1024;
/// Requests at once on one HTTP/2 connection; the API server opens another connection past it.
const H2_MAX_STREAMS: u32 = 64;
/// How long the tasks of a scope the webhook owns get to stop after it.
const OWNED_SCOPE_GRACE: Duration = Duration::from_secs(5);
/// Pause after a failed accept (e.g. out of file descriptors) so the loop does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// A running webhook: its bound addresses, its certificate resolver and a way to stop it.
#[derive(Debug)]
pub struct ServingHandle {
    https_addr: SocketAddr,
    health_addr: SocketAddr,
    resolver: Arc<ReloadingResolver>,
    metrics: Arc<WebhookMetrics>,
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
    result: oneshot::Receiver<Result<(), WebhookError>>,
    /// A scope that exists for this webhook alone (its caches), ended once it has stopped.
    owned: Option<Scope>,
}

impl ServingHandle {
    /// Where HTTPS is served (the real port when 0 was asked for).
    pub fn https_addr(&self) -> SocketAddr {
        self.https_addr
    }

    /// Where `/healthz`, `/readyz` and `/metrics` are served.
    pub fn health_addr(&self) -> SocketAddr {
        self.health_addr
    }

    /// The resolver serving the certificate.
    pub fn resolver(&self) -> &Arc<ReloadingResolver> {
        &self.resolver
    }

    /// The counters behind `/metrics`.
    pub fn metrics(&self) -> &Arc<WebhookMetrics> {
        &self.metrics
    }

    /// Re-reads the certificate files now instead of waiting for the next poll.
    pub fn reload_now(&self) -> Result<ReloadOutcome, TlsError> {
        self.resolver.reload_now()
    }

    /// Starts a graceful shutdown: stop accepting, let open requests finish.
    pub fn shutdown(&self) {
        self.stop.send_replace(true);
    }

    /// Ends `scope` (and everything in it) once the webhook has stopped: for a webhook that
    /// runs with caches of its own.
    pub fn owning(mut self, scope: Scope) -> Self {
        self.owned = Some(scope);
        self
    }

    /// Waits until both servers have stopped (or their scope was cancelled under them), then
    /// ends the scope it owns, if any.
    pub async fn join(self) -> Result<(), WebhookError> {
        let joined = self.task.await.map_err(WebhookError::Task);
        if let Some(owned) = &self.owned {
            owned.shutdown(OWNED_SCOPE_GRACE).await;
        }
        joined?;
        self.result.await.unwrap_or(Ok(()))
    }

    /// Shuts down and waits.
    pub async fn shutdown_and_join(self) -> Result<(), WebhookError> {
        self.shutdown();
        self.join().await
    }
}

/// Binds both ports and serves until `shutdown` completes or [`ServingHandle::shutdown`] is
/// called; then open requests are drained. Everything runs as one task of `scope`, so the
/// webhook ends with its owner at the latest. `/metrics` serves the admission metrics and
/// `operator`'s.
pub async fn serve(
    scope: &Scope,
    config: WebhookConfig,
    policy: Arc<dyn Policy>,
    readiness: Readiness,
    operator: Arc<Metrics>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<ServingHandle, WebhookError> {
    let resolver = ReloadingResolver::load(&config.cert_file, &config.key_file)?;
    let tls = server_config(resolver.clone()).map_err(WebhookError::TlsConfig)?;
    let acceptor = TlsAcceptor::from(Arc::new(tls));
    let https = bind(config.listen).await?;
    let health = bind(config.health_listen).await?;
    let https_addr = local_addr(&https, config.listen)?;
    let health_addr = local_addr(&health, config.health_listen)?;

    let metrics = Arc::new(WebhookMetrics::new());
    let serving = resolver.clone();
    metrics.watch_certificate(move || serving.not_after());
    let budget = BodyBudget::new(
        config.max_bytes_in_flight,
        DEFAULT_SMALL_BODY_RESERVE.min(config.max_bytes_in_flight / 4),
    );
    let decoding = BodyBudget::new(
        config.max_decode_bytes,
        DEFAULT_SMALL_DECODE_RESERVE.min(config.max_decode_bytes / 4),
    );
    let app = router_with_budget(
        policy,
        readiness.clone(),
        config.max_body_bytes,
        Budgets {
            bodies: budget,
            decoding,
        },
        metrics.clone(),
    )
    .layer(GlobalConcurrencyLimitLayer::new(
        config.max_concurrency.max(1),
    ));
    let (stop, stopped) = watch::channel(false);

    let poller = resolver
        .clone()
        .poll(config.reload_interval, stopped.clone());
    let https_loop = accept_loop(https, acceptor, app, config.idle_timeout, stopped.clone());
    let health_server = {
        let mut stopped = stopped.clone();
        let app = health_router(readiness, metrics.clone(), operator);
        async move {
            axum::serve(health, app)
                .with_graceful_shutdown(async move { until_stopped(&mut stopped).await })
                .await
        }
    };
    let trigger = stop.clone();
    let until_shutdown = async move {
        let mut stopped = stopped;
        tokio::select! {
            () = shutdown => { trigger.send_replace(true); }
            () = until_stopped(&mut stopped) => {}
        }
        tracing::info!("webhook shutting down");
    };
    let (result_tx, result) = oneshot::channel();
    let task = scope.spawn("webhook", async move {
        let ((), health_result, (), ()) =
            tokio::join!(https_loop, health_server, poller, until_shutdown);
        let _ = result_tx.send(health_result.map_err(WebhookError::Health));
    });
    tracing::info!(%https_addr, %health_addr, "webhook listening");
    Ok(ServingHandle {
        https_addr,
        health_addr,
        resolver,
        metrics,
        stop,
        task,
        result,
        owned: None,
    })
}

async fn bind(addr: SocketAddr) -> Result<TcpListener, WebhookError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| WebhookError::Bind { addr, source })
}

fn local_addr(listener: &TcpListener, asked: SocketAddr) -> Result<SocketAddr, WebhookError> {
    listener.local_addr().map_err(|source| WebhookError::Bind {
        addr: asked,
        source,
    })
}

async fn accept_loop(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    app: Router,
    idle_timeout: Duration,
    mut stopped: watch::Receiver<bool>,
) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            () = until_stopped(&mut stopped) => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let link = Link { peer, acceptor: acceptor.clone(), app: app.clone(), idle_timeout };
                    connections.spawn(serve_connection(stream, link, stopped.clone()));
                }
                Err(err) => {
                    tracing::warn!(error = %err, "accept failed");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    drop(listener);
    let drained = tokio::time::timeout(DRAIN_TIMEOUT, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            open = connections.len(),
            "closing connections that did not finish in time"
        );
        connections.abort_all();
    }
}

/// What a connection is served with.
struct Link {
    peer: SocketAddr,
    acceptor: TlsAcceptor,
    app: Router,
    idle_timeout: Duration,
}

/// One connection: TLS, then HTTP/1.1 or HTTP/2, until the client leaves, it stays idle for
/// `idle_timeout` (no request in flight), or shutdown.
async fn serve_connection(stream: TcpStream, link: Link, mut stopped: watch::Receiver<bool>) {
    let Link {
        peer,
        acceptor,
        app,
        idle_timeout,
    } = link;
    let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
        Ok(Ok(tls)) => tls,
        Ok(Err(err)) => {
            tracing::debug!(%peer, error = %err, "TLS handshake failed");
            return;
        }
        Err(_) => {
            tracing::debug!(%peer, "TLS handshake timed out");
            return;
        }
    };
    let activity = Arc::new(Activity::default());
    let service = {
        let activity = activity.clone();
        tower::service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
            let busy = activity.begin();
            let app = app.clone();
            async move {
                let response = app.oneshot(request).await;
                drop(busy);
                response
            }
        })
    };
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT);
    builder
        .http2()
        .timer(TokioTimer::new())
        .initial_stream_window_size(H2_STREAM_WINDOW)
        .initial_connection_window_size(H2_CONNECTION_WINDOW)
        .max_concurrent_streams(H2_MAX_STREAMS);
    let connection = builder.serve_connection(TokioIo::new(tls), TowerToHyperService::new(service));
    tokio::pin!(connection);
    let result = loop {
        let Some(deadline) = activity.idle_deadline(idle_timeout) else {
            tracing::debug!(%peer, "closing an idle connection");
            connection.as_mut().graceful_shutdown();
            break tokio::time::timeout(IDLE_CLOSE_GRACE, connection.as_mut())
                .await
                .unwrap_or(Ok(()));
        };
        tokio::select! {
            result = connection.as_mut() => break result,
            () = until_stopped(&mut stopped) => {
                connection.as_mut().graceful_shutdown();
                break connection.as_mut().await;
            }
            () = tokio::time::sleep_until(deadline) => {}
        }
    };
    if let Err(err) = result {
        tracing::debug!(%peer, error = %err, "connection ended with an error");
    }
}
