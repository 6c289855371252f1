//! kube-apiserver on loopback with client-certificate authentication and RBAC.

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::Api;

use super::TestEnvError;
use super::process::{ManagedProcess, wait_ready};

/// Upstream has seen 30+ s starts on slow runners; RBAC bootstrap dominates.
const READY_TIMEOUT: Duration = Duration::from_secs(120);

/// Files the API server reads, all inside the control-plane directory.
#[derive(Debug, Clone)]
pub struct ApiServerFiles {
    pub ca_cert: PathBuf,
    pub serving_cert: PathBuf,
    pub serving_key: PathBuf,
    pub service_account_key: PathBuf,
    pub service_account_public_key: PathBuf,
    pub cert_dir: PathBuf,
    /// With a node: flags replacing the loopback-only network, authorization and admission
    /// defaults (see `node::apiserver_flags`).
    pub node_flags: Option<Vec<String>>,
}

/// The command-line flags; `extra` is appended last so callers can add admission plugins etc.
pub fn args(files: &ApiServerFiles, etcd_url: &str, port: u16, extra: &[String]) -> Vec<String> {
    let mut args = vec![
        format!("--etcd-servers={etcd_url}"),
        format!("--secure-port={port}"),
        format!("--cert-dir={}", files.cert_dir.display()),
        format!("--tls-cert-file={}", files.serving_cert.display()),
        format!("--tls-private-key-file={}", files.serving_key.display()),
        format!("--client-ca-file={}", files.ca_cert.display()),
        format!("--service-account-issuer=https://127.0.0.1:{port}/"),
        format!(
            "--service-account-key-file={}",
            files.service_account_public_key.display()
        ),
        format!(
            "--service-account-signing-key-file={}",
            files.service_account_key.display()
        ),
        "--service-cluster-ip-range=10.96.0.0/16".to_string(),
        "--allow-privileged=true".to_string(),
        // Endpoints refuse loopback addresses; the reconciler would only log errors.
        "--endpoint-reconciler-type=none".to_string(),
    ];
    match &files.node_flags {
        Some(flags) => args.extend(flags.iter().cloned()),
        None => args.extend([
            "--bind-address=127.0.0.1".to_string(),
            // Without it the address comes from the default route, and a machine may have none.
            "--advertise-address=127.0.0.1".to_string(),
            "--authorization-mode=RBAC".to_string(),
            // No controller creates the `default` ServiceAccount, so the plugin would reject every Pod.
            "--disable-admission-plugins=ServiceAccount".to_string(),
        ]),
    }
    args.extend(extra.iter().cloned());
    args
}

/// Starts kube-apiserver and waits for `/readyz` and the `default` namespace.
pub async fn start(
    binary: &Path,
    dir: &Path,
    files: &ApiServerFiles,
    etcd_url: &str,
    port: u16,
    extra: &[String],
    client: kube::Client,
) -> Result<ManagedProcess, TestEnvError> {
    let mut process = ManagedProcess::spawn(
        "kube-apiserver",
        binary,
        &args(files, etcd_url, port, extra),
        dir,
    )?;
    wait_ready(&mut process, READY_TIMEOUT, || async {
        let request = http::Request::get("/readyz")
            .body(Vec::new())
            .map_err(|e| e.to_string())?;
        // 401/403 come back as errors: before RBAC bootstrap even the admin may be refused.
        let body = client
            .request_text(request)
            .await
            .map_err(|e| e.to_string())?;
        if body.trim() == "ok" {
            Ok(())
        } else {
            Err(format!("readyz: {body}"))
        }
    })
    .await?;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    wait_ready(&mut process, READY_TIMEOUT, || async {
        match namespaces.get_opt("default").await {
            Ok(Some(_)) => Ok(()),
            Ok(None) => Err("namespace default does not exist yet".to_string()),
            Err(e) => Err(e.to_string()),
        }
    })
    .await?;
    Ok(process)
}
