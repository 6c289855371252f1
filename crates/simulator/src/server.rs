//! Serving the simulator on a loopback port under `/client/v4`, on the caller's runtime or on
//! a thread of its own.
use std::net::SocketAddr;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::Simulator;

/// Where Cloudflare's API base path sits, so clients only swap the host.
pub(crate) const API_BASE_PATH: &str = "/client/v4";

/// How long `shutdown` waits for in-flight requests before giving up on them.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Workers of a detached simulator's runtime: two keep answers flowing while one sleeps a latency.
const DETACHED_WORKERS: usize = 2;

/// A simulator listening on a socket; stopped on drop or by `shutdown().await`.
#[derive(Debug)]
pub struct RunningSim {
    /// The API base, e.g. `http://127.0.0.1:40123/client/v4`.
    pub url: String,
    pub addr: SocketAddr,
    runner: Option<Runner>,
}

/// Where the server runs.
#[derive(Debug)]
enum Runner {
    /// A task on the runtime that called `serve`.
    Task {
        stop: oneshot::Sender<()>,
        task: JoinHandle<std::io::Result<()>>,
    },
    /// A dedicated thread with its own runtime; `done` fires once that runtime is gone.
    Thread {
        stop: oneshot::Sender<Stop>,
        done: oneshot::Receiver<()>,
        thread: std::thread::JoinHandle<()>,
    },
}

/// How a detached server is asked to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// Stop accepting and let in-flight requests finish, bounded by [`SHUTDOWN_GRACE`].
    Graceful,
    /// Drop every connection now.
    Now,
}

impl RunningSim {
    /// Stops accepting, lets in-flight requests finish (bounded), and releases the port.
    pub async fn shutdown(mut self) {
        match self.runner.take() {
            Some(Runner::Task { stop, mut task }) => {
                let _ = stop.send(());
                if tokio::time::timeout(SHUTDOWN_GRACE, &mut task)
                    .await
                    .is_err()
                {
                    task.abort();
                }
            }
            Some(Runner::Thread { stop, done, thread }) => {
                let _ = stop.send(Stop::Graceful);
                // The thread bounds its own wait; it ends even if this wait were cut short.
                let _ = done.await;
                let _ = thread.join();
            }
            None => {}
        }
    }
}

impl Drop for RunningSim {
    fn drop(&mut self) {
        match self.runner.take() {
            Some(Runner::Task { stop, task }) => {
                let _ = stop.send(());
                task.abort();
            }
            Some(Runner::Thread { stop, thread, .. }) => {
                let _ = stop.send(Stop::Now);
                if thread.thread().id() != std::thread::current().id() {
                    let _ = thread.join();
                }
            }
            None => {}
        }
    }
}

fn refuse_off_loopback(addr: SocketAddr) -> std::io::Result<()> {
    if addr.ip().is_loopback() {
        return Ok(());
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        format!("refusing to listen on {addr}: the simulator binds only to loopback addresses"),
    ))
}

fn app(sim: &Simulator) -> axum::Router {
    axum::Router::new()
        .nest(API_BASE_PATH, sim.router())
        .fallback(super::handlers::unmatched(sim))
}

pub(super) async fn serve(sim: &Simulator, addr: SocketAddr) -> std::io::Result<RunningSim> {
    refuse_off_loopback(addr)?;
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let addr = listener.local_addr()?;
    let app = app(sim);
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                let _ = stopped.await;
            })
            .await
    });
    Ok(RunningSim {
        url: format!("http://{addr}{API_BASE_PATH}"),
        addr,
        runner: Some(Runner::Task { stop, task }),
    })
}

pub(super) fn serve_detached(sim: &Simulator, addr: SocketAddr) -> std::io::Result<RunningSim> {
    refuse_off_loopback(addr)?;
    let listener = std::net::TcpListener::bind(addr)?;
    listener.set_nonblocking(true)?;
    let addr = listener.local_addr()?;
    let app = app(sim);
    let (stop, stopped) = oneshot::channel::<Stop>();
    let (finished, done) = oneshot::channel::<()>();
    let (ready, started) = std::sync::mpsc::sync_channel::<std::io::Result<()>>(1);
    // The runtime is built and dropped on its own thread: dropping one inside the caller's
    // runtime would panic.
    let thread = std::thread::Builder::new()
        .name("cloudflare-sim".into())
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_multi_thread()
                .worker_threads(DETACHED_WORKERS)
                .thread_name("cloudflare-sim")
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime,
                Err(error) => {
                    let _ = ready.send(Err(error));
                    return;
                }
            };
            let _ = ready.send(Ok(()));
            runtime.block_on(run_detached(listener, app, stopped));
            runtime.shutdown_timeout(Duration::from_secs(1));
            let _ = finished.send(());
        })?;
    match started.recv() {
        Ok(Ok(())) => {}
        Ok(Err(error)) => {
            let _ = thread.join();
            return Err(error);
        }
        Err(_) => {
            let _ = thread.join();
            return Err(std::io::Error::other(
                "the simulator thread ended before serving",
            ));
        }
    }
    Ok(RunningSim {
        url: format!("http://{addr}{API_BASE_PATH}"),
        addr,
        runner: Some(Runner::Thread { stop, done, thread }),
    })
}

/// Serves until asked to stop; a lost handle counts as [`Stop::Now`].
async fn run_detached(
    listener: std::net::TcpListener,
    app: axum::Router,
    stopped: oneshot::Receiver<Stop>,
) {
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(listener) => listener,
        Err(error) => {
            tracing::warn!(%error, "cloudflare-sim could not serve its listener");
            return;
        }
    };
    let (graceful, graceful_signal) = oneshot::channel::<()>();
    let mut server = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                let _ = graceful_signal.await;
            })
            .await
    });
    tokio::select! {
        _ = &mut server => return,
        stop = stopped => {
            if stop == Ok(Stop::Graceful) {
                let _ = graceful.send(());
                if tokio::time::timeout(SHUTDOWN_GRACE, &mut server).await.is_ok() {
                    return;
                }
            }
        }
    }
    server.abort();
}
