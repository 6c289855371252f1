//! Convergence benchmark (docs/design.md §8): many tunnels and routes applied at once to a local control
//! plane (etcd, kube-apiserver, kube-controller-manager) with `cftunnel run` as its own process
//! against the Cloudflare simulator. Records the time until every tunnel is Ready and every DNS
//! record exists, the Cloudflare calls by operation, the cloudflared rollouts and the operator's
//! peak RSS; then restarts the operator and records what the restart costs.
//!
//! Run: `scripts/bench-convergence.sh [--namespaces 10] [--tunnels-per-namespace 10] [--routes-per-tunnel 10]`
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use cftunnel_sim::{Operation, SimConfig, Simulator};
use cftunnel_testenv::{ControlPlane, ControlPlaneOptions};
use cftunnel_types::gateway::{Gateway, GatewayClass, HTTPRoute};
use cftunnel_types::names::CONTROLLER_NAME;
use cftunnel_types::names::{LABEL_APP, LABEL_EXPOSE_TUNNEL, service_annotations};
use cftunnel_types::{Tunnel, TunnelBinding};
use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{Namespace, Secret, Service};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DynamicObject, ListParams, PostParams};
use kube::{Api, Client, Resource};
use serde::Deserialize;
use serde_json::json;

const TOKEN: &str = "bench-api-token";
const ZONE: &str = "example.com";
const CONCURRENT_CREATES: usize = 16;
const POLL: Duration = Duration::from_secs(1);
const CONVERGE_LIMIT: Duration = Duration::from_secs(3600);
/// The operator counts as settled (before its stop, and after its restart) once no Cloudflare
/// call was made for this long.
const QUIET: Duration = Duration::from_secs(20);

#[derive(Debug, clap::Parser)]
struct Args {
    #[arg(long, default_value_t = 10)]
    namespaces: usize,
    #[arg(long, default_value_t = 10)]
    tunnels_per_namespace: usize,
    /// Half through one TunnelBinding per tunnel, half through labelled Services (rounded up).
    #[arg(long, default_value_t = 10)]
    routes_per_tunnel: usize,
    /// The `cftunnel` binary to benchmark (default: next to this example's directory).
    #[arg(long)]
    cftunnel: Option<PathBuf>,
    /// Every Tunnel's `spec.configSource`: `Local` (config.yaml, a rollout per route change) or
    /// `Cloudflare` (the ingress pushed to the tunnel's configuration).
    #[arg(long, default_value = "Local")]
    config_source: String,
    /// What declares the routes: `bindings` (half through one TunnelBinding per tunnel, half
    /// through labelled Services) or `httproutes` (one HTTPRoute per route, on one Gateway per
    /// tunnel; the Gateway API CRDs the chart ships are installed first).
    #[arg(long, default_value = "bindings")]
    source: String,
    /// Keep the operator's logs (one file per start) in this directory.
    #[arg(long)]
    log_dir: Option<PathBuf>,
    /// `RUST_LOG` of the operator.
    #[arg(long, default_value = "warn")]
    log_filter: String,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Args = clap::Parser::parse();
    let binary = match &args.cftunnel {
        Some(path) => path.clone(),
        None => default_binary()?,
    };
    let gateway_api = match args.source.as_str() {
        "bindings" => false,
        "httproutes" => true,
        other => bail!("--source is bindings or httproutes, not {other:?}"),
    };
    let mut options = ControlPlaneOptions::for_cftunnel();
    if gateway_api {
        options.crds.extend(gateway_api_crds()?);
    }
    let plane = ControlPlane::start(options).await?;
    let sim = Simulator::new(SimConfig {
        account_name: "Bench Account".into(),
        zones: vec![ZONE.into()],
        tokens: vec![TOKEN.into()],
        ..Default::default()
    });
    let cloudflare = sim.serve("127.0.0.1:0".parse()?).await?;
    let client = plane.admin_client()?;
    let plan = Plan::new(&args, &sim.account_id());
    let remote = match args.config_source.as_str() {
        "Local" => false,
        "Cloudflare" => true,
        other => bail!("--config-source is Local or Cloudflare, not {other:?}"),
    };
    let tunnels = plan.tunnel_count();
    let routes = plan.hostnames.len();
    println!(
        "convergence: {tunnels} tunnels, {routes} routes, binary {}",
        binary.display()
    );

    let mut operator = Operator::start(&plane, &binary, &cloudflare.url, &args)?;
    let started = Instant::now();
    plan.create(&client).await?;
    let created = started.elapsed();
    println!("  objects created in {:.1}s", created.as_secs_f64());
    let ready = wait(started, &mut operator, "every tunnel Ready", || async {
        Ok(tunnel_progress(&client).await?.0 == tunnels)
    })
    .await?;
    println!("  every tunnel Ready after {:.1}s", ready.as_secs_f64());
    let dns = wait(started, &mut operator, "every DNS record", || async {
        Ok(dns_complete(&sim, &plan.hostnames))
    })
    .await?;
    println!(
        "  every DNS record after {:.1}s ({:.1}s after the last route was created)",
        dns.as_secs_f64(),
        dns.saturating_sub(created).as_secs_f64()
    );
    let routed = wait(started, &mut operator, "every route in status", || async {
        Ok(tunnel_progress(&client).await?.1 == routes)
    })
    .await?;
    let pushed = match remote {
        true => {
            let pushed = wait(started, &mut operator, "every route pushed", || async {
                Ok(pushed_hostnames(&sim) == plan.hostnames)
            })
            .await?;
            println!(
                "  every route in a pushed configuration after {:.1}s",
                pushed.as_secs_f64()
            );
            Some(pushed)
        }
        false => None,
    };
    // The operator is stopped only once it went quiet: a DNS sync still running (a TXT whose
    // `DnsId` patch is the second batch of a sync) would otherwise be finished by the restart
    // and counted there.
    settle(&sim, &client, tunnels, &mut operator).await?;
    let first = Phase {
        calls: calls_by_operation(&sim),
        rollouts: extra_rollouts(&client).await?,
        peak_rss_kib: operator.peak_rss_kib(),
    };
    println!(
        "  routes in status after {:.1}s; peak RSS {} MiB",
        routed.as_secs_f64(),
        first.peak_rss_kib / 1024
    );

    operator.stop()?;
    sim.reset_counters();
    let mut operator = Operator::start(&plane, &binary, &cloudflare.url, &args)?;
    let restarted = Instant::now();
    let settled = settle(&sim, &client, tunnels, &mut operator).await?;
    let restart = Phase {
        calls: calls_by_operation(&sim),
        rollouts: extra_rollouts(&client).await? - first.rollouts,
        peak_rss_kib: operator.peak_rss_kib(),
    };
    println!(
        "  restart settled after {:.1}s (no call for {}s since)",
        settled.saturating_sub(QUIET).as_secs_f64(),
        QUIET.as_secs()
    );
    let _ = restarted;
    operator.stop()?;

    let at = Milestones { ready, dns, pushed };
    report(&args, tunnels, routes, &at, &first, &restart);
    cloudflare.shutdown().await;
    plane.stop().await;
    Ok(())
}

/// What the benchmark applies: namespaces with an API Secret, Tunnels, and their routes.
struct Plan {
    account_id: String,
    namespaces: usize,
    tunnels_per_namespace: usize,
    routes_per_tunnel: usize,
    config_source: String,
    gateway_api: bool,
    hostnames: BTreeSet<String>,
}

impl Plan {
    fn new(args: &Args, account_id: &str) -> Plan {
        let mut plan = Plan {
            account_id: account_id.to_string(),
            namespaces: args.namespaces,
            tunnels_per_namespace: args.tunnels_per_namespace,
            routes_per_tunnel: args.routes_per_tunnel,
            config_source: args.config_source.clone(),
            gateway_api: args.source == "httproutes",
            hostnames: BTreeSet::new(),
        };
        for (ns, tunnel) in plan.tunnels() {
            for (service, _) in plan.services(&tunnel) {
                plan.hostnames.insert(format!("{ns}-{service}.{ZONE}"));
            }
        }
        plan
    }

    fn tunnel_count(&self) -> usize {
        self.namespaces * self.tunnels_per_namespace
    }

    fn tunnels(&self) -> Vec<(String, String)> {
        (0..self.namespaces)
            .flat_map(|n| {
                (0..self.tunnels_per_namespace)
                    .map(move |t| (format!("bench-{n}"), format!("t{t}")))
            })
            .collect()
    }

    /// Services of one tunnel and whether a binding routes them (`<tunnel>-b<k>`) or a label
    /// (`<tunnel>-l<k>`).
    fn services(&self, tunnel: &str) -> Vec<(String, bool)> {
        let bound = self.routes_per_tunnel / 2;
        (0..self.routes_per_tunnel)
            .map(|k| match k < bound {
                true => (format!("{tunnel}-b{k}"), true),
                false => (format!("{tunnel}-l{k}"), false),
            })
            .collect()
    }

    async fn create(&self, client: &Client) -> anyhow::Result<()> {
        let mut objects: Vec<(ApiResource, serde_json::Value)> = Vec::new();
        for n in 0..self.namespaces {
            let ns = format!("bench-{n}");
            create_object(client, object::<Namespace>(json!({"name": ns}), json!({}))).await?;
            objects.push(object::<Secret>(
                json!({"name": "cloudflare", "namespace": ns}),
                json!({"stringData": {"CLOUDFLARE_API_TOKEN": TOKEN}}),
            ));
        }
        // Tunnels first, then their routes, as one `kubectl apply -f` of a directory would.
        for (ns, tunnel) in self.tunnels() {
            objects.push(object::<Tunnel>(
                json!({"name": tunnel, "namespace": ns}),
                json!({"spec": {"newTunnel": {"name": format!("{ns}-{tunnel}")},
                    "configSource": self.config_source,
                    "cloudflare": {"domain": ZONE, "secret": "cloudflare", "accountId": self.account_id}}}),
            ));
        }
        if self.gateway_api {
            self.gateway_objects(client, &mut objects).await?;
            return create_all(client, objects).await;
        }
        for (ns, tunnel) in self.tunnels() {
            let mut subjects = Vec::new();
            for (service, bound) in self.services(&tunnel) {
                let hostname = format!("{ns}-{service}.{ZONE}");
                let metadata = match bound {
                    true => json!({"name": service, "namespace": ns}),
                    false => json!({"name": service, "namespace": ns,
                        "labels": {LABEL_EXPOSE_TUNNEL: tunnel},
                        "annotations": {service_annotations::HOSTNAME: hostname}}),
                };
                objects.push(object::<Service>(
                    metadata,
                    json!({"spec": {"ports": [{"name": "http", "port": 80}]}}),
                ));
                if bound {
                    subjects.push(json!({"name": service, "spec": {"fqdn": hostname}}));
                }
            }
            if !subjects.is_empty() {
                objects.push(object::<TunnelBinding>(
                    json!({"name": tunnel, "namespace": ns}),
                    json!({"subjects": subjects, "tunnelRef": {"kind": "Tunnel", "name": tunnel}}),
                ));
            }
        }
        create_all(client, objects).await
    }

    /// A GatewayClass, one Gateway per tunnel (its own `infrastructure.parametersRef`), and one
    /// Service and HTTPRoute per route.
    async fn gateway_objects(
        &self,
        client: &Client,
        objects: &mut Vec<(ApiResource, serde_json::Value)>,
    ) -> anyhow::Result<()> {
        let class = ApiResource::erase::<GatewayClass>(&());
        create_object(
            client,
            (
                class,
                json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
                       "metadata": {"name": "bench"},
                       "spec": {"controllerName": CONTROLLER_NAME}}),
            ),
        )
        .await?;
        for (ns, tunnel) in self.tunnels() {
            objects.push(object::<Gateway>(
                json!({"name": tunnel, "namespace": ns}),
                json!({"spec": {"gatewayClassName": "bench",
                    "infrastructure": {"parametersRef": {"group": "networking.cfargotunnel.com", "kind": "Tunnel", "name": tunnel}},
                    "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]}}),
            ));
            for (service, _) in self.services(&tunnel) {
                let hostname = format!("{ns}-{service}.{ZONE}");
                objects.push(object::<Service>(
                    json!({"name": service, "namespace": ns}),
                    json!({"spec": {"ports": [{"name": "http", "port": 80}]}}),
                ));
                objects.push(object::<HTTPRoute>(
                    json!({"name": service, "namespace": ns}),
                    json!({"spec": {"parentRefs": [{"name": tunnel}], "hostnames": [hostname],
                        "rules": [{"backendRefs": [{"name": service, "port": 80}]}]}}),
                ));
            }
        }
        Ok(())
    }
}

async fn create_all(
    client: &Client,
    objects: Vec<(ApiResource, serde_json::Value)>,
) -> anyhow::Result<()> {
    stream::iter(objects)
        .map(|object| create_object(client, object))
        .buffer_unordered(CONCURRENT_CREATES)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}

/// The Gateway API CRDs the chart installs (`charts/cftunnel/files/gateway-api-crds.yaml`).
fn gateway_api_crds() -> anyhow::Result<Vec<CustomResourceDefinition>> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/charts/cftunnel/files/gateway-api-crds.yaml"
    );
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?;
    let mut crds = Vec::new();
    for document in serde_yaml_ng::Deserializer::from_str(&text) {
        let value = serde_json::Value::deserialize(document)?;
        if value.is_object() {
            crds.push(serde_json::from_value(value)?);
        }
    }
    Ok(crds)
}

/// A manifest of kind `K` with `metadata` and the other top-level fields in `rest`.
fn object<K: Resource<DynamicType = ()>>(
    metadata: serde_json::Value,
    mut rest: serde_json::Value,
) -> (ApiResource, serde_json::Value) {
    rest["apiVersion"] = json!(K::api_version(&()));
    rest["kind"] = json!(K::kind(&()));
    rest["metadata"] = metadata;
    (ApiResource::erase::<K>(&()), rest)
}

async fn create_object(
    client: &Client,
    (resource, manifest): (ApiResource, serde_json::Value),
) -> anyhow::Result<()> {
    let object: DynamicObject = serde_json::from_value(manifest)?;
    let api: Api<DynamicObject> = match object.metadata.namespace.as_deref() {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    api.create(&PostParams::default(), &object)
        .await
        .with_context(|| format!("creating {} {:?}", resource.kind, object.metadata.name))?;
    Ok(())
}

/// `cftunnel run` as a child process, its log in a file, killed when dropped.
struct Operator {
    child: Option<Child>,
    log: PathBuf,
    peak_rss_kib: u64,
}

impl Operator {
    fn start(
        plane: &ControlPlane,
        binary: &PathBuf,
        cloudflare_url: &str,
        args: &Args,
    ) -> anyhow::Result<Operator> {
        let dir = plane.dir().join("bench-operator");
        std::fs::create_dir_all(&dir)?;
        let log_dir = args.log_dir.clone().unwrap_or_else(|| dir.clone());
        std::fs::create_dir_all(&log_dir)?;
        let cert = plane.ca().issue_server_cert(&["127.0.0.1"])?;
        std::fs::write(dir.join("tls.crt"), &cert.cert_pem)?;
        std::fs::write(dir.join("tls.key"), &cert.key_pem)?;
        let log = log_dir.join(format!("cftunnel-{}.log", unique()));
        let child = Command::new(binary)
            .args([
                "run",
                "--webhook-listen",
                "127.0.0.1:0",
                "--health-listen",
                "127.0.0.1:0",
            ])
            .arg("--tls-cert-file")
            .arg(dir.join("tls.crt"))
            .arg("--tls-key-file")
            .arg(dir.join("tls.key"))
            .args(["--certificate-mode", "files", "--leader-elect", "false"])
            .args(["--cloudflare-api-url", cloudflare_url])
            .env("KUBECONFIG", plane.admin_kubeconfig())
            .env("RUST_LOG", &args.log_filter)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log)?)
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))?;
        Ok(Operator {
            child: Some(child),
            log,
            peak_rss_kib: 0,
        })
    }

    /// Fails when the operator exited; samples its peak RSS (the kernel's high-water mark).
    fn check(&mut self) -> anyhow::Result<()> {
        let Some(child) = self.child.as_mut() else {
            bail!("the operator is stopped");
        };
        if let Some(status) = child.try_wait()? {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            bail!("cftunnel run exited with {status}:\n{log}");
        }
        let status = std::fs::read_to_string(format!("/proc/{}/status", child.id()))?;
        if let Some(kib) = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        {
            self.peak_rss_kib = self.peak_rss_kib.max(kib);
        }
        Ok(())
    }

    fn peak_rss_kib(&mut self) -> u64 {
        let _ = self.check();
        self.peak_rss_kib
    }

    /// SIGTERM (a clean shutdown), then waits for the exit.
    fn stop(&mut self) -> anyhow::Result<()> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()?;
        let deadline = Instant::now() + Duration::from_secs(60);
        while child.try_wait()?.is_none() {
            if Instant::now() > deadline {
                child.kill()?;
                bail!("cftunnel run ignored SIGTERM for 60 s");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(())
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn unique() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default()
}

/// Polls `done` until true; the elapsed time since `started`.
async fn wait<F, Fut>(
    started: Instant,
    operator: &mut Operator,
    what: &str,
    mut done: F,
) -> anyhow::Result<Duration>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<bool>>,
{
    loop {
        operator.check()?;
        if done().await? {
            return Ok(started.elapsed());
        }
        if started.elapsed() > CONVERGE_LIMIT {
            bail!("gave up waiting for {what}");
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Tunnels with `Ready=True`, and the routes their statuses list.
async fn tunnel_progress(client: &Client) -> anyhow::Result<(usize, usize)> {
    let tunnels = Api::<Tunnel>::all(client.clone())
        .list(&ListParams::default())
        .await?;
    let ready = tunnels
        .items
        .iter()
        .filter_map(|t| t.status.as_ref()?.conditions.as_ref())
        .filter(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        .count();
    let routes = tunnels
        .items
        .iter()
        .filter_map(|t| t.status.as_ref()?.routes.as_ref().map(Vec::len))
        .sum();
    Ok((ready, routes))
}

/// Every hostname has its CNAME and its ownership TXT record.
fn dns_complete(sim: &Simulator, hostnames: &BTreeSet<String>) -> bool {
    let records = sim.dns_records(ZONE);
    let cnames = records
        .iter()
        .filter(|r| r.record_type == "CNAME" && hostnames.contains(&r.name))
        .count();
    let txts = records
        .iter()
        .filter(|r| r.record_type == "TXT")
        .filter(|r| {
            r.name
                .strip_prefix("_managed.")
                .is_some_and(|h| hostnames.contains(h))
        })
        .count();
    cnames == hostnames.len() && txts == hostnames.len()
}

/// The hostnames of every rule of every tunnel's configuration at Cloudflare.
fn pushed_hostnames(sim: &Simulator) -> BTreeSet<String> {
    sim.tunnels()
        .into_iter()
        .filter_map(|t| t.config)
        .flat_map(|config| {
            config["ingress"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|r| r["hostname"].as_str().map(str::to_string))
                .collect::<Vec<_>>()
        })
        .collect()
}

fn calls_by_operation(sim: &Simulator) -> BTreeMap<Operation, u64> {
    Operation::ALL
        .into_iter()
        .map(|op| (op, sim.calls(op)))
        .filter(|(_, n)| *n > 0)
        .collect()
}

/// ReplicaSets beyond the first of each cloudflared Deployment: the rollouts after the first.
async fn extra_rollouts(client: &Client) -> anyhow::Result<usize> {
    let selector = ListParams::default().labels(&format!("{LABEL_APP}=cloudflared"));
    let deployments = Api::<Deployment>::all(client.clone())
        .list(&selector)
        .await?;
    let sets = Api::<ReplicaSet>::all(client.clone())
        .list(&ListParams::default())
        .await?;
    let owned = sets
        .items
        .iter()
        .filter(|rs| {
            rs.metadata.owner_references.iter().flatten().any(|o| {
                deployments
                    .items
                    .iter()
                    .any(|d| d.metadata.uid.as_deref() == Some(o.uid.as_str()))
            })
        })
        .count();
    Ok(owned.saturating_sub(deployments.items.len()))
}

/// Waits for every tunnel to be Ready and then for Cloudflare to go quiet (no call for [`QUIET`]).
async fn settle(
    sim: &Simulator,
    client: &Client,
    tunnels: usize,
    operator: &mut Operator,
) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let mut last_change = Instant::now();
    let mut last_calls = sim.total_calls();
    loop {
        operator.check()?;
        let calls = sim.total_calls();
        if calls != last_calls {
            last_calls = calls;
            last_change = Instant::now();
        }
        if last_change.elapsed() >= QUIET && tunnel_progress(client).await?.0 == tunnels {
            return Ok(started.elapsed());
        }
        if started.elapsed() > CONVERGE_LIMIT {
            bail!("the operator never went quiet");
        }
        tokio::time::sleep(POLL).await;
    }
}

struct Phase {
    calls: BTreeMap<Operation, u64>,
    rollouts: usize,
    peak_rss_kib: u64,
}

impl Phase {
    fn total(&self) -> u64 {
        self.calls.values().sum()
    }

    fn writes(&self) -> u64 {
        use Operation::*;
        self.calls
            .iter()
            .filter(|(op, _)| {
                matches!(
                    op,
                    CreateTunnel
                        | DeleteTunnel
                        | CleanupConnections
                        | PutConfiguration
                        | CreateDnsRecord
                        | UpdateDnsRecord
                        | PatchDnsRecord
                        | DeleteDnsRecord
                        | BatchDnsRecords
                )
            })
            .map(|(_, n)| n)
            .sum()
    }

    /// DNS write requests (single-record writes and batches).
    fn dns_writes(&self) -> u64 {
        use Operation::*;
        self.calls
            .iter()
            .filter(|(op, _)| {
                matches!(
                    op,
                    CreateDnsRecord
                        | UpdateDnsRecord
                        | PatchDnsRecord
                        | DeleteDnsRecord
                        | BatchDnsRecords
                )
            })
            .map(|(_, n)| n)
            .sum()
    }

    fn breakdown(&self) -> String {
        self.calls
            .iter()
            .map(|(op, n)| format!("{op:?} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// When the first convergence reached each milestone, from the first create.
#[derive(Clone, Copy)]
struct Milestones {
    ready: Duration,
    dns: Duration,
    /// Every route in a pushed configuration (Cloudflare mode only).
    pushed: Option<Duration>,
}

fn report(
    args: &Args,
    tunnels: usize,
    routes: usize,
    at: &Milestones,
    first: &Phase,
    restart: &Phase,
) {
    let Milestones { ready, dns, pushed } = *at;
    println!(
        "\n| phase | tunnels | routes | all Ready | all DNS records | Cloudflare calls (writes) | extra rollouts | operator peak RSS |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    println!(
        "| first convergence | {tunnels} | {routes} | {:.0} s | {:.0} s | {} ({}) | {} | {} MiB |",
        ready.as_secs_f64(),
        dns.as_secs_f64(),
        first.total(),
        first.writes(),
        first.rollouts,
        first.peak_rss_kib / 1024
    );
    println!(
        "| restart | {tunnels} | {routes} | – | – | {} ({}) | {} | {} MiB |",
        restart.total(),
        restart.writes(),
        restart.rollouts,
        restart.peak_rss_kib / 1024
    );
    println!(
        "\nDNS write requests: first convergence {}, restart {}",
        first.dns_writes(),
        restart.dns_writes()
    );
    if let Some(pushed) = pushed {
        println!(
            "configuration PUTs: first convergence {} (every route pushed after {:.0} s), restart {}",
            first.calls.get(&Operation::PutConfiguration).unwrap_or(&0),
            pushed.as_secs_f64(),
            restart
                .calls
                .get(&Operation::PutConfiguration)
                .unwrap_or(&0),
        );
    }
    println!(
        "calls per route: first convergence {:.2}, restart {:.2}",
        first.total() as f64 / routes.max(1) as f64,
        restart.total() as f64 / routes.max(1) as f64
    );
    println!("first convergence calls: {}", first.breakdown());
    println!("restart calls: {}", restart.breakdown());
    println!(
        "({} namespaces × {} tunnels × {} routes, configSource {}, routes from {})",
        args.namespaces,
        args.tunnels_per_namespace,
        args.routes_per_tunnel,
        args.config_source,
        args.source
    );
}

/// `target/<profile>/cftunnel`, next to `target/<profile>/examples/`.
fn default_binary() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let profile_dir = exe
        .parent()
        .and_then(|examples| examples.parent())
        .context("locating the target directory")?;
    let binary = profile_dir.join("cftunnel");
    if !binary.exists() {
        bail!(
            "{} does not exist: build it, or pass --cftunnel",
            binary.display()
        );
    }
    Ok(binary)
}
