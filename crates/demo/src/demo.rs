//! `cftunnel demo`: the whole product on this machine. Starts a local control plane (etcd,
//! kube-apiserver, kube-controller-manager on loopback) with the Gateway API CRDs, the
//! Cloudflare simulator and cftunnel (webhook and reconcilers, edge health every few seconds),
//! applies `examples/` with the real kubectl and prints what happened: each tunnel with its
//! edge status, connectors and routes, the Go-era manifest served back in v1alpha2, the
//! HTTPRoute's parent status, the AccessPolicy and its Access application, DNS, the workload.
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;
use kube::{Api, Client};

use cftunnel::caches::WatchScope;
use cftunnel::term::ControllerOptions;
use cftunnel::webhook::{ServingHandle, WebhookConfig};
use cftunnel_sim::{SimConfig, Simulator};
use cftunnel_testenv::{ControlPlane, ControlPlaneOptions, poll_until};
use cftunnel_types::{Tunnel, TunnelStatus};

use crate::tunnels::{self, WATCHED};
use crate::{access, cloudflare, deployment, gateway_api, go_era};

/// The token `examples/01-api-secrets.yaml` carries.
const TOKEN: &str = "demo-api-token";
const ACCOUNT: &str = "Demo Account";
/// The simulated account's Zero Trust team, which Access applications belong to.
const ACCESS_TEAM: &str = "demo";
const DEMO_NAMESPACE: &str = "demo";
/// The Tunnel the simulated edge reports connected.
const SHOP: &str = "shop";

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

/// How often edge health asks Cloudflare about each tunnel here (`cftunnel run
/// --edge-interval`, 60 s by default), so the summary shows its findings within seconds.
const EDGE_INTERVAL: Duration = Duration::from_secs(5);

pub async fn run(args: DemoArgs) -> anyhow::Result<()> {
    let log_file = args.log_path();
    println!(
        "cftunnel demo: starting a local control plane, the Cloudflare simulator and cftunnel"
    );
    println!("  cftunnel's log: {}", log_file.display());
    let plane = ControlPlane::start(ControlPlaneOptions::for_cftunnel()).await?;
    gateway_api::install_crds(&plane)?;
    let sim = Simulator::new(SimConfig {
        account_name: ACCOUNT.into(),
        zones: vec!["example.com".into()],
        tokens: vec![TOKEN.into()],
        access_team: Some(ACCESS_TEAM.into()),
        ..Default::default()
    });
    let cloudflare = sim.serve("127.0.0.1:0".parse()?).await?;
    let client = plane.admin_client()?;

    let (webhook, webhook_addr) = start_webhook(&plane, client.clone()).await?;
    cftunnel_testenv::registration::register_webhook(&plane, webhook_addr, None).await?;
    let options = ControllerOptions {
        cloudflare_api_url: cloudflare.url.clone(),
        edge_interval: EDGE_INTERVAL,
        ..Default::default()
    };
    let reconcilers = tokio::spawn(cftunnel::wiring::run_reconcilers(
        client.clone(),
        options,
        WatchScope::default(),
    ));
    println!(
        "  control plane {} · simulator {} · webhook https://{webhook_addr}",
        plane.server_url(),
        cloudflare.url
    );
    println!(
        "  Gateway API v1.6.3 CRDs installed · edge health every {} s (--edge-interval; 60 s by default)\n",
        EDGE_INTERVAL.as_secs()
    );

    let refused = apply_examples(&plane, &args.examples)?;

    println!("\nwaiting for the tunnels to become Ready …");
    for tunnel in &WATCHED {
        if let Err(e) = tunnel.wait(&client, "to be Ready", tunnels::is_ready).await {
            println!("  {e}");
        }
    }
    connect_shop(&client, &sim).await;
    println!(
        "waiting for edge health to write status.edge, status.connectors and Connected (every {} s) …",
        EDGE_INTERVAL.as_secs()
    );
    let mut statuses = Vec::new();
    for tunnel in &WATCHED {
        let done: fn(&TunnelStatus) -> bool = match tunnel.name {
            SHOP => tunnels::is_connected,
            _ => tunnels::has_edge_health,
        };
        statuses.push((tunnel, tunnel.wait(&client, "edge health", done).await));
    }
    println!("waiting for the HTTPRoute to be accepted, the AccessPolicy programmed and DNS …");
    let route = gateway_api::wait_accepted(&client).await;
    let policy = access::wait_programmed(&client).await;
    let dns = cloudflare::routed_records(&sim).await;

    println!("\nsummary");
    for (tunnel, status) in statuses {
        tunnels::print(&client, tunnel, status).await;
    }
    go_era::print(&client).await;
    gateway_api::print(&client, route).await;
    access::print(&sim, policy);
    cloudflare::print(&sim, dns);
    deployment::print(&client, DEMO_NAMESPACE).await;
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
        println!(
            "  try: kubectl get tunnels,clustertunnels -A (the Edge and Connectors columns), kubectl get httproutes,accesspolicies -n demo"
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

/// Applies every manifest of `dir` with kubectl, printing what it says; the files refused,
/// with kubectl's message.
fn apply_examples(plane: &ControlPlane, dir: &Path) -> anyhow::Result<Vec<(PathBuf, String)>> {
    let mut refused = Vec::new();
    for file in manifests(dir)? {
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
    Ok(refused)
}

/// No node runs cloudflared here, so nothing connects to the tunnel: the simulator, standing
/// in for Cloudflare's edge, attaches a connector to demo/shop's tunnel, as the edge reports
/// once cloudflared holds its connections. The others stay as they are (`inactive`).
async fn connect_shop(client: &Client, sim: &Simulator) {
    let shop: Api<Tunnel> = Api::namespaced(client.clone(), DEMO_NAMESPACE);
    let id = shop
        .get_opt(SHOP)
        .await
        .ok()
        .flatten()
        .and_then(|t| t.status)
        .and_then(|s| s.tunnel_id);
    match id {
        Some(id) if sim.connect_tunnel(&id) => println!(
            "\nthe Cloudflare simulator stands in for Cloudflare's edge: it now reports a simulated cloudflared connector on tunnel {id} (Tunnel demo/shop), as the edge would once cloudflared connects; nothing connects to the other tunnels (no node runs cloudflared pods here)"
        ),
        _ => println!("\nTunnel demo/shop has no tunnel on the simulator to connect"),
    }
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
