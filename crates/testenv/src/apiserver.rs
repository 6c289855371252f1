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
pub(crate) struct ApiServerFiles {
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

/// File names of the audit policy and log inside the directory given to [`audit_args`].
pub(crate) const AUDIT_POLICY_FILE: &str = "audit-policy.yaml";
pub const AUDIT_LOG_FILE: &str = "audit.log";

/// Flags that make the API server log every request (user, verb, resource, response code) as
/// JSON lines to `<dir>/audit.log`; writes the policy to `<dir>/audit-policy.yaml`. Pass them in
/// `ControlPlaneOptions::extra_apiserver_args`; read the log with [`read_audit_log`].
///
/// Level `Metadata` records no bodies (no Secret data). Requests log at `ResponseComplete`;
/// watches also at `ResponseStarted`, so a watch is in the log while it is still open.
pub fn audit_args(dir: &Path) -> Result<Vec<String>, TestEnvError> {
    let policy = dir.join(AUDIT_POLICY_FILE);
    let text = "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n  - level: Metadata\n";
    std::fs::write(&policy, text)
        .map_err(|e| TestEnvError::io(format!("writing {}", policy.display()), e))?;
    Ok(vec![
        format!("--audit-policy-file={}", policy.display()),
        format!("--audit-log-path={}", dir.join(AUDIT_LOG_FILE).display()),
        "--audit-log-format=json".to_string(),
        "--audit-log-mode=blocking".to_string(),
    ])
}

/// One request as the audit log records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditedRequest {
    pub user: String,
    pub verb: String,
    /// `resource` or `resource/subresource`, with its API group (`apps/deployments`), empty for
    /// non-resource URLs.
    pub resource: String,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub code: u16,
    pub uri: String,
}

/// Every request in the audit log `path` (lines that are not audit events are skipped).
pub fn read_audit_log(path: &Path) -> Result<Vec<AuditedRequest>, TestEnvError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| TestEnvError::io(format!("reading {}", path.display()), e))?;
    Ok(text
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .map(|event| {
            let object = &event["objectRef"];
            let text = |v: &serde_json::Value| v.as_str().map(str::to_owned);
            let mut resource = text(&object["resource"]).unwrap_or_default();
            if let Some(sub) = text(&object["subresource"]) {
                resource = format!("{resource}/{sub}");
            }
            if let Some(group) = text(&object["apiGroup"]).filter(|g| !g.is_empty()) {
                resource = format!("{group}/{resource}");
            }
            AuditedRequest {
                user: text(&event["user"]["username"]).unwrap_or_default(),
                verb: text(&event["verb"]).unwrap_or_default(),
                resource,
                namespace: text(&object["namespace"]),
                name: text(&object["name"]),
                code: event["responseStatus"]["code"]
                    .as_u64()
                    .and_then(|c| u16::try_from(c).ok())
                    .unwrap_or(0),
                uri: text(&event["requestURI"]).unwrap_or_default(),
            }
        })
        .collect())
}
