//! Command-line interface: one binary, one subcommand per role.
mod budget;
mod crd_reference;
mod render;

use std::io::Write;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use cftunnel_policy::rules::duration::parse_duration;
use cftunnel_types::ConfigSource;

use crate::telemetry::{self, LogFormat};
use cftunnel_types::crds::{self, ConversionService};

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
    /// Run cftunnel: the admission webhook (validating, mutating, conversion), the tunnel
    /// reconcilers and health/metrics in one process. Uses $KUBECONFIG or the in-cluster
    /// configuration.
    Run(Box<RunArgs>),
    /// Check manifests against the admission rules offline (for CI pipelines).
    #[command(long_about = VALIDATE_HELP)]
    Validate(ValidateArgs),
    /// Write a development CA and a webhook serving certificate (never commit them).
    Certs(CertsArgs),
    /// Print what the reconciler would apply for the Tunnels, ClusterTunnels and AccessTunnels
    /// given, as multi-document YAML (diagnostics on stderr). Uses status.tunnelId when the input
    /// carries it; never generates secrets: the Secret's values are redacted placeholders.
    Render(RenderArgs),
}

#[derive(Debug, clap::Args)]
pub struct RenderArgs {
    /// A manifest file, a directory (read recursively) or - for standard input; repeatable.
    #[arg(short = 'f', long = "filename", required = true)]
    pub files: Vec<String>,
    /// Namespace of the Secrets, ConfigMaps and Deployments of ClusterTunnels.
    #[arg(long, default_value = crate::term::DEFAULT_CLUSTER_RESOURCE_NAMESPACE)]
    pub cluster_resource_namespace: String,
    /// cloudflared image, pinned (a `latest` or untagged image is refused).
    #[arg(long, default_value = crate::term::DEFAULT_CLOUDFLARED_IMAGE)]
    pub cloudflared_image: String,
    /// `configSource` of the tunnels whose spec names none: `Local` or `Cloudflare`.
    #[arg(long, default_value = "Local", value_parser = parse_config_source)]
    pub default_config_source: ConfigSource,
}

/// `Local` or `Cloudflare`, in any case.
fn parse_config_source(text: &str) -> Result<ConfigSource, String> {
    if text.eq_ignore_ascii_case("local") {
        Ok(ConfigSource::Local)
    } else if text.eq_ignore_ascii_case("cloudflare") {
        Ok(ConfigSource::Cloudflare)
    } else {
        Err(format!(
            "{text:?} is not a config source; use Local or Cloudflare"
        ))
    }
}

/// `--cluster-id`: checked as the DNS marker needs it.
fn parse_cluster_id(text: &str) -> Result<String, String> {
    cftunnel_policy::dns::ClusterId::new(text).map(|id| id.as_str().to_string())
}

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// HTTPS address of the webhook.
    #[arg(long, default_value = "0.0.0.0:9443")]
    pub webhook_listen: std::net::SocketAddr,
    /// Plain-HTTP address of /healthz, /readyz and /metrics.
    #[arg(long, default_value = "0.0.0.0:8080")]
    pub health_listen: std::net::SocketAddr,
    /// Serving certificate (PEM); re-read when it changes. Written here in self-managed
    /// certificate mode; read as given (e.g. a mounted cert-manager Secret) in files mode.
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
    /// Cloudflare API base URL (a simulator's `url` in tests and the demo).
    #[arg(long, default_value = cftunnel_cloudflare::DEFAULT_BASE_URL)]
    pub cloudflare_api_url: String,
    /// Namespace of the Secrets, ConfigMaps and Deployments of ClusterTunnels (the Go operator
    /// used cloudflare-operator-system).
    #[arg(long, default_value = crate::term::DEFAULT_CLUSTER_RESOURCE_NAMESPACE)]
    pub cluster_resource_namespace: String,
    /// cloudflared image, pinned (a `latest` or untagged image is refused).
    #[arg(long, default_value = crate::term::DEFAULT_CLOUDFLARED_IMAGE)]
    pub cloudflared_image: String,
    /// How often each tunnel is checked on Cloudflare (jittered; `0` disables), e.g. `10m`.
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    pub drift_interval: std::time::Duration,
    /// How often Cloudflare's edge is asked how each tunnel is connected (one tunnel list per
    /// account and credential; `0` disables `status.edge` and `Connected`), e.g. `60s`.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub edge_interval: std::time::Duration,
    /// The Cloudflare API requests cftunnel may spend per credential, as `REQUESTS/WINDOW`
    /// (e.g. `900/5m`, three quarters of Cloudflare's 1,200 per 5 minutes per token, leaving
    /// room for other tools on the same token). Every call of the credential draws from it:
    /// deletions first, then changes, drift checks last and at most half of it.
    #[arg(long, default_value = "900/5m", value_parser = budget::parse_budget)]
    pub cloudflare_budget: cftunnel_cloudflare::Budget,
    /// How long a deletion waits for cloudflared pods that still run before it cleans up the
    /// tunnel's connections and deletes it anyway (Failed/Succeeded pods are never waited for).
    #[arg(long, default_value = "2m", value_parser = parse_duration)]
    pub deletion_pod_wait: std::time::Duration,
    /// Elect one leader among the replicas to run the reconcilers on a Lease (every replica
    /// serves the webhook); `--leader-elect=false` reconciles in every replica.
    #[arg(long, default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub leader_elect: bool,
    /// Namespace of the leader Lease (default: the pod's namespace, else cftunnel-system).
    #[arg(long)]
    pub leader_election_namespace: Option<String>,
    /// Name of the leader Lease.
    #[arg(long, default_value = crate::leader::DEFAULT_LEASE_NAME)]
    pub leader_election_id: String,
    /// Namespace of the Go cloudflare-operator's lease: cftunnel does not lead while it is held.
    #[arg(long, default_value = crate::leader::DEFAULT_GO_OPERATOR_NAMESPACE)]
    pub go_operator_lease_namespace: String,
    /// Replace or delete DNS records cftunnel does not own when they stand in the way of a
    /// routed hostname (default: leave them and report DNSConflict).
    #[arg(long)]
    pub overwrite_unmanaged_dns: bool,
    /// Do not write the `_managed.<hostname>` TXT records the Go operator reads (they are
    /// public and name the tunnel); cftunnel's own ownership proof is the CNAME's comment.
    #[arg(long)]
    pub no_dns_txt_records: bool,
    /// How DNS records are written: `auto` uses Cloudflare's batch call (a hostname's records in
    /// one transaction) and falls back to one record per request where it is unavailable;
    /// `always` never falls back; `never` writes one record per request.
    #[arg(long, default_value = "auto")]
    pub dns_batch: cftunnel_policy::dns::BatchMode,
    /// This cluster's identity in the ownership marker and TXT of every DNS record it writes
    /// (1 to 40 lowercase letters, digits or '-'). Default: the uid of the kube-system
    /// Namespace, so two clusters are never the same owner; set it to keep the records of a
    /// cluster rebuilt under the same identity.
    #[arg(long, env = "CFTUNNEL_CLUSTER_ID", value_parser = parse_cluster_id)]
    pub cluster_id: Option<String>,
    /// Where cloudflared takes its rules from for a tunnel whose spec names no `configSource`:
    /// `Local` (a rendered config.yaml; a route change rolls the pods) or `Cloudflare` (pushed
    /// to the tunnel's configuration, applied live).
    #[arg(long, default_value = "Local", value_parser = parse_config_source)]
    pub default_config_source: ConfigSource,
    #[command(flatten)]
    pub startup: crate::startup::StartupArgs,
}

impl RunArgs {
    /// The leader election settings, or `None` with `--leader-elect=false`.
    fn leader_election(&self) -> anyhow::Result<Option<crate::leader::LeaderElectionConfig>> {
        if !self.leader_elect {
            return Ok(None);
        }
        let namespace = self
            .leader_election_namespace
            .clone()
            .unwrap_or_else(crate::leader::default_namespace);
        let mut config =
            crate::leader::LeaderElectionConfig::new(namespace, &self.leader_election_id);
        config.go_operator_lease_namespace = Some(self.go_operator_lease_namespace.clone());
        config.validate()?;
        Ok(Some(config))
    }
}

const VALIDATE_HELP: &str =
    "Check manifests against the admission rules offline (for CI pipelines).

Reads every YAML or JSON document of the given files, directories (recursively: *.yaml, *.yml, \
*.json, in path order) or standard input (-). Tunnels, ClusterTunnels, TunnelBindings, \
AccessTunnels, AccessPolicies, NetworkRoutes, VirtualNetworks and Services carrying a cfargotunnel.com/expose-* label are judged; Namespaces give their labels \
to allowedRoutes selectors; other kinds are ignored. Schema defaults are applied and v1alpha1 \
tunnels are converted to v1alpha2 first, as the API server would.

All objects are judged together: a binding's fqdn is checked against a tunnel given with it, \
and hostname ownership is checked across every binding and labelled Service, the earlier one \
in input order being the owner. NetworkRoutes claim CIDRs and private hostnames, and \
VirtualNetworks their names, the same way. Namespaced objects without metadata.namespace are in the \
namespace given by --namespace (default: default).

Only CREATE rules run: UPDATE rules (immutability, ratcheting) and rules that need cluster \
state (objects not given, claims of objects already in the cluster) are skipped.

Output: one line per violation on stdout, `<Kind> <namespace>/<name>: <message>` \
(`<Kind> <name>` when cluster-scoped); warnings on stderr. Exit code 1 on any violation, \
0 otherwise, 2 when the input cannot be read.";

#[derive(Debug, clap::Args)]
pub struct ValidateArgs {
    /// A manifest file, a directory (read recursively) or - for standard input; repeatable.
    #[arg(short = 'f', long = "filename", required = true)]
    pub files: Vec<String>,
    /// Namespace of namespaced objects that do not name one.
    #[arg(short = 'n', long, default_value = cftunnel_policy::validate::DEFAULT_NAMESPACE)]
    pub namespace: String,
}

#[derive(Debug, clap::Args)]
pub struct CertsArgs {
    /// Directory to write ca.crt, ca.key, tls.crt and tls.key into.
    #[arg(long, default_value = "certs")]
    pub dir: std::path::PathBuf,
    /// DNS name or IP address of the serving certificate; repeatable (default: localhost,
    /// 127.0.0.1 and the in-cluster webhook Service name).
    #[arg(long = "host")]
    pub hosts: Vec<String>,
}

#[derive(Debug, clap::Args)]
pub struct CrdsArgs {
    /// Namespace of the webhook Service that serves CRD conversion.
    #[arg(long, default_value = "cftunnel-system")]
    pub webhook_namespace: String,
    /// Name of the webhook Service that serves CRD conversion.
    #[arg(long, default_value = "cftunnel-webhook")]
    pub webhook_service: String,
    /// Print the Helm chart's CRD template instead (charts/cftunnel/templates/crds.yaml):
    /// conversion in the release namespace, kept on uninstall, cert-manager CA injection.
    #[arg(long, conflicts_with_all = ["webhook_namespace", "webhook_service"])]
    pub helm: bool,
    /// Print a Markdown reference of every field of the CRDs instead (docs/reference/crds.md):
    /// types, defaults, constraints, CEL rules and printer columns of each served version.
    #[arg(long, conflicts_with_all = ["helm", "webhook_namespace", "webhook_service"])]
    pub reference: bool,
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    telemetry::init(cli.log_format);
    cftunnel_cloudflare::install_crypto_provider();
    let result = match cli.command {
        Command::Crds(args) => print_crds(&args).map(|()| ExitCode::SUCCESS),
        Command::Validate(args) => validate_manifests(&args),
        Command::Certs(args) => write_certs(&args).map(|()| ExitCode::SUCCESS),
        Command::Run(args) => block_on(run(*args)).map(|()| ExitCode::SUCCESS),
        Command::Render(args) => render_manifests(&args),
    };
    match result {
        Ok(code) => code,
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
    let election = args.leader_election()?;
    let client = crate::kube_client::client().await?;
    let watch = crate::caches::WatchScope {
        namespace: args.watch_namespace,
        label_selector: args.watch_selector,
    };
    let webhook = crate::webhook::WebhookConfig::new(
        args.webhook_listen,
        args.health_listen,
        args.tls_cert_file,
        args.tls_key_file,
    );
    let options = crate::term::ControllerOptions {
        cloudflare_api_url: args.cloudflare_api_url,
        cluster_resource_namespace: args.cluster_resource_namespace,
        cloudflared_image: args.cloudflared_image,
        drift_interval: args.drift_interval,
        edge_interval: args.edge_interval,
        cloudflare_budget: args.cloudflare_budget,
        deletion_pod_wait: args.deletion_pod_wait,
        overwrite_unmanaged_dns: args.overwrite_unmanaged_dns,
        dns_txt_records: !args.no_dns_txt_records,
        dns_batch: args.dns_batch,
        cluster_id: args.cluster_id,
        default_config_source: args.default_config_source,
        ..Default::default()
    };
    let settings = crate::wiring::Settings {
        client,
        election,
        watch,
        webhook,
        options,
        startup: args.startup,
    };
    crate::wiring::run(settings, shutdown_signal()).await
}

/// SIGTERM (what the kubelet sends) or Ctrl-C.
async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    let terminated = async {
        match term.as_mut() {
            Some(term) => {
                term.recv().await;
            }
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = terminated => {}
    }
}

fn print_crds(args: &CrdsArgs) -> anyhow::Result<()> {
    if args.helm {
        let text = cftunnel_types::crds::helm::crds_template()?;
        std::io::stdout().lock().write_all(text.as_bytes())?;
        return Ok(());
    }
    if args.reference {
        let text = crd_reference::render(&crds::all(&ConversionService::default()))?;
        std::io::stdout().lock().write_all(text.as_bytes())?;
        return Ok(());
    }
    let service = ConversionService {
        namespace: args.webhook_namespace.clone(),
        name: args.webhook_service.clone(),
        ..ConversionService::default()
    };
    let yaml = crds::to_yaml(&crds::all(&service))?;
    std::io::stdout().lock().write_all(yaml.as_bytes())?;
    Ok(())
}

fn validate_manifests(args: &ValidateArgs) -> anyhow::Result<ExitCode> {
    let code = cftunnel_policy::validate::run(
        &args.files,
        &args.namespace,
        &mut std::io::stdin().lock(),
        &mut std::io::stdout().lock(),
        &mut std::io::stderr().lock(),
    )?;
    Ok(ExitCode::from(code))
}

fn render_manifests(args: &RenderArgs) -> anyhow::Result<ExitCode> {
    let settings = crate::cli::render::RenderSettings {
        cluster_resource_namespace: args.cluster_resource_namespace.clone(),
        cloudflared_image: args.cloudflared_image.clone(),
        default_config_source: args.default_config_source,
    };
    let code = crate::cli::render::run(
        &args.files,
        &settings,
        &mut std::io::stdin().lock(),
        &mut std::io::stdout().lock(),
        &mut std::io::stderr().lock(),
    )?;
    Ok(ExitCode::from(code))
}

fn write_certs(args: &CertsArgs) -> anyhow::Result<()> {
    let certs = crate::certs::generate_dev_certs(&args.dir, &args.hosts)?;
    let mut out = std::io::stdout().lock();
    for path in [
        &certs.ca_cert,
        &certs.ca_key,
        &certs.tls_cert,
        &certs.tls_key,
    ] {
        writeln!(out, "{}", path.display())?;
    }
    Ok(())
}
