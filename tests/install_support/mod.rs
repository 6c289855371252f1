//! Shared by the installation tests: the shipped namespaces and RBAC installed for real, a
//! client acting as cftunnel's ServiceAccount (so every call is checked against
//! manifests/rbac.yaml), YAML helpers and a look at what etcd holds.
#![allow(dead_code)] // each test binary uses its own subset

use std::path::PathBuf;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use cftunnel_testenv::{ControlPlane, poll_until};
use k8s_openapi::api::core::v1::Secret;
use kube::{Api, Client};
use serde::Deserialize as _;
use serde_json::Value;

use crate::common::kubectl;

/// cftunnel's ServiceAccount as the API server sees it.
pub const OPERATOR_USER: &str = "system:serviceaccount:cftunnel-system:cftunnel";
pub const NAMESPACE: &str = "cftunnel-system";
pub const WAIT: Duration = Duration::from_secs(60);
pub const POLL: Duration = Duration::from_millis(250);

/// A path inside the repository.
pub fn repo_path(relative: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(relative)
}

/// Runs kubectl and fails the test with its output when it fails.
pub fn kubectl_ok(plane: &ControlPlane, args: &[&str], stdin: &str) -> String {
    let (ok, printed) = kubectl(plane, args, stdin);
    assert!(ok, "kubectl {args:?} failed:\n{printed}");
    printed
}

/// Applies manifests/namespace.yaml and manifests/rbac.yaml for real, then waits until the
/// ServiceAccount's permissions are in effect (the authorizer reads RBAC from an informer).
pub async fn install_namespaces_and_rbac(plane: &ControlPlane) {
    for file in ["manifests/namespace.yaml", "manifests/rbac.yaml"] {
        let path = repo_path(file);
        kubectl_ok(plane, &["apply", "-f", &path.to_string_lossy()], "");
    }
    let secrets: Api<Secret> = Api::namespaced(operator_client(plane), NAMESPACE);
    poll_until("cftunnel's RBAC to take effect", WAIT, POLL, || async {
        secrets.list(&Default::default()).await.ok().map(|_| ())
    })
    .await
    .expect("RBAC in effect");
}

/// A client authenticated as cftunnel's ServiceAccount, bound to the current runtime.
pub fn operator_client(plane: &ControlPlane) -> Client {
    plane
        .user(OPERATOR_USER, &["system:serviceaccounts"])
        .expect("operator user")
        .client()
        .expect("operator client")
}

/// Every non-empty document of a multi-document YAML text.
pub fn documents(yaml: &str) -> Vec<Value> {
    serde_yaml_ng::Deserializer::from_str(yaml)
        .map(|doc| Value::deserialize(doc).expect("valid YAML document"))
        .filter(|doc| !doc.is_null())
        .collect()
}

/// The documents of `kind` (and `name`, when given).
pub fn find<'a>(docs: &'a [Value], kind: &str, name: Option<&str>) -> Vec<&'a Value> {
    docs.iter()
        .filter(|d| d["kind"] == kind)
        .filter(|d| name.is_none_or(|n| d["metadata"]["name"] == n))
        .collect()
}

/// The `apiVersion` etcd holds for `key` (e.g.
/// `/registry/networking.cfargotunnel.com/tunnels/<ns>/<name>`), read through etcd's JSON
/// gateway: the API server stores custom resources as JSON in their storage version.
pub async fn stored_api_version(plane: &ControlPlane, key: &str) -> Option<String> {
    let body = serde_json::json!({"key": STANDARD.encode(key)});
    let response: Value = reqwest::Client::new()
        .post(format!("{}/v3/kv/range", plane.etcd_url()))
        .json(&body)
        .send()
        .await
        .ok()?
        .json()
        .await
        .ok()?;
    let value = response["kvs"][0]["value"].as_str()?;
    let stored: Value = serde_json::from_slice(&STANDARD.decode(value).ok()?).ok()?;
    stored["apiVersion"].as_str().map(str::to_owned)
}

/// `cftunnel run` with its webhook and health servers on free loopback ports, serving (or, with
/// self-managed certificates, writing) `<dir>/tls.crt` and `<dir>/tls.key`, acting as the user
/// of `kubeconfig`; stderr goes to the returned log path. Add flags and environment, then spawn.
pub fn cftunnel_run(
    dir: &std::path::Path,
    kubeconfig: &std::path::Path,
) -> (std::process::Command, PathBuf) {
    cftunnel_run_on(dir, kubeconfig, "127.0.0.1:0", "cftunnel.log")
}

/// [`cftunnel_run`] with its health server on `health` (e.g. a port the test reads `/readyz`
/// from) and its log in `<dir>/<log>`.
pub fn cftunnel_run_on(
    dir: &std::path::Path,
    kubeconfig: &std::path::Path,
    health: &str,
    log: &str,
) -> (std::process::Command, PathBuf) {
    let binary = std::path::Path::new(env!("CARGO_BIN_EXE_cftunnel"));
    cftunnel_run_from(binary, dir, kubeconfig, health, log)
}

/// [`cftunnel_run_on`] running `binary` (another build of cftunnel, e.g. the pinned earlier one
/// tests/upgrade.rs upgrades from) instead of this tree's.
pub fn cftunnel_run_from(
    binary: &std::path::Path,
    dir: &std::path::Path,
    kubeconfig: &std::path::Path,
    health: &str,
    log: &str,
) -> (std::process::Command, PathBuf) {
    cftunnel_run_listening(binary, dir, kubeconfig, "127.0.0.1:0", health, log)
}

/// Like [`cftunnel_run_from`], the webhook listening on `webhook`.
pub fn cftunnel_run_listening(
    binary: &std::path::Path,
    dir: &std::path::Path,
    kubeconfig: &std::path::Path,
    webhook: &str,
    health: &str,
    log: &str,
) -> (std::process::Command, PathBuf) {
    let log_path = dir.join(log);
    let log = std::fs::File::create(&log_path).expect("log file");
    let mut command = std::process::Command::new(binary);
    command
        .args(["run", "--webhook-listen", webhook])
        .args(["--health-listen", health, "--tls-cert-file"])
        .arg(dir.join("tls.crt"))
        .arg("--tls-key-file")
        .arg(dir.join("tls.key"))
        .env("KUBECONFIG", kubeconfig)
        .stdout(std::process::Stdio::null())
        .stderr(log);
    (command, log_path)
}

/// Installs the Gateway API CRDs as the chart ships them (`--server-side`: the HTTPRoute CRD
/// is close to the limit of client-side apply's annotation) and waits until they are served.
pub fn install_gateway_api_crds(plane: &ControlPlane) {
    let file = repo_path("charts/cftunnel/files/gateway-api-crds.yaml");
    kubectl_ok(
        plane,
        &["apply", "--server-side", "-f", &file.to_string_lossy()],
        "",
    );
    let crds: Vec<String> = [
        "gatewayclasses",
        "gateways",
        "httproutes",
        "grpcroutes",
        "referencegrants",
        "tcproutes",
        "udproutes",
    ]
    .iter()
    .map(|kind| format!("crd/{kind}.gateway.networking.k8s.io"))
    .collect();
    let mut args = vec!["wait", "--for=condition=Established", "--timeout=60s"];
    args.extend(crds.iter().map(String::as_str));
    kubectl_ok(plane, &args, "");
}

/// A temporary directory holding `tls.crt` and `tls.key`, a serving certificate for 127.0.0.1
/// from the plane's CA (for `cftunnel run` processes serving files).
pub fn serving_cert_dir(plane: &ControlPlane) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    let cert = plane
        .ca()
        .issue_server_cert(&["127.0.0.1"])
        .expect("serving cert");
    std::fs::write(dir.path().join("tls.crt"), &cert.cert_pem).expect("write cert");
    std::fs::write(dir.path().join("tls.key"), &cert.key_pem).expect("write key");
    dir
}
