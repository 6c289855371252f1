//! kube-scheduler, so Deployments' pods land on the node as in any cluster.

use std::path::Path;
use std::time::Duration;

use super::super::TestEnvError;
use super::super::process::{ManagedProcess, free_port, wait_ready};

const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// Starts kube-scheduler (no leader election) and waits until its `/healthz` answers `ok`.
pub async fn start(
    binary: &Path,
    plane_dir: &Path,
    kubeconfig: &Path,
) -> Result<ManagedProcess, TestEnvError> {
    let port = free_port()?;
    let kubeconfig = kubeconfig.display();
    let args = vec![
        format!("--kubeconfig={kubeconfig}"),
        format!("--authentication-kubeconfig={kubeconfig}"),
        format!("--authorization-kubeconfig={kubeconfig}"),
        "--leader-elect=false".to_string(),
        "--bind-address=127.0.0.1".to_string(),
        format!("--secure-port={port}"),
        format!("--cert-dir={}", plane_dir.join("scheduler-certs").display()),
    ];
    let mut process = ManagedProcess::spawn("kube-scheduler", binary, &args, plane_dir)?;
    // Self-signed serving certificate; the probe sends nothing secret.
    let http = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .timeout(Duration::from_secs(2))
        .build()
        .map_err(|e| TestEnvError::io("building an HTTP client", std::io::Error::other(e)))?;
    let url = format!("https://127.0.0.1:{port}/healthz");
    wait_ready(&mut process, READY_TIMEOUT, || async {
        let response = http.get(&url).send().await.map_err(|e| e.to_string())?;
        let body = response.text().await.map_err(|e| e.to_string())?;
        if body.trim() == "ok" {
            Ok(())
        } else {
            Err(format!("healthz: {body}"))
        }
    })
    .await?;
    Ok(process)
}
