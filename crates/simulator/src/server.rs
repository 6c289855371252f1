//! Serving the simulator on a loopback port under `/client/v4`.
use std::net::SocketAddr;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::Simulator;

/// Where Cloudflare's API base path sits, so clients only swap the host.
pub(crate) const API_BASE_PATH: &str = "/client/v4";

/// How long `shutdown` waits for in-flight requests before giving up on them.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// A simulator listening on a socket; stopped on drop or by `shutdown().await`.
#[derive(Debug)]
pub struct RunningSim {
    /// The API base, e.g. `http://127.0.0.1:40123/client/v4`.
    pub url: String,
    pub addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<std::io::Result<()>>>,
}

impl RunningSim {
    /// Stops accepting, lets in-flight requests finish (bounded), and releases the port.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(mut task) = self.task.take()
            && tokio::time::timeout(SHUTDOWN_GRACE, &mut task)
                .await
                .is_err()
        {
            task.abort();
        }
    }
}

impl Drop for RunningSim {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

pub(super) async fn serve(sim: &Simulator, addr: SocketAddr) -> std::io::Result<RunningSim> {
    if !addr.ip().is_loopback() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("refusing to listen on {addr}: the simulator binds only to loopback addresses"),
        ));
    }
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let addr = listener.local_addr()?;
    let app = axum::Router::new()
        .nest(API_BASE_PATH, sim.router())
        .fallback(super::routes::unmatched(sim));
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
        stop: Some(stop),
        task: Some(task),
    })
}
