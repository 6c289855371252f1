//! One harness for the bad-day tests: `cftunnel run` as its own process (so it can be killed
//! and outlive an API server outage), the simulator on a thread of its own with Cloudflare's
//! rate-limit blocks on (so early calls are told apart from calls in flight), a workload of
//! Tunnels with TunnelBindings, and the checks every case ends with: every tunnel Ready, each
//! hostname exactly one CNAME and one TXT pointing at its tunnel, no tunnel or record left over.
#![allow(dead_code)] // each test uses its own subset

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Child;
use std::time::Duration;

use cftunnel_sim::{RunningSim, SimConfig, SimDnsRecord, Simulator};
use cftunnel_testenv::{ControlPlane, ControlPlaneOptions, TestUser, poll_until, shared};
use cftunnel_types::crds::{self, ConversionService};
use cftunnel_types::{Tunnel, TunnelBinding};
use k8s_openapi::api::core::v1::{Secret, Service};
use kube::api::{ListParams, PostParams};
use kube::{Api, Client};
use serde_json::json;
use tokio::sync::OnceCell;

use crate::install_support::{
    OPERATOR_USER, cftunnel_run_listening, install_namespaces_and_rbac, serving_cert_dir,
};

pub const TOKEN: &str = "sim-token-for-bad-days";
pub const ZONE: &str = "example.com";
/// Generous: convergence after a storm includes backoffs of up to a minute.
pub const WAIT: Duration = Duration::from_secs(420);
pub const POLL: Duration = Duration::from_millis(500);
const API_SECRET: &str = "cloudflare-api";

static RBAC: OnceCell<()> = OnceCell::const_new();

/// The shared control plane with cftunnel's CRDs and the shipped RBAC.
pub async fn plane() -> &'static ControlPlane {
    let plane = shared(|| ControlPlaneOptions {
        crds: crds::all(&ConversionService::default()),
        ..ControlPlaneOptions::default()
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    RBAC.get_or_init(|| install_namespaces_and_rbac(plane))
        .await;
    plane
}

/// cftunnel's ServiceAccount as a user of `plane` (every call checked against the shipped RBAC).
pub fn operator_user(plane: &ControlPlane) -> TestUser {
    plane
        .user(OPERATOR_USER, &["system:serviceaccounts"])
        .expect("operator user")
}

/// The simulated Cloudflare, answering from a runtime of its own, blocking a credential for
/// its `retry-after` after each 429 as Cloudflare does.
pub struct Cloudflare {
    pub sim: Simulator,
    pub running: RunningSim,
}

impl Cloudflare {
    pub fn start() -> Cloudflare {
        let sim = Simulator::new(SimConfig {
            tokens: vec![TOKEN.to_string()],
            zones: vec![ZONE.to_string()],
            ..SimConfig::default()
        });
        sim.set_block_on_rate_limit(true);
        let running = sim
            .serve_detached("127.0.0.1:0".parse().expect("addr"))
            .expect("simulator");
        Cloudflare { sim, running }
    }

    /// Live (not deleted) tunnels.
    pub fn live_tunnel_ids(&self) -> BTreeSet<String> {
        self.sim
            .tunnels()
            .into_iter()
            .filter(|t| t.deleted_at.is_none())
            .map(|t| t.id)
            .collect()
    }

    pub fn records(&self) -> Vec<SimDnsRecord> {
        self.sim.dns_records(ZONE)
    }

    /// Requests answered with `status` (0: the connection was dropped).
    pub fn answered(&self, status: u16) -> usize {
        self.sim
            .request_log()
            .iter()
            .filter(|r| r.status == status)
            .count()
    }
}

/// A free loopback port, below the range outbound connections take theirs from.
pub fn free_port() -> u16 {
    cftunnel_testenv::free_port().expect("free port")
}

/// `cftunnel run` in its own process, watching one namespace, against the simulator.
pub struct Operator {
    pub name: String,
    child: Option<Child>,
    log: std::path::PathBuf,
    health: String,
    _dir: tempfile::TempDir,
}

impl Operator {
    /// Starts `cftunnel run` as `user` for the objects of `ns` (their cloudflared objects in
    /// `ns` too), named `name` (its POD_NAME), with `extra` flags.
    pub fn start(
        plane: &ControlPlane,
        kubeconfig: &Path,
        ns: &str,
        cloudflare: &Cloudflare,
        name: &str,
        extra: &[&str],
    ) -> Operator {
        Operator::start_with_webhook(
            plane,
            kubeconfig,
            ns,
            cloudflare,
            name,
            "127.0.0.1:0",
            extra,
        )
    }

    /// Like [`Operator::start`], running `binary` (another build of cftunnel) against the
    /// Cloudflare API at `api_url`.
    pub fn start_binary(
        binary: &Path,
        plane: &ControlPlane,
        kubeconfig: &Path,
        ns: &str,
        api_url: &str,
        name: &str,
        extra: &[&str],
    ) -> Operator {
        Operator::launch(
            binary,
            plane,
            kubeconfig,
            ns,
            api_url,
            name,
            "127.0.0.1:0",
            extra,
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn launch(
        binary: &Path,
        plane: &ControlPlane,
        kubeconfig: &Path,
        ns: &str,
        api_url: &str,
        name: &str,
        webhook: &str,
        extra: &[&str],
    ) -> Operator {
        let dir = serving_cert_dir(plane);
        let health = format!("127.0.0.1:{}", free_port());
        let (mut command, log) = cftunnel_run_listening(
            binary,
            dir.path(),
            kubeconfig,
            webhook,
            &health,
            &format!("{name}.log"),
        );
        command
            .args(["--certificate-mode", "files"])
            .args(["--watch-namespace", ns, "--cluster-resource-namespace", ns])
            .args(["--cloudflare-api-url", api_url])
            .args(["--go-operator-lease-namespace", ns])
            .args(["--deletion-pod-wait", "5s"])
            .args(extra)
            .env("POD_NAME", name)
            .env("RUST_LOG", "info,kube=warn,tower=warn,hyper=warn");
        let child = command.spawn().expect("start cftunnel run");
        Operator {
            name: name.to_string(),
            child: Some(child),
            log,
            health,
            _dir: dir,
        }
    }

    /// Like [`Operator::start`], its webhook listening on `webhook` (e.g. `127.0.0.1:<port>`,
    /// so a test can send it AdmissionReviews) instead of a port it picks itself.
    pub fn start_with_webhook(
        plane: &ControlPlane,
        kubeconfig: &Path,
        ns: &str,
        cloudflare: &Cloudflare,
        name: &str,
        webhook: &str,
        extra: &[&str],
    ) -> Operator {
        let binary = Path::new(env!("CARGO_BIN_EXE_cftunnel"));
        let url = cloudflare.running.url.clone();
        Operator::launch(binary, plane, kubeconfig, ns, &url, name, webhook, extra)
    }

    /// The address of its health server (`/healthz`, `/readyz`, `/metrics`).
    pub fn health_addr(&self) -> &str {
        &self.health
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// Still running (it has not exited).
    pub fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// `GET /readyz`: its status and body, `None` when the health server does not answer.
    pub async fn readyz(&self) -> Option<(u16, String)> {
        let response = reqwest::Client::new()
            .get(format!("http://{}/readyz", self.health))
            .timeout(Duration::from_secs(2))
            .send()
            .await
            .ok()?;
        let status = response.status().as_u16();
        Some((status, response.text().await.ok()?))
    }

    /// `GET /metrics`.
    pub async fn metrics(&self) -> String {
        let response = reqwest::Client::new()
            .get(format!("http://{}/metrics", self.health))
            .send()
            .await
            .expect("metrics");
        response.text().await.expect("metrics text")
    }

    /// The sum of a counter's series whose line starts with `prefix` (name and labels).
    pub async fn counter(&self, prefix: &str) -> f64 {
        self.metrics()
            .await
            .lines()
            .filter(|l| l.starts_with(prefix))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .fold(0.0, |a, b| a + b)
    }

    /// SIGTERM, as Kubernetes stops a pod: the operator shuts down and releases its lease. Waits
    /// up to `within` for it to exit (then SIGKILL); whether it exited cleanly.
    pub async fn terminate(&mut self, within: Duration) -> bool {
        let Some(mut child) = self.child.take() else {
            return true;
        };
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        let deadline = std::time::Instant::now() + within;
        loop {
            match child.try_wait() {
                Ok(Some(status)) => return status.success(),
                Ok(None) if std::time::Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return false;
                }
            }
        }
    }

    /// SIGKILL: no shutdown, no lease release, writes in flight cut off.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        self.kill9();
        // A failing test shows what the operator said (the log file goes with the test's
        // directory): the last lines, enough for the reconciles that led up to it.
        if std::thread::panicking() {
            let log = self.log();
            let lines: Vec<&str> = log.lines().collect();
            let tail = &lines[lines.len().saturating_sub(300)..];
            eprintln!(
                "--- the last {} lines of operator {} ---\n{}",
                tail.len(),
                self.name,
                tail.join("\n")
            );
        }
    }
}

/// Tunnels with one TunnelBinding each, every binding routing `routes` hostnames.
#[derive(Debug, Clone, Copy)]
pub struct Workload {
    pub tunnels: usize,
    pub routes: usize,
}

impl Workload {
    pub fn hostnames(&self) -> BTreeSet<String> {
        (0..self.tunnels)
            .flat_map(|t| (0..self.routes).map(move |r| hostname(t, r)))
            .collect()
    }
}

fn hostname(tunnel: usize, route: usize) -> String {
    format!("r{route}-t{tunnel}.{ZONE}")
}

/// Creates the API Secret, one Service, and the workload's Tunnels and bindings in `ns`.
pub async fn apply_workload(client: &Client, ns: &str, account_id: &str, w: Workload) {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let secret = serde_json::from_value(json!({
        "metadata": {"name": API_SECRET},
        "stringData": {"CLOUDFLARE_API_TOKEN": TOKEN},
    }))
    .expect("secret");
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .expect("api secret");
    let services: Api<Service> = Api::namespaced(client.clone(), ns);
    let service = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"ports": [{"name": "http", "port": 80}]},
    }))
    .expect("service");
    services
        .create(&PostParams::default(), &service)
        .await
        .expect("service");
    for t in 0..w.tunnels {
        add_tunnel(client, ns, account_id, t, w.routes).await;
    }
}

/// Tunnel `t<t>` and its binding of `routes` hostnames.
pub async fn add_tunnel(client: &Client, ns: &str, account_id: &str, t: usize, routes: usize) {
    let tunnels: Api<Tunnel> = Api::namespaced(client.clone(), ns);
    let tunnel: Tunnel = serde_json::from_value(json!({
        "apiVersion": "networking.cfargotunnel.com/v1alpha2",
        "kind": "Tunnel",
        "metadata": {"name": format!("t{t}")},
        "spec": {
            "newTunnel": {"name": format!("bad-days-{t}")},
            "cloudflare": {"domain": ZONE, "secret": API_SECRET, "accountId": account_id},
        },
    }))
    .expect("tunnel");
    tunnels
        .create(&PostParams::default(), &tunnel)
        .await
        .expect("create tunnel");
    let subjects: Vec<_> = (0..routes)
        .map(|r| json!({"name": "web", "spec": {"fqdn": hostname(t, r)}}))
        .collect();
    let bindings: Api<TunnelBinding> = Api::namespaced(client.clone(), ns);
    let binding: TunnelBinding = serde_json::from_value(json!({
        "apiVersion": "networking.cfargotunnel.com/v1alpha1",
        "kind": "TunnelBinding",
        "metadata": {"name": format!("b{t}")},
        "subjects": subjects,
        "tunnelRef": {"kind": "Tunnel", "name": format!("t{t}")},
    }))
    .expect("binding");
    bindings
        .create(&PostParams::default(), &binding)
        .await
        .expect("create binding");
}

/// Tunnel name → its `status.tunnelId`, for the Ready ones.
/// Each tunnel's name and its Ready condition's status, reason and message.
async fn readiness(client: &Client, ns: &str) -> Vec<(String, String, String, String)> {
    let tunnels: Api<Tunnel> = Api::namespaced(client.clone(), ns);
    let Ok(list) = tunnels.list(&ListParams::default()).await else {
        return Vec::new();
    };
    list.items
        .into_iter()
        .map(|t| {
            let name = t.metadata.name.clone().unwrap_or_default();
            let ready = t
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
                .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
                .unwrap_or_default();
            (name, ready.0, ready.1, ready.2)
        })
        .collect()
}

async fn ready_tunnels(client: &Client, ns: &str) -> Vec<(String, String)> {
    let tunnels: Api<Tunnel> = Api::namespaced(client.clone(), ns);
    let Ok(list) = tunnels.list(&ListParams::default()).await else {
        return Vec::new();
    };
    list.items
        .into_iter()
        .filter_map(|t| {
            let status = t.status.as_ref()?;
            let ready = status
                .conditions
                .iter()
                .flatten()
                .any(|c| c.type_ == "Ready" && c.status == "True");
            let id = status.tunnel_id.clone()?;
            ready.then(|| (t.metadata.name.clone().unwrap_or_default(), id))
        })
        .collect()
}

/// Is the zone exactly what the workload wants: per hostname one CNAME to its tunnel and one
/// `_managed` TXT, and nothing else? `Err` says what differs.
pub fn dns_exact(cf: &Cloudflare, w: Workload, ids: &[(String, String)]) -> Result<(), String> {
    let records = cf.records();
    let mut wanted_cnames = BTreeSet::new();
    let mut wanted_txts = BTreeSet::new();
    for (name, id) in ids {
        let t: usize = name.trim_start_matches('t').parse().unwrap_or(usize::MAX);
        for r in 0..w.routes {
            let host = hostname(t, r);
            wanted_txts.insert(format!("_managed.{host}"));
            wanted_cnames.insert((host, format!("{id}.cfargotunnel.com")));
        }
    }
    let cnames: Vec<(String, String)> = records
        .iter()
        .filter(|r| r.record_type == "CNAME")
        .map(|r| (r.name.clone(), r.content.clone()))
        .collect();
    let txts: Vec<String> = records
        .iter()
        .filter(|r| r.record_type == "TXT")
        .map(|r| r.name.clone())
        .collect();
    let cname_set: BTreeSet<_> = cnames.iter().cloned().collect();
    let txt_set: BTreeSet<_> = txts.iter().cloned().collect();
    if cnames.len() != cname_set.len() || txts.len() != txt_set.len() {
        return Err(format!(
            "duplicate records: {} CNAMEs for {} names, {} TXTs for {} names",
            cnames.len(),
            cname_set.len(),
            txts.len(),
            txt_set.len()
        ));
    }
    if cname_set != wanted_cnames {
        return Err(format!(
            "CNAMEs differ: missing {:?}, extra {:?}",
            wanted_cnames
                .difference(&cname_set)
                .take(5)
                .collect::<Vec<_>>(),
            cname_set
                .difference(&wanted_cnames)
                .take(5)
                .collect::<Vec<_>>()
        ));
    }
    if txt_set != wanted_txts {
        return Err(format!(
            "TXTs differ: missing {:?}, extra {:?}",
            wanted_txts.difference(&txt_set).take(5).collect::<Vec<_>>(),
            txt_set.difference(&wanted_txts).take(5).collect::<Vec<_>>()
        ));
    }
    Ok(())
}

/// Is the workload converged now: every tunnel Ready and the zone exact?
pub async fn converged(client: &Client, ns: &str, cf: &Cloudflare, w: Workload) -> bool {
    let ready = ready_tunnels(client, ns).await;
    ready.len() == w.tunnels && dns_exact(cf, w, &ready).is_ok()
}

/// Waits until every tunnel of the workload is Ready and the zone holds exactly its records,
/// then checks that Cloudflare holds exactly one live tunnel per object: no duplicate (a
/// second tunnel made for one object) and no orphan (a tunnel no object names).
pub async fn wait_converged(client: &Client, ns: &str, cf: &Cloudflare, w: Workload) {
    let result = poll_until(
        "every tunnel Ready and the zone exact",
        WAIT,
        POLL,
        || async {
            let ready = ready_tunnels(client, ns).await;
            (ready.len() == w.tunnels && dns_exact(cf, w, &ready).is_ok()).then_some(ready)
        },
    )
    .await;
    let ready = match result {
        Ok(ready) => ready,
        Err(e) => {
            let ready = ready_tunnels(client, ns).await;
            panic!(
                "{e}: {} of {} Ready; DNS: {:?}; Ready conditions: {:?}",
                ready.len(),
                w.tunnels,
                dns_exact(cf, w, &ready),
                readiness(client, ns).await
            );
        }
    };
    let named: BTreeSet<String> = ready.into_iter().map(|(_, id)| id).collect();
    assert_eq!(named.len(), w.tunnels, "two objects share a tunnel id");
    assert_eq!(
        cf.live_tunnel_ids(),
        named,
        "Cloudflare's live tunnels are exactly the objects' tunnels"
    );
}
