//! `cftunnel demo`: the whole product on this machine. Starts a local control plane (etcd,
//! kube-apiserver, kube-controller-manager on loopback), the Cloudflare simulator and cftunnel
//! (webhook and reconcilers), applies `examples/` with the real kubectl and prints what happened.
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;
use kube::{Api, Client};

use crate::api::{ClusterTunnel, Tunnel, TunnelStatus};
use crate::cloudflare::sim::{SimConfig, Simulator};
use crate::controller::ControllerOptions;
use crate::testenv::{ControlPlane, ControlPlaneOptions, poll_until};
use crate::view_cache::WatchScope;
use crate::webhook::WebhookConfig;

/// The token `examples/01-api-secrets.yaml` carries.
const TOKEN: &str = "demo-api-token";
const ACCOUNT: &str = "Demo Account";
const DEMO_NAMESPACE: &str = "demo";

#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// Directory of manifests to apply, in file-name order.
    #[arg(long, default_value = "examples")]
    pub examples: PathBuf,
    /// Keep everything running after the summary (until Ctrl-C), to explore with kubectl.
    #[arg(long)]
    pub keep_running: bool,
}

pub async fn run(args: DemoArgs) -> anyhow::Result<()> {
    println!(
        "cftunnel demo: starting a local control plane, the Cloudflare simulator and cftunnel"
    );
    let plane = ControlPlane::start(ControlPlaneOptions::for_cftunnel()).await?;
    let sim = Simulator::new(SimConfig {
        account_name: ACCOUNT.into(),
        zones: vec!["example.com".into()],
        tokens: vec![TOKEN.into()],
        ..Default::default()
    });
    let cloudflare = sim.serve("127.0.0.1:0".parse()?).await?;
    let client = plane.admin_client()?;

    let webhook = start_webhook(&plane, client.clone()).await?;
    crate::install::register_webhook(&plane, webhook, None).await?;
    let options = ControllerOptions {
        cloudflare_api_url: cloudflare.url.clone(),
        ..Default::default()
    };
    tokio::spawn(crate::process::run_reconcilers(
        client.clone(),
        options,
        WatchScope::default(),
    ));
    println!(
        "  control plane {} · simulator {} · webhook https://{webhook}\n",
        plane.server_url(),
        cloudflare.url
    );

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
            "refused"
        };
        println!("{verb} {}:", file.display());
        for line in printed.lines().filter(|l| !l.trim().is_empty()) {
            println!("    {line}");
        }
    }

    println!("\nwaiting for the tunnels to become Ready …");
    let tunnels: Api<Tunnel> = Api::namespaced(client.clone(), DEMO_NAMESPACE);
    let cluster_tunnels: Api<ClusterTunnel> = Api::all(client.clone());
    let shop = ready_status("Tunnel demo/shop", &tunnels, "shop").await;
    let edge = ready_status("ClusterTunnel edge", &cluster_tunnels, "edge").await;
    println!("\nsummary");
    for (what, status) in [("Tunnel demo/shop", shop), ("ClusterTunnel edge", edge)] {
        match status {
            Ok(s) => println!(
                "  {what}: Ready, tunnel {}",
                s.tunnel_id.unwrap_or_default()
            ),
            Err(e) => println!("  {what}: not Ready ({e})"),
        }
    }
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
    println!("  Cloudflare API calls made: {}", sim.total_calls());
    let deployments = plane
        .kubectl()
        .args([
            "get",
            "deployments",
            "-A",
            "-l",
            "cfargotunnel.com/app=cloudflared",
        ])
        .output()?;
    println!(
        "  cloudflared Deployments:\n{}",
        indent(&String::from_utf8_lossy(&deployments.stdout))
    );

    if args.keep_running {
        println!(
            "running; KUBECONFIG={} — Ctrl-C stops everything",
            plane.admin_kubeconfig().display()
        );
        tokio::signal::ctrl_c().await?;
    }
    cloudflare.shutdown().await;
    plane.stop().await;
    Ok(())
}

/// Waits (generously) until the object's Ready condition is True; its status then.
async fn ready_status<K>(
    what: &str,
    api: &Api<K>,
    name: &str,
) -> Result<TunnelStatus, crate::testenv::TestEnvError>
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

fn is_ready(status: &TunnelStatus) -> bool {
    status
        .conditions
        .iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

async fn start_webhook(
    plane: &ControlPlane,
    client: Client,
) -> anyhow::Result<std::net::SocketAddr> {
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
    let handle = crate::run::start_webhook(
        client,
        &WatchScope::default(),
        config,
        std::future::pending(),
    )
    .await?;
    let addr = handle.https_addr();
    let health = handle.health_addr();
    tokio::spawn(async move {
        let _ = handle.join().await;
    });
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
    Ok(addr)
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
