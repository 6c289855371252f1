//! A TCP forwarder from the node address to a loopback server, so pods can reach servers of the
//! test process (the Cloudflare simulator) that listen on loopback only.
//!
//! Pods cannot reach the node's `127.0.0.1`; the forwarder listens on [`NODE_IP`], an address
//! that exists only inside the private network namespace, so nothing outside can connect.

use std::net::SocketAddr;

use tokio::net::{TcpListener, TcpStream};

use super::super::TestEnvError;
use super::NODE_IP;
use super::namespace::require_private;

/// A running forwarder; it stops when dropped (or with its runtime).
#[derive(Debug)]
pub struct Forwarder {
    /// Where pods connect: `NODE_IP:<port>`.
    pub addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Forwards connections to `NODE_IP:<free port>` to `target` (a loopback address).
pub async fn forward_to_loopback(target: SocketAddr) -> Result<Forwarder, TestEnvError> {
    require_private()?;
    if !target.ip().is_loopback() {
        return Err(TestEnvError::NotPrivate(format!(
            "the forwarder only reaches loopback servers, not {target}"
        )));
    }
    let listener = TcpListener::bind((NODE_IP, 0))
        .await
        .map_err(|e| TestEnvError::io(format!("listening on {NODE_IP}"), e))?;
    let addr = listener
        .local_addr()
        .map_err(|e| TestEnvError::io("reading the forwarder's address", e))?;
    let task = tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            tokio::spawn(async move {
                if let Ok(mut outbound) = TcpStream::connect(target).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
            });
        }
    });
    Ok(Forwarder { addr, task })
}
