//! A real local Kubernetes control plane (etcd, kube-apiserver, kube-controller-manager) for tests and the demo.
//!
//! Processes run on loopback only, with certificates minted in-process. A watchdog process
//! removes everything the harness started once the owning process is gone, however it ended.

mod apiserver;
mod binaries;
mod certs;
mod controller_manager;
mod etcd;
pub mod node;
mod plane;
mod ports;
mod process;
pub mod registration;
mod shared;
mod supervisor;
mod users;
mod webhook;

use std::path::PathBuf;
use std::time::Duration;

pub use apiserver::{AUDIT_LOG_FILE, AuditedRequest, audit_args, read_audit_log};
pub use binaries::{Binaries, K8S_VERSION};
pub use certs::{IssuedCert, TestCa};
pub use node::{Node, NodeOptions};
pub use plane::{ControlPlane, ControlPlaneOptions};
pub use ports::free_port;
pub use shared::shared;
pub use users::{TestUser, render_kubeconfig};

/// The command that builds the control-plane binaries, named in every "missing binary" error.
pub(crate) const BUILD_COMMAND: &str = "scripts/build-control-plane.sh";

/// Everything that can go wrong while starting or driving the local control plane.
#[derive(Debug, thiserror::Error)]
pub enum TestEnvError {
    #[error("{binary} not found at {path}: build it with `{BUILD_COMMAND}` (or set {env})")]
    MissingBinary {
        binary: &'static str,
        path: PathBuf,
        env: &'static str,
    },
    #[error("cannot locate the binary cache: neither CFTUNNEL_BIN_DIR nor HOME is set")]
    NoBinaryDir,
    #[error("I/O failed while {action}")]
    Io {
        action: String,
        #[source]
        source: std::io::Error,
    },
    #[error("certificate generation failed")]
    Certificate(#[from] rcgen::Error),
    #[error("{process} exited before it became ready ({status}); last log lines:\n{log_tail}")]
    ProcessExited {
        process: &'static str,
        status: String,
        log_tail: String,
    },
    #[error(
        "{process} not ready after {secs} s (last error: {last_error}); last log lines:\n{log_tail}"
    )]
    NotReady {
        process: &'static str,
        secs: u64,
        last_error: String,
        log_tail: String,
    },
    #[error("Kubernetes API call failed while {action}: {source}")]
    Kube {
        action: String,
        #[source]
        source: kube::Error,
    },
    #[error("invalid kubeconfig: {0}")]
    Kubeconfig(#[from] kube::config::KubeconfigError),
    #[error("JSON encoding failed")]
    Json(#[from] serde_json::Error),
    #[error("invalid webhook configuration: {0}")]
    InvalidWebhook(String),
    #[error("a client certificate carries at most {max} groups, got {got}")]
    TooManyGroups { max: usize, got: usize },
    #[error("timed out after {secs} s waiting for {what}")]
    Timeout { what: String, secs: u64 },
    #[error("a node runs only in a private network and mount namespace: {0}")]
    NotPrivate(String),
    #[error("`{command}` failed ({status}): {stderr}")]
    CommandFailed {
        command: String,
        status: String,
        stderr: String,
    },
    #[error("the shared control plane failed to start: {0}")]
    SharedStartFailed(String),
}

impl TestEnvError {
    pub(crate) fn io(action: impl Into<String>, source: std::io::Error) -> Self {
        TestEnvError::Io {
            action: action.into(),
            source,
        }
    }

    pub(crate) fn kube(action: impl Into<String>, source: kube::Error) -> Self {
        TestEnvError::Kube {
            action: action.into(),
            source,
        }
    }
}

/// Installs ring as rustls' process-wide provider; kube and reqwest are built without one.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Polls `check` every `interval` until it yields `Some`, or fails after `timeout`.
///
/// Kubernetes is eventually consistent, so tests wait for outcomes instead of sleeping.
pub async fn poll_until<T, F, Fut>(
    what: &str,
    timeout: Duration,
    interval: Duration,
    mut check: F,
) -> Result<T, TestEnvError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return Ok(value);
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(TestEnvError::Timeout {
                what: what.to_string(),
                secs: timeout.as_secs(),
            });
        }
        tokio::time::sleep(interval).await;
    }
}
