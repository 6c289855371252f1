//! Self-managed webhook certificates (docs/design.md §7.1), the default of `cftunnel run`.
//!
//! - A long-lived CA is kept in the Secret `cftunnel-webhook-ca` (`tls.crt`, `tls.key`, and
//!   `ca.crt`, the trust bundle). It is *created* (POST), never applied blindly: when replicas
//!   start together one create wins, the others get 409 AlreadyExists and read the winner's CA.
//! - Every later write of a certificate Secret is a server-side apply carrying the
//!   `resourceVersion` that was read, so two replicas renewing at once cannot both win: the loser
//!   gets 409 Conflict and reads the winner's result.
//! - The trust bundle goes into `caBundle` of the validating and mutating webhook
//!   configurations and of the conversion webhook of the converted CRDs (server-side apply
//!   owning only `caBundle`, compared first). During a CA rotation the bundle holds the new and
//!   the replaced CA, so a serving certificate signed by either is trusted; the replaced CA
//!   leaves the bundle when it expires.
//! - The serving certificate for `<service>.<namespace>.svc` is kept in `cftunnel-webhook-tls`,
//!   re-issued when a third of its lifetime is left, when the CA changed or the names changed,
//!   and written to the `--tls-cert-file`/`--tls-key-file` paths, which the webhook re-reads
//!   (so the same reload path serves self-managed and cert-manager certificates).
//!
//! Order of one pass: CA, bundle injection, serving certificate, files — a new CA is trusted
//! before anything it signed is served. Passes repeat every check interval on every replica;
//! private keys never appear in logs, events or errors.
mod inject;
mod issue;
pub mod lifetime;
mod store;

use std::path::PathBuf;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Secret;
use kube::{Api, Client};

pub use inject::inject_ca_bundle;
pub(crate) use issue::write_file;
pub use issue::{
    CertGenError, CertificateAuthority, DevCerts, ServingCert, default_hosts, generate_dev_certs,
    issue_serving_cert,
};
pub use store::{CaMaterial, ensure_ca, ensure_serving};

/// Field manager of the certificate Secrets and of `caBundle`.
pub const FIELD_MANAGER: &str = "cftunnel-certs";
/// CA lifetime: long, so rotations are rare.
pub(crate) const CA_VALIDITY: Duration = Duration::from_secs(10 * 365 * 24 * 3600);
/// Serving certificate lifetime.
pub(crate) const SERVING_VALIDITY: Duration = Duration::from_secs(365 * 24 * 3600);
/// How often a replica re-checks its certificates and the injected bundle.
pub const DEFAULT_CHECK_INTERVAL: Duration = Duration::from_secs(10 * 60);
/// Reads and writes of one Secret before a pass gives up and retries later.
const WRITE_ATTEMPTS: usize = 5;

/// Where the certificate material lives and whom it is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertSettings {
    /// cftunnel's own namespace: the Secrets and the webhook Service.
    pub namespace: String,
    /// The webhook Service the API server calls for CRD conversion.
    pub service: String,
    /// The webhook Service the API server calls for admission (ready replicas only).
    pub admission_service: String,
    /// Secret holding the CA and the trust bundle.
    pub ca_secret: String,
    /// Secret holding the serving certificate.
    pub serving_secret: String,
    /// Name of the validating and of the mutating webhook configuration.
    pub webhook_configuration: String,
    /// CRDs whose conversion webhook gets the bundle.
    pub converted_crds: Vec<String>,
    pub ca_validity: Duration,
    pub serving_validity: Duration,
}

impl Default for CertSettings {
    fn default() -> Self {
        Self {
            namespace: "cftunnel-system".into(),
            service: "cftunnel-webhook".into(),
            admission_service: "cftunnel-admission".into(),
            ca_secret: "cftunnel-webhook-ca".into(),
            serving_secret: "cftunnel-webhook-tls".into(),
            webhook_configuration: "cftunnel".into(),
            converted_crds: cftunnel_types::crds::CONVERTED_CRDS
                .iter()
                .map(|s| (*s).to_owned())
                .collect(),
            ca_validity: CA_VALIDITY,
            serving_validity: SERVING_VALIDITY,
        }
    }
}

impl CertSettings {
    /// The names the serving certificate must carry: the API server calls
    /// `<service>.<namespace>.svc` for conversion and admission.
    pub fn hosts(&self) -> Vec<String> {
        vec![
            format!("{}.{}.svc", self.service, self.namespace),
            format!("{}.{}.svc", self.admission_service, self.namespace),
        ]
    }
}

/// Files the webhook serves from and re-reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// Why a certificate pass failed. Messages name objects and files, never key material.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    #[error("cannot {action}: {source}{}", rbac_hint(source))]
    Kube {
        action: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot create a certificate: {0}")]
    Generate(#[from] CertGenError),
    #[error(
        "Secret {namespace}/{name} kept changing while it was written ({attempts} attempts); another replica is renewing it, retrying later"
    )]
    Contended {
        namespace: String,
        name: String,
        attempts: usize,
    },
    #[error(
        "{kind} {name} does not exist; install cftunnel's manifests (kubectl apply -k manifests/ or the Helm chart) so its caBundle can be filled in"
    )]
    MissingTarget { kind: String, name: String },
    #[error("cannot write {path}: {source}")]
    WriteFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Names the fix when the API server refused for lack of permission.
fn rbac_hint(error: &kube::Error) -> &'static str {
    match error {
        kube::Error::Api(status) if status.is_forbidden() => {
            "; cftunnel's ServiceAccount needs the permissions of manifests/rbac.yaml"
        }
        _ => "",
    }
}

impl CertError {
    /// Short stable label for metrics and logs.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Self::Kube { .. } => "kube",
            Self::Generate(_) => "generate",
            Self::Contended { .. } => "contended",
            Self::MissingTarget { .. } => "missing_target",
            Self::WriteFile { .. } => "write_file",
        }
    }

    pub(crate) fn kube(action: impl Into<String>, source: kube::Error) -> Self {
        Self::Kube {
            action: action.into(),
            source,
        }
    }
}

/// Keeps one replica's certificates current.
#[derive(Clone)]
pub struct CertManager {
    client: Client,
    settings: CertSettings,
}

impl CertManager {
    pub fn new(client: Client, settings: CertSettings) -> Self {
        Self { client, settings }
    }

    pub fn settings(&self) -> &CertSettings {
        &self.settings
    }

    /// One pass at `now`: the CA (created or rotated), its bundle injected, the serving pair
    /// (issued or renewed). Idempotent; safe to run on several replicas at once.
    pub async fn reconcile(&self, now: Timestamp) -> Result<ServingCert, CertError> {
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), &self.settings.namespace);
        let ca = ensure_ca(&secrets, &self.settings, now).await?;
        inject_ca_bundle(&self.client, &self.settings, &ca.bundle).await?;
        ensure_serving(&secrets, &self.settings, &ca, now).await
    }

    /// One pass, then the pair written to `files` when it differs from what they hold.
    pub(crate) async fn reconcile_into(&self, files: &TlsFiles) -> Result<(), CertError> {
        let pair = self.reconcile(Timestamp::now()).await?;
        let files = files.clone();
        let cert = files.cert.clone();
        tokio::task::spawn_blocking(move || write_pair(&files, &pair))
            .await
            .map_err(|e| CertError::WriteFile {
                path: cert,
                source: std::io::Error::other(e),
            })?
    }

    /// Repeats [`CertManager::reconcile_into`] every `interval` (sooner after a failure) until
    /// the process ends.
    pub async fn run(self, files: TlsFiles, interval: Duration) {
        let mut wait = interval;
        loop {
            tokio::time::sleep(wait).await;
            wait = match self.reconcile_into(&files).await {
                Ok(()) => interval,
                Err(error) => {
                    tracing::warn!(%error, "webhook certificates not checked; retrying in a minute");
                    interval.min(Duration::from_secs(60))
                }
            };
        }
    }
}

/// Writes the key, then the certificate, each only when it differs (the webhook re-reads both
/// and keeps serving the old pair until they match).
fn write_pair(files: &TlsFiles, pair: &ServingCert) -> Result<(), CertError> {
    for (path, content, mode) in [
        (&files.key, &pair.key_pem, 0o600),
        (&files.cert, &pair.cert_pem, 0o644),
    ] {
        if std::fs::read(path).is_ok_and(|on_disk| on_disk == content.as_bytes()) {
            continue;
        }
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|source| CertError::WriteFile {
                path: dir.to_owned(),
                source,
            })?;
        }
        crate::certs::write_file(path, content, mode).map_err(|e| match e {
            CertGenError::Write { path, source } => CertError::WriteFile { path, source },
            other => CertError::Generate(other),
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::certs::{CertificateAuthority, issue_serving_cert};

    #[test]
    fn hosts_name_the_service_in_its_namespace() {
        let settings = CertSettings {
            namespace: "ops".into(),
            service: "hook".into(),
            admission_service: "admit".into(),
            ..CertSettings::default()
        };
        assert_eq!(
            settings.hosts(),
            vec!["hook.ops.svc".to_owned(), "admit.ops.svc".to_owned()]
        );
    }

    #[test]
    fn write_pair_writes_changed_files_only_and_keeps_the_key_private() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().expect("tempdir");
        let files = TlsFiles {
            cert: dir.path().join("tls/tls.crt"),
            key: dir.path().join("tls/tls.key"),
        };
        let ca = CertificateAuthority::generate(Duration::from_secs(3600)).expect("ca");
        let pair =
            issue_serving_cert(&ca, &["a.b.svc".into()], Duration::from_secs(3600)).expect("pair");
        write_pair(&files, &pair).expect("written");
        assert_eq!(
            std::fs::read_to_string(&files.cert).ok(),
            Some(pair.cert_pem.clone())
        );
        assert_eq!(
            std::fs::read_to_string(&files.key).ok(),
            Some(pair.key_pem.clone())
        );
        let mode = std::fs::metadata(&files.key).map(|m| m.permissions().mode() & 0o777);
        assert_eq!(mode.ok(), Some(0o600));
        let inode = |p: &PathBuf| {
            use std::os::unix::fs::MetadataExt as _;
            std::fs::metadata(p).map(|m| m.ino()).ok()
        };
        let before = inode(&files.cert);
        write_pair(&files, &pair).expect("rewritten");
        assert_eq!(
            inode(&files.cert),
            before,
            "an unchanged file is not replaced"
        );
    }

    #[test]
    fn errors_never_quote_key_material() {
        let error = CertError::Contended {
            namespace: "cftunnel-system".into(),
            name: "cftunnel-webhook-ca".into(),
            attempts: 5,
        };
        assert_eq!(
            error.to_string(),
            "Secret cftunnel-system/cftunnel-webhook-ca kept changing while it was written (5 attempts); another replica is renewing it, retrying later"
        );
        assert_eq!(error.metric_label(), "contended");
    }

    #[test]
    fn only_a_refusal_points_at_the_rbac_manifest() {
        let status = |code: u16, reason: &str| {
            let mut status = kube::core::Status::failure("no", reason);
            status.code = code;
            kube::Error::Api(Box::new(status))
        };
        let forbidden = CertError::kube("read Secret a/b", status(403, "Forbidden"));
        assert!(
            forbidden
                .to_string()
                .ends_with("needs the permissions of manifests/rbac.yaml")
        );
        let missing = CertError::kube("read Secret a/b", status(500, "InternalError"));
        assert!(!missing.to_string().contains("rbac"), "{missing}");
    }
}
