//! What `cftunnel run` does before its webhook and reconcilers start (docs/design.md §7.1, §7.2, §1.2):
//! check that the installed CRDs are current (logged, never fatal), make the serving certificate
//! available (self-managed mode: created, injected, written to the TLS files, then renewed in the
//! background) and start the storage-version migration in the background — it depends on the
//! conversion webhook, which only serves once this returns.
pub(crate) mod crd_check;
pub mod migrate;

use std::path::Path;
use std::time::Duration;

use kube::Client;

use crate::certs::{CertManager, CertSettings, TlsFiles};
use cftunnel_types::crds::ConversionService;

/// First-pass attempts before `run` gives up (a missing permission or manifest fails every time).
const FIRST_PASS_ATTEMPTS: u32 = 5;

/// Where the webhook's serving certificate comes from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum CertificateMode {
    /// A CA and serving certificate kept in Secrets in the webhook namespace; the CA is
    /// injected into caBundle of the webhook configurations and the CRD conversion.
    #[default]
    SelfManaged,
    /// Serve --tls-cert-file/--tls-key-file as they are (e.g. a cert-manager Secret mount);
    /// caBundle is someone else's job (cert-manager's CA injector).
    Files,
}

/// Flags of `cftunnel run` about installation: certificates and the webhook's identity.
#[derive(Debug, Clone, clap::Args)]
pub struct StartupArgs {
    /// Where the serving certificate comes from.
    #[arg(long, value_enum, default_value_t = CertificateMode::SelfManaged, env = "CFTUNNEL_CERTIFICATE_MODE")]
    pub certificate_mode: CertificateMode,
    /// Namespace of the webhook Service and of the certificate Secrets (cftunnel's own).
    #[arg(long, env = "POD_NAMESPACE", default_value = "cftunnel-system")]
    pub webhook_namespace: String,
    /// Name of the webhook Service the API server calls for CRD conversion (it publishes
    /// not-ready addresses).
    #[arg(long, default_value = "cftunnel-webhook")]
    pub webhook_service: String,
    /// Name of the webhook Service the API server calls for admission (ready replicas only).
    #[arg(long, default_value = "cftunnel-admission")]
    pub admission_service: String,
    /// Name of the validating and of the mutating webhook configuration.
    #[arg(long, default_value = "cftunnel")]
    pub webhook_configuration: String,
    /// How often the self-managed certificates and the injected caBundle are re-checked.
    #[arg(long, default_value = "10m", value_parser = cftunnel_policy::rules::duration::parse_duration)]
    pub certificate_check_interval: Duration,
}

impl StartupArgs {
    /// The conversion Service the CRDs should call.
    pub(crate) fn conversion_service(&self) -> ConversionService {
        ConversionService {
            namespace: self.webhook_namespace.clone(),
            name: self.webhook_service.clone(),
            ..ConversionService::default()
        }
    }

    /// Certificate settings for this webhook identity.
    pub(crate) fn cert_settings(&self) -> CertSettings {
        CertSettings {
            namespace: self.webhook_namespace.clone(),
            service: self.webhook_service.clone(),
            admission_service: self.admission_service.clone(),
            webhook_configuration: self.webhook_configuration.clone(),
            ..CertSettings::default()
        }
    }
}

/// Runs the start-up checks; returns once the serving certificate files are in place.
pub async fn prepare(
    process: &crate::scope::Scope,
    client: &Client,
    args: &StartupArgs,
    tls_cert_file: &Path,
    tls_key_file: &Path,
) -> anyhow::Result<()> {
    crd_check::check_installed_crds(client, &args.conversion_service()).await;
    if args.certificate_mode == CertificateMode::SelfManaged {
        let manager = CertManager::new(client.clone(), args.cert_settings());
        let files = TlsFiles {
            cert: tls_cert_file.to_owned(),
            key: tls_key_file.to_owned(),
        };
        first_pass(&manager, &files).await?;
        process.spawn(
            "certificates",
            manager.run(files, args.certificate_check_interval),
        );
    }
    let crds = cftunnel_types::crds::CONVERTED_CRDS
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    process.spawn("storage-migration", migrate::run(client.clone(), crds));
    Ok(())
}

/// The first certificate pass, retried a few times (the API server may be briefly unreachable).
async fn first_pass(manager: &CertManager, files: &TlsFiles) -> anyhow::Result<()> {
    let mut wait = Duration::from_secs(1);
    for attempt in 1..=FIRST_PASS_ATTEMPTS {
        match manager.reconcile_into(files).await {
            Ok(()) => {
                tracing::info!(cert = %files.cert.display(), "webhook serving certificate in place");
                return Ok(());
            }
            Err(error) if attempt < FIRST_PASS_ATTEMPTS => {
                tracing::warn!(attempt, %error, "webhook certificates not ready; retrying");
                tokio::time::sleep(wait).await;
                wait *= 2;
            }
            Err(error) => return Err(error.into()),
        }
    }
    Ok(())
}
