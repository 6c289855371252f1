//! `cftunnel demo`: the whole product on this machine. Starts a local control plane (etcd,
//! kube-apiserver, kube-controller-manager on loopback), the Cloudflare simulator and cftunnel
//! (webhook and reconcilers), applies `examples/` with the real kubectl and prints what happened.
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;
use k8s_openapi::api::apps::v1::Deployment;
use kube::{Api, Client};

use cftunnel::caches::WatchScope;
use cftunnel::term::ControllerOptions;
use cftunnel::webhook::{ServingHandle, WebhookConfig};
use cftunnel_sim::{SimConfig, SimDnsRecord, Simulator};
use cftunnel_testenv::{ControlPlane, ControlPlaneOptions, poll_until};
use cftunnel_types::{ClusterTunnel, Tunnel, TunnelStatus};

/// The token `examples/01-api-secrets.yaml` carries.
const TOKEN: &str = "demo-api-token";
const ACCOUNT: &str = "Demo Account";
const DEMO_NAMESPACE: &str = "demo";

#[derive(Debug, clap::Parser)]
#[command(
    name = "cftunnel-demo",
    version,
    about = "Run cftunnel end to end: a local control plane, the Cloudflare simulator and cftunnel"
)]
pub(crate) struct DemoArgs {
    /// Directory of manifests to apply, in file-name order.
    #[arg(long, default_value = "examples")]
    pub examples: PathBuf,
    /// Keep everything running after the summary (until Ctrl-C), to explore with kubectl.
    #[arg(long)]
    pub keep_running: bool,
    /// Where cftunnel's own log goes (default: cftunnel-demo.log in the temporary directory);
    /// the terminal keeps only the story.
    #[arg(long)]
    pub log_file: Option<PathBuf>,
}

impl DemoArgs {
    /// Where cftunnel's log goes.
    pub fn log_path(&self) -> PathBuf {
        self.log_file
            .clone()
            .unwrap_or_else(|| std::env::temp_dir().join("cftunnel-demo.log"))
    }
}

/// Hostnames the examples route, and so expect DNS records for.
const ROUTED: [&str; 3] = ["web.example.com", "api.example.com", "app.example.com"];

pub async fn run(args: DemoArgs) -> anyhow::Result<()> {
    let log_file = args.log_path();
    println!(
        "cftunnel demo: starting a local control plane, the Cloudflare simulator and cftunnel"
    );
    println!("  cftunnel's log: {}", log_file.display());
    let plane = ControlPlane::start(ControlPlaneOptions::for_cftunnel()).await?;
    let sim = Simulator::new(SimConfig {
        account_name: ACCOUNT.into(),
        zones: vec!["example.com".into()],
        tokens: vec![TOKEN.into()],
        ..Default::default()
    });
    let cloudflare = sim.serve("127.0.0.1:0".parse()?).await?;
    let client = plane.admin_client()?;

    let (webhook, webhook_addr) = start_webhook(&plane, client.clone()).await?;
    cftunnel_testenv::registration::register_webhook(&plane, webhook_addr, None).await?;
    let options = ControllerOptions {
        cloudflare_api_url: cloudflare.url.clone(),
        ..Default::default()
    };
    let reconcilers = tokio::spawn(cftunnel::wiring::run_reconcilers(
        client.clone(),
        options,
        WatchScope::default(),
    ));
    println!(
        "  control plane {} · simulator {} · webhook https://{webhook_addr}\n",
        plane.server_url(),
        cloudflare.url
    );

    let mut refused = Vec::new();
    for file in manifests(&args.examples)? {
        let out = plane.kubectl().args(["apply", "-f"]).arg(&file).output()?;
        let printed = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let verb = if out.status.success() {
            "applied"
        } else {
            refused.push((file.clone(), printed.trim().to_string()));
            "refused"
        };
        println!("{verb} {}:", file.display());
        for line in printed.lines().filter(|l| !l.trim().is_empty()) {
            println!("    {line}");
        }
    }

    println!("\nwaiting for the tunnels to become Ready and their DNS records to appear …");
    let tunnels: Api<Tunnel> = Api::namespaced(client.clone(), DEMO_NAMESPACE);
    let cluster_tunnels: Api<ClusterTunnel> = Api::all(client.clone());
    let shop = ready_status("Tunnel demo/shop", &tunnels, "shop").await;
    let edge = ready_status("ClusterTunnel edge", &cluster_tunnels, "edge").await;
    let dns = routed_records(&sim).await;
    println!("\nsummary");
    for (what, status) in [("Tunnel demo/shop", shop), ("ClusterTunnel edge", edge)] {
        print_tunnel(what, status);
    }
    print_cloudflare(&sim, dns);
    print_deployment(&client).await;
    for (file, message) in &refused {
        println!("  refused at kubectl apply: {}", file.display());
        println!("{}", indent(&indent(message)));
    }
    println!("  cftunnel's log: {}", log_file.display());

    if args.keep_running {
        println!(
            "running; KUBECONFIG={} — Ctrl-C stops everything",
            plane.admin_kubeconfig().display()
        );
        tokio::signal::ctrl_c().await?;
    }
    // Stop in order: the reconcilers and the webhook before what they talk to.
    reconcilers.abort();
    let _ = reconcilers.await;
    webhook.shutdown();
    let _ = webhook.join().await;
    cloudflare.shutdown().await;
    plane.stop().await;
    Ok(())
}

fn print_tunnel(what: &str, status: Result<TunnelStatus, cftunnel_testenv::TestEnvError>) {
    let status = match status {
        Ok(s) => s,
        Err(e) => {
            println!("  {what}: not Ready ({e})");
            return;
        }
    };
    println!(
        "  {what}: Ready, tunnel {}",
        status.tunnel_id.unwrap_or_default()
    );
    for route in status.routes.unwrap_or_default() {
        println!(
            "    route {} → {} ({}, from {})",
            route.hostname, route.target, route.state, route.source
        );
    }
}

/// Waits until every routed hostname has its CNAME; the zone's records then.
async fn routed_records(
    sim: &Simulator,
) -> Result<Vec<SimDnsRecord>, cftunnel_testenv::TestEnvError> {
    poll_until(
        "the DNS records of the routed hostnames",
        Duration::from_secs(120),
        Duration::from_millis(500),
        || async {
            let records = sim.dns_records("example.com");
            ROUTED
                .iter()
                .all(|h| {
                    records
                        .iter()
                        .any(|r| r.name == *h && r.record_type == "CNAME")
                })
                .then_some(records)
        },
    )
    .await
}

fn print_cloudflare(
    sim: &Simulator,
    dns: Result<Vec<SimDnsRecord>, cftunnel_testenv::TestEnvError>,
) {
    let live: Vec<String> = sim
        .tunnels()
        .into_iter()
        .filter(|t| t.deleted_at.is_none())
        .map(|t| format!("{} ({})", t.name, t.id))
        .collect();
    println!(
        "  Cloudflare (simulated): {} live tunnels: {}",
        live.len(),
        live.join(", ")
    );
    match dns {
        Ok(records) => {
            println!("  DNS records in example.com (simulated):");
            for r in records {
                println!("    {} {} {}", r.record_type, r.name, r.content);
            }
        }
        Err(e) => println!("  DNS records in example.com: not all there ({e})"),
    }
    println!("  Cloudflare API calls made: {}", sim.total_calls());
}

/// The key settings of the hardened cloudflared Deployment of Tunnel demo/shop.
async fn print_deployment(client: &Client) {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), DEMO_NAMESPACE);
    let Ok(Some(deployment)) = deployments.get_opt("shop").await else {
        println!("  cloudflared Deployment demo/shop: not found");
        return;
    };
    let spec = deployment.spec;
    let pod = spec.template.spec.unwrap_or_default();
    let container = pod.containers.first().cloned().unwrap_or_default();
    let security = container.security_context.unwrap_or_default();
    let pod_security = pod.security_context.unwrap_or_default();
    let dropped = security
        .capabilities
        .and_then(|c| c.drop)
        .unwrap_or_default()
        .join(",");
    let seccomp = pod_security
        .seccomp_profile
        .or(security.seccomp_profile)
        .map(|p| p.type_)
        .unwrap_or_default();
    println!("  cloudflared Deployment demo/shop (hardened):");
    println!(
        "    replicas {} · image {}",
        spec.replicas.unwrap_or(1),
        container.image.unwrap_or_default()
    );
    println!(
        "    runAsNonRoot {} · readOnlyRootFilesystem {} · allowPrivilegeEscalation {} · capabilities drop [{dropped}] · seccomp {seccomp}",
        pod_security
            .run_as_non_root
            .or(security.run_as_non_root)
            .unwrap_or(false),
        security.read_only_root_filesystem.unwrap_or(false),
        security.allow_privilege_escalation.unwrap_or(true),
    );
    println!(
        "    automountServiceAccountToken {} · serviceAccount {}",
        pod.automount_service_account_token.unwrap_or(true),
        pod.service_account_name.unwrap_or_default()
    );
}

/// Waits (generously) until the object's Ready condition is True; its status then.
async fn ready_status<K>(
    what: &str,
    api: &Api<K>,
    name: &str,
) -> Result<TunnelStatus, cftunnel_testenv::TestEnvError>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + HasTunnelStatus,
{
    poll_until(
        &format!("{what} to be Ready"),
        Duration::from_secs(120),
        Duration::from_millis(500),
        || async {
            api.get_opt(name)
                .await
                .ok()
                .flatten()
                .and_then(|t| t.tunnel_status())
                .filter(is_ready)
        },
    )
    .await
}

/// Both tunnel kinds carry the same status.
trait HasTunnelStatus {
    fn tunnel_status(self) -> Option<TunnelStatus>;
}

impl HasTunnelStatus for Tunnel {
    fn tunnel_status(self) -> Option<TunnelStatus> {
        self.status
    }
}

impl HasTunnelStatus for ClusterTunnel {
    fn tunnel_status(self) -> Option<TunnelStatus> {
        self.status
    }
}

/// Ready, with the routes the examples give every tunnel listed in its status.
fn is_ready(status: &TunnelStatus) -> bool {
    let ready = status
        .conditions
        .iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    ready && status.routes.as_ref().is_some_and(|r| !r.is_empty())
}

async fn start_webhook(
    plane: &ControlPlane,
    client: Client,
) -> anyhow::Result<(ServingHandle, std::net::SocketAddr)> {
    let dir = plane.dir().join("cftunnel-webhook");
    std::fs::create_dir_all(&dir)?;
    let cert = plane.ca().issue_server_cert(&["127.0.0.1", "localhost"])?;
    std::fs::write(dir.join("tls.crt"), &cert.cert_pem)?;
    std::fs::write(dir.join("tls.key"), &cert.key_pem)?;
    let config = WebhookConfig::new(
        "127.0.0.1:0".parse()?,
        "127.0.0.1:0".parse()?,
        dir.join("tls.crt"),
        dir.join("tls.key"),
    );
    let handle = cftunnel::admission_view::serve::start_webhook(
        client,
        &WatchScope::default(),
        config,
        std::future::pending(),
    )
    .await?;
    let addr = handle.https_addr();
    let health = handle.health_addr();
    // Admission answers only once the caches are synced: wait for /readyz.
    poll_until(
        "the webhook to be ready",
        Duration::from_secs(60),
        Duration::from_millis(200),
        || async move {
            let response = reqwest::get(format!("http://{health}/readyz")).await.ok()?;
            response.status().is_success().then_some(())
        },
    )
    .await?;
    Ok((handle, addr))
}

fn manifests(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
        .collect();
    files.sort();
    Ok(files)
}

fn indent(text: &str) -> String {
    text.lines()
        .map(|l| format!("    {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}
