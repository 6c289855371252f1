//! kube-scheduler, so Deployments' pods land on the node as in any cluster.

use std::path::Path;
use std::time::Duration;

use super::super::TestEnvError;
use super::super::free_port;
use super::super::process::{ManagedProcess, on_free_ports, wait_healthz};

const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// Starts kube-scheduler (no leader election) and waits until its `/healthz` answers `ok` (on
/// another port if its was taken).
pub async fn start(
    binary: &Path,
    plane_dir: &Path,
    kubeconfig: &Path,
) -> Result<ManagedProcess, TestEnvError> {
    on_free_ports(|| start_once(binary, plane_dir, kubeconfig)).await
}

async fn start_once(
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
    let url = format!("https://127.0.0.1:{port}/healthz");
    wait_healthz(&mut process, READY_TIMEOUT, &url).await?;
    Ok(process)
}
