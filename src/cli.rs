//! Command-line interface: one binary, one subcommand per role.
use std::io::Write;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::api::crds::{self, ConversionService};
use crate::telemetry::{self, LogFormat};

#[derive(Debug, Parser)]
#[command(
    name = "cftunnel",
    version,
    about = "Expose Kubernetes Services through Cloudflare Tunnels"
)]
pub struct Cli {
    /// Log format (logs go to stderr).
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text, env = "CFTUNNEL_LOG_FORMAT")]
    pub log_format: LogFormat,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print the CustomResourceDefinitions as multi-document YAML (as checked in under manifests/).
    Crds(CrdsArgs),
    /// Run the Cloudflare API simulator on loopback. The first stdout line is a JSON object
    /// with the API base URL (for --cloudflare-api-url), the account, the zones and the tokens.
    CloudflareSim(crate::cloudflare::sim::cli::SimArgs),
    /// Run cftunnel: the admission webhook (validating, mutating, conversion) with health and
    /// metrics. Uses $KUBECONFIG or the in-cluster configuration.
    Run(RunArgs),
}

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// HTTPS address of the webhook.
    #[arg(long, default_value = "0.0.0.0:9443")]
    pub webhook_listen: std::net::SocketAddr,
    /// Plain-HTTP address of /healthz, /readyz and /metrics.
    #[arg(long, default_value = "0.0.0.0:8080")]
    pub health_listen: std::net::SocketAddr,
    /// Serving certificate (PEM); re-read when it changes, e.g. a mounted Secret.
    #[arg(long, default_value = "/etc/cftunnel/tls/tls.crt")]
    pub tls_cert_file: std::path::PathBuf,
    /// Serving key (PEM).
    #[arg(long, default_value = "/etc/cftunnel/tls/tls.key")]
    pub tls_key_file: std::path::PathBuf,
    /// Watch namespaced objects only in this namespace (default: all namespaces).
    #[arg(long)]
    pub watch_namespace: Option<String>,
    /// Watch only Tunnels, ClusterTunnels and TunnelBindings matching this label selector.
    #[arg(long)]
    pub watch_selector: Option<String>,
}

#[derive(Debug, clap::Args)]
pub struct CrdsArgs {
    /// Namespace of the webhook Service that serves CRD conversion.
    #[arg(long, default_value = "cftunnel-system")]
    pub webhook_namespace: String,
    /// Name of the webhook Service that serves CRD conversion.
    #[arg(long, default_value = "cftunnel-webhook")]
    pub webhook_service: String,
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    telemetry::init(cli.log_format);
    telemetry::install_crypto_provider();
    let result = match cli.command {
        Command::Crds(args) => print_crds(&args),
        Command::CloudflareSim(args) => block_on(crate::cloudflare::sim::cli::run(args)),
        Command::Run(args) => block_on(run(args)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn block_on<F: std::future::Future<Output = anyhow::Result<()>>>(future: F) -> anyhow::Result<()> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(future)
}

async fn run(args: RunArgs) -> anyhow::Result<()> {
    let client = kube::Client::try_default().await?;
    let scope = crate::view_cache::WatchScope {
        namespace: args.watch_namespace,
        label_selector: args.watch_selector,
    };
    let config = crate::webhook::WebhookConfig::new(
        args.webhook_listen,
        args.health_listen,
        args.tls_cert_file,
        args.tls_key_file,
    );
    let shutdown = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let handle = crate::run::start_webhook(client, &scope, config, shutdown).await?;
    tracing::info!(https = %handle.https_addr(), health = %handle.health_addr(), "cftunnel is serving");
    handle.join().await?;
    Ok(())
}

fn print_crds(args: &CrdsArgs) -> anyhow::Result<()> {
    let service = ConversionService {
        namespace: args.webhook_namespace.clone(),
        name: args.webhook_service.clone(),
        ..ConversionService::default()
    };
    let yaml = crds::to_yaml(&crds::all(&service))?;
    std::io::stdout().lock().write_all(yaml.as_bytes())?;
    Ok(())
}
