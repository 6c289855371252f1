//! kube-controller-manager running only the controllers tests need: Deployments, ReplicaSets, GC,
//! namespaces, EndpointSlices.

use std::path::Path;
use std::time::Duration;

use super::TestEnvError;
use super::free_port;
use super::process::{ManagedProcess, on_free_ports, wait_healthz};

const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// Canonical controller names (the short names are kept only as aliases since 1.27).
pub(crate) const CONTROLLERS: &str = "garbage-collector-controller,deployment-controller,replicaset-controller,namespace-controller,endpointslice-controller";

/// With a node, also: ServiceAccounts and the `kube-root-ca.crt` ConfigMap (pods' API
/// credentials), endpoints for Services, PodDisruptionBudgets' status (the Eviction API reads it)
/// removal of pods whose node is gone, and the node's `not-ready` taint lifted once kubelet
/// reports Ready (kubelet registers the node tainted; without this nothing is scheduled).
pub(crate) const NODE_CONTROLLERS: &str = "serviceaccount-controller,root-ca-certificate-publisher-controller,\
endpoints-controller,endpointslice-controller,disruption-controller,pod-garbage-collector-controller,node-lifecycle-controller";

/// The command-line flags; its own kubeconfig also serves delegated authn/authz of `/healthz`.
/// `root_ca` (the cluster CA, published to every namespace) is given when a node runs pods.
pub fn args(dir: &Path, kubeconfig: &Path, port: u16, root_ca: Option<&Path>) -> Vec<String> {
    let kubeconfig = kubeconfig.display();
    let controllers = match root_ca {
        Some(_) => format!("{CONTROLLERS},{NODE_CONTROLLERS}"),
        None => CONTROLLERS.to_string(),
    };
    let mut args = vec![
        format!("--kubeconfig={kubeconfig}"),
        format!("--authentication-kubeconfig={kubeconfig}"),
        format!("--authorization-kubeconfig={kubeconfig}"),
        "--leader-elect=false".to_string(),
        format!("--controllers={controllers}"),
        "--use-service-account-credentials=false".to_string(),
        "--bind-address=127.0.0.1".to_string(),
        format!("--secure-port={port}"),
        // Self-signed serving certificate goes here instead of /var/run/kubernetes.
        format!("--cert-dir={}", dir.join("kcm-certs").display()),
    ];
    if let Some(ca) = root_ca {
        args.push(format!("--root-ca-file={}", ca.display()));
    }
    args
}

/// Starts kube-controller-manager and waits until its `/healthz` answers `ok` (on another port
/// if its was taken).
pub async fn start(
    binary: &Path,
    dir: &Path,
    kubeconfig: &Path,
    root_ca: Option<&Path>,
) -> Result<ManagedProcess, TestEnvError> {
    on_free_ports(|| async {
        let port = free_port()?;
        let mut process = ManagedProcess::spawn(
            "kube-controller-manager",
            binary,
            &args(dir, kubeconfig, port, root_ca),
            dir,
        )?;
        let url = format!("https://127.0.0.1:{port}/healthz");
        wait_healthz(&mut process, READY_TIMEOUT, &url).await?;
        Ok(process)
    })
    .await
}
