//! etcd on loopback with a throw-away data directory.

use std::path::Path;
use std::time::Duration;

use super::TestEnvError;
use super::free_port;
use super::process::{ManagedProcess, on_free_ports, wait_ready};

/// etcd normally answers `/health` within a second; the margin is for loaded CI machines.
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// A started etcd and the client URL the API server talks to.
#[derive(Debug)]
pub(crate) struct Etcd {
    pub process: ManagedProcess,
    pub client_url: String,
}

/// The command-line flags of a single-member, fsync-free etcd.
pub fn args(dir: &Path, client_port: u16, peer_port: u16) -> Vec<String> {
    let client = format!("http://127.0.0.1:{client_port}");
    let peer = format!("http://127.0.0.1:{peer_port}");
    vec![
        format!("--data-dir={}", dir.join("etcd").display()),
        format!("--listen-client-urls={client}"),
        format!("--advertise-client-urls={client}"),
        format!("--listen-peer-urls={peer}"),
        format!("--initial-advertise-peer-urls={peer}"),
        format!("--initial-cluster=default={peer}"),
        "--name=default".to_string(),
        "--unsafe-no-fsync".to_string(),
        "--log-level=warn".to_string(),
    ]
}

/// Starts etcd and waits until `/health` reports healthy, on other ports if its were taken.
pub async fn start(binary: &Path, dir: &Path) -> Result<Etcd, TestEnvError> {
    on_free_ports(|| async {
        // A start that failed may have left a data directory naming its ports.
        let _ = std::fs::remove_dir_all(dir.join("etcd"));
        start_once(binary, dir).await
    })
    .await
}

async fn start_once(binary: &Path, dir: &Path) -> Result<Etcd, TestEnvError> {
    let client_port = free_port()?;
    let peer_port = free_port()?;
    let mut process =
        ManagedProcess::spawn("etcd", binary, &args(dir, client_port, peer_port), dir)?;
    let client_url = format!("http://127.0.0.1:{client_port}");
    let health_url = format!("{client_url}/health");
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()
        .map_err(|e| TestEnvError::io("building an HTTP client", std::io::Error::other(e)))?;
    wait_ready(&mut process, READY_TIMEOUT, || async {
        let response = http
            .get(&health_url)
            .send()
            .await
            .map_err(|e| e.to_string())?;
        let body = response.text().await.map_err(|e| e.to_string())?;
        if body.contains(r#""health":"true""#) {
            Ok(())
        } else {
            Err(format!("unhealthy: {body}"))
        }
    })
    .await?;
    Ok(Etcd {
        process,
        client_url,
    })
}
