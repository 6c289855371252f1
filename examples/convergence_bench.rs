//! Convergence benchmark (docs/design.md §8): many tunnels and routes applied at once to a local control
//! plane (etcd, kube-apiserver, kube-controller-manager) with `cftunnel run` as its own process
//! against the Cloudflare simulator. Records the time until every tunnel is Ready and every DNS
//! record exists, the Cloudflare calls by operation, the cloudflared rollouts and the operator's
//! peak RSS and CPU time; then restarts the operator and records what the restart costs.
//!
//! With `--budget default` the simulator enforces Cloudflare's budget (1,200 requests per 300 s
//! per token, then 300 s blocked) and the results count its 429s; the floor is the time the
//! calls take at cftunnel's pace (`--cloudflare-budget`, 900 per 5 minutes by default), the
//! target 1.3 × floor + 120 s. `--probes` adds a tunnel and deletes one once half are Ready.
//! `--out-dir` keeps the results, one sample a second of the first sync (CSV) and its chart
//! (SVG).
//!
//! Run: `scripts/bench-convergence.sh [--namespaces 10] [--tunnels-per-namespace 10]
//! [--routes-per-tunnel 10] [--routes-as bindings|httproute] [--budget default|N/SECONDS]
//! [--cloudflare-budget 900/5m] [--probes] [--steady 720] [--private-routes-per-tunnel 1]
//! [--out-dir DIR]`
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use cftunnel_sim::{Operation, SimConfig, Simulator};
use cftunnel_testenv::{ControlPlane, ControlPlaneOptions};
use cftunnel_types::gateway::{Gateway, GatewayClass, HTTPRoute};
use cftunnel_types::names::CONTROLLER_NAME;
use cftunnel_types::names::{LABEL_APP, LABEL_EXPOSE_TUNNEL, service_annotations};
use cftunnel_types::network::NetworkRoute;
use cftunnel_types::{Tunnel, TunnelBinding};
use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{Namespace, Secret, Service};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DynamicObject, ListParams, PostParams};
use kube::{Api, Client, Resource};
use serde::Deserialize;
use serde_json::json;

#[path = "convergence_bench/admission.rs"]
mod admission;
#[path = "convergence_bench/budget.rs"]
mod budget;
#[path = "convergence_bench/first_sync.rs"]
mod first_sync;
#[path = "convergence_bench/operator.rs"]
mod operator;
#[path = "convergence_bench/report.rs"]
mod report;
#[path = "convergence_bench/samples.rs"]
mod samples;
#[path = "convergence_bench/single_route.rs"]
mod single_route;
#[path = "convergence_bench/steady.rs"]
mod steady;
#[path = "convergence_bench/svg.rs"]
mod svg;

use first_sync::{FirstSyncOptions, first_sync};
use operator::{Operator, OperatorOptions, free_loopback_port, wait_listening};
use report::{Budgets, report, write_outputs};

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
    /// through labelled Services) or `httproute` (one HTTPRoute per route, on one Gateway per
    /// tunnel; the Gateway API CRDs the chart ships are installed first).
    #[arg(long, alias = "source", default_value = "bindings")]
    routes_as: String,
    /// The request budget the simulator enforces per token: `default` (Cloudflare's 1,200 per
    /// 300 s, then 300 s blocked) or `N/SECONDS` (blocked for the window). None when not given.
    #[arg(long)]
    budget: Option<String>,
    /// cftunnel's `--cloudflare-budget` (`REQUESTS/WINDOW`, e.g. `900/5m`); its default when
    /// not given. The floor is computed from it.
    #[arg(long)]
    cloudflare_budget: Option<String>,
    /// Once half of the tunnels are Ready, create one more Tunnel (`late`) with its routes and
    /// delete a Ready one (`gone`); report how long until `late` is Ready with a record for
    /// each of its hostnames, and until `gone` is deleted at Cloudflare.
    #[arg(long)]
    probes: bool,
    /// After the restart, leave the operator untouched this many seconds and count its calls
    /// (drift checks only, none a write): 720 sees every tunnel's first check after the
    /// restart at the default drift interval of 600 s.
    #[arg(long)]
    steady: Option<u64>,
    /// Private routes: one NetworkRoute per tunnel with this many CIDRs (`10.N.T.0/24`…), in
    /// the account's default network. Routes of all kinds share Cloudflare's limit of 1,000 per
    /// account: tunnels × this stays under it.
    #[arg(long, default_value_t = 0)]
    private_routes_per_tunnel: usize,
    /// Write the results (`results.md`), the samples (`samples.csv`) and the chart
    /// (`convergence.svg`) here.
    #[arg(long)]
    out_dir: Option<PathBuf>,
    /// Start the restarted operator with this command (split at spaces) instead of the
    /// binary, its arguments appended: e.g. `heaptrack -o /tmp/restart PATH`, PATH the
    /// `cftunnel_sysalloc` example (the system allocator), to see what memory after a restart
    /// holds. Its peak RSS is then the wrapper's.
    #[arg(long)]
    restart_under: Option<String>,
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
    // SIGINT or SIGTERM ends the run by dropping it: the control plane, the simulator and the
    // operator stop with it. (Killed without this, the benchmark left its kube-apiserver, etcd
    // and cftunnel running, and they slowed the next run.)
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        result = run(args) => result,
        _ = tokio::signal::ctrl_c() => bail!("interrupted"),
        _ = terminate.recv() => bail!("terminated"),
    }
}

async fn run(args: Args) -> anyhow::Result<()> {
    let binary = match &args.cftunnel {
        Some(path) => path.clone(),
        None => default_binary()?,
    };
    let gateway_api = match args.routes_as.as_str() {
        "bindings" => false,
        "httproute" | "httproutes" => true,
        other => bail!("--routes-as is bindings or httproute, not {other:?}"),
    };
    let remote = match args.config_source.as_str() {
        "Local" => false,
        "Cloudflare" => true,
        other => bail!("--config-source is Local or Cloudflare, not {other:?}"),
    };
    let sim_budget = args
        .budget
        .as_deref()
        .map(budget::parse_sim_budget)
        .transpose()?;
    let pace_budget = match args.cloudflare_budget.as_deref() {
        Some(text) => budget::parse_cftunnel_budget(text)?,
        None => budget::CFTUNNEL_DEFAULT,
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
        budget: sim_budget,
        ..Default::default()
    });
    let cloudflare = sim.serve("127.0.0.1:0".parse()?).await?;
    let client = plane.admin_client()?;
    let plan = Arc::new(Plan::new(&args, gateway_api, &sim.account_id()));
    let tunnels = plan.tunnel_count();
    let routes = plan.hostnames.len();
    println!(
        "convergence: {tunnels} tunnels, {routes} routes, binary {}",
        binary.display()
    );

    // The shipped admission webhooks and CRD conversion, served by the operator: what a user's
    // cluster calls on every write (and without conversion the API server's watch cache of
    // Tunnels fails on every object it would convert, relisting them all once a second).
    let webhook = free_loopback_port()?;
    let mut operator = Operator::start(
        &plane,
        &binary,
        &cloudflare.url,
        webhook,
        &operator_options(&args, None),
    )?;
    wait_listening(webhook).await?;
    cftunnel_testenv::registration::register_webhook(&plane, webhook, None).await?;
    let admitted_before = admission::snapshot(&client).await?;
    let started = Instant::now();
    let creating = {
        let (plan, client) = (plan.clone(), client.clone());
        tokio::spawn(async move {
            plan.create(&client).await?;
            anyhow::Ok(started.elapsed())
        })
    };
    let sync = first_sync(
        &sim,
        &client,
        &plan,
        &mut operator,
        creating,
        started,
        FirstSyncOptions {
            remote,
            probes: args.probes,
        },
    )
    .await?;
    println!("  objects created in {:.1}s", sync.created.as_secs_f64());
    println!(
        "  every tunnel Ready after {:.1}s",
        sync.ready.as_secs_f64()
    );
    println!(
        "  every DNS record after {:.1}s ({:.1}s after the last route was created)",
        sync.dns.as_secs_f64(),
        sync.dns.saturating_sub(sync.created).as_secs_f64()
    );
    if let Some(pushed) = sync.pushed {
        println!(
            "  every route in a pushed configuration after {:.1}s",
            pushed.as_secs_f64()
        );
    }
    // The operator is stopped only once it went quiet: a DNS sync still running (a TXT whose
    // `DnsId` patch is the second batch of a sync) would otherwise be finished by the restart
    // and counted there.
    settle(&sim, &client, tunnels, &mut operator).await?;
    let first = Phase::measure(&sim, &client, &mut operator).await?;
    let admitted_first = admission::snapshot(&client).await?;
    println!(
        "  routes in status after {:.1}s; peak RSS {} MiB",
        sync.routed.as_secs_f64(),
        first.peak_rss_kib / 1024
    );

    operator.stop()?;
    sim.reset_counters();
    let under = args.restart_under.as_deref();
    let mut operator = Operator::start(
        &plane,
        &binary,
        &cloudflare.url,
        webhook,
        &operator_options(&args, under),
    )?;
    let settled = settle(&sim, &client, tunnels, &mut operator).await?;
    let mut restart = Phase::measure(&sim, &client, &mut operator).await?;
    restart.rollouts -= first.rollouts.min(restart.rollouts);
    // At rest: writes the webhooks judge and nothing stores, before the steady window (they
    // change nothing the operator sees, so they cost it no call).
    let resting = admission::snapshot(&client).await?;
    admission::rest_requests(&client, &plan).await?;
    let admission = admission::Admission {
        first: admission::since(&admitted_first, &admitted_before),
        rest: admission::since(&admission::snapshot(&client).await?, &resting),
    };
    println!(
        "  restart settled after {:.1}s (no call for {}s since)",
        settled.saturating_sub(QUIET).as_secs_f64(),
        QUIET.as_secs()
    );
    // Counted apart: the restart's calls are measured above, the steady window starts after.
    let single = single_route::measure(&client, &sim, &plan, &operator).await?;
    println!(
        "  one route added at rest: its CNAME after {:.1}s{}",
        single.dns.as_secs_f64(),
        single
            .pushed
            .map(|p| format!(", pushed after {:.1}s", p.as_secs_f64()))
            .unwrap_or_default()
    );
    if args.steady.is_some() {
        // The steady window counts drift checks alone: the route's last writes come first.
        settle(&sim, &client, tunnels, &mut operator).await?;
    }
    let steady = match args.steady {
        Some(seconds) => {
            let window = Duration::from_secs(seconds);
            println!("  steady state: {seconds}s untouched");
            let mut steady =
                steady::observe(&sim, &client, &mut operator, window, pace_budget).await?;
            steady.phase.rollouts -= first.rollouts.min(steady.phase.rollouts);
            steady.phase.rollouts -= restart.rollouts.min(steady.phase.rollouts);
            Some(steady)
        }
        None => None,
    };
    operator.stop()?;

    let budgets = Budgets {
        sim: sim_budget,
        pace: pace_budget,
    };
    let phases = report::Phases {
        first: &first,
        restart: &restart,
        steady: steady.as_ref(),
        single: &single,
        admission: &admission,
    };
    let results = report(&args, tunnels, routes, &sync, &phases, &budgets);
    print!("{results}");
    if let Some(dir) = &args.out_dir {
        write_outputs(dir, &args, &plan, &sync, &budgets, &results)?;
        println!("results, samples and chart written to {}", dir.display());
    }
    cloudflare.shutdown().await;
    plane.stop().await;
    Ok(())
}

fn operator_options<'a>(args: &'a Args, under: Option<&'a str>) -> OperatorOptions<'a> {
    OperatorOptions {
        log_dir: args.log_dir.as_deref(),
        log_filter: &args.log_filter,
        cloudflare_budget: args.cloudflare_budget.as_deref(),
        under,
    }
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
    private_routes_per_tunnel: usize,
}

impl Plan {
    fn new(args: &Args, gateway_api: bool, account_id: &str) -> Plan {
        let mut plan = Plan {
            account_id: account_id.to_string(),
            namespaces: args.namespaces,
            tunnels_per_namespace: args.tunnels_per_namespace,
            routes_per_tunnel: args.routes_per_tunnel,
            config_source: args.config_source.clone(),
            gateway_api,
            hostnames: BTreeSet::new(),
            private_routes_per_tunnel: args.private_routes_per_tunnel,
        };
        for (ns, tunnel) in plan.tunnels() {
            let hostnames = plan.hostnames_of(&ns, &tunnel);
            plan.hostnames.extend(hostnames);
        }
        plan
    }

    fn hostnames_of(&self, ns: &str, tunnel: &str) -> Vec<String> {
        self.services(tunnel)
            .into_iter()
            .map(|(service, _)| format!("{ns}-{service}.{ZONE}"))
            .collect()
    }

    fn tunnel(&self, ns: &str, tunnel: &str) -> (ApiResource, serde_json::Value) {
        object::<Tunnel>(
            json!({"name": tunnel, "namespace": ns}),
            json!({"spec": {"newTunnel": {"name": format!("{ns}-{tunnel}")},
                "configSource": self.config_source,
                "cloudflare": {"domain": ZONE, "secret": "cloudflare", "accountId": self.account_id}}}),
        )
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
            objects.push(self.tunnel(&ns, &tunnel));
        }
        if self.gateway_api {
            create_gateway_class(client).await?;
        }
        for (ns, tunnel) in self.tunnels() {
            objects.extend(self.routes_of(&ns, &tunnel));
        }
        for (index, (ns, tunnel)) in self.tunnels().into_iter().enumerate() {
            if self.private_routes_per_tunnel == 0 {
                break;
            }
            let cidrs: Vec<String> = (0..self.private_routes_per_tunnel)
                .map(|k| {
                    let n = index * self.private_routes_per_tunnel + k;
                    format!("10.{}.{}.0/24", n / 256, n % 256)
                })
                .collect();
            objects.push(object::<NetworkRoute>(
                json!({"name": tunnel, "namespace": ns}),
                json!({"spec": {"tunnelRef": {"name": tunnel}, "cidrs": cidrs}}),
            ));
        }
        create_all(client, objects).await
    }

    /// The objects that route one tunnel's hostnames: its Services with a binding of half of
    /// them and labels on the others, or with `--routes-as httproute` its Gateway, Services and
    /// HTTPRoutes.
    fn routes_of(&self, ns: &str, tunnel: &str) -> Vec<(ApiResource, serde_json::Value)> {
        let mut objects = Vec::new();
        if self.gateway_api {
            self.gateway_objects(ns, tunnel, &mut objects);
            return objects;
        }
        let mut subjects = Vec::new();
        for (service, bound) in self.services(tunnel) {
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
        objects
    }

    /// One tunnel's Gateway (its own `infrastructure.parametersRef`), and one Service and
    /// HTTPRoute per route.
    fn gateway_objects(
        &self,
        ns: &str,
        tunnel: &str,
        objects: &mut Vec<(ApiResource, serde_json::Value)>,
    ) {
        objects.push(object::<Gateway>(
            json!({"name": tunnel, "namespace": ns}),
            json!({"spec": {"gatewayClassName": "bench",
                "infrastructure": {"parametersRef": {"group": "networking.cfargotunnel.com", "kind": "Tunnel", "name": tunnel}},
                "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]}}),
        ));
        for (service, _) in self.services(tunnel) {
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
}

/// The benchmark's GatewayClass.
async fn create_gateway_class(client: &Client) -> anyhow::Result<()> {
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
    .await
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
    // A webhook still listing its caches refuses with "not ready": an operator slowed by a
    // profiler takes longer to sync than to listen.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        match api.create(&PostParams::default(), &object).await {
            Err(kube::Error::Api(e))
                if e.message.contains("webhook is not ready") && Instant::now() < deadline =>
            {
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            result => {
                result.with_context(|| {
                    format!("creating {} {:?}", resource.kind, object.metadata.name)
                })?;
                return Ok(());
            }
        }
    }
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

/// Waits for every tunnel to be Ready and then for Cloudflare to go quiet: no call for
/// [`QUIET`], or no write for three times as long (with many tunnels the drift checks, reads,
/// never stop).
async fn settle(
    sim: &Simulator,
    client: &Client,
    tunnels: usize,
    operator: &mut Operator,
) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let (mut last_call, mut last_write) = (Instant::now(), Instant::now());
    let mut last_calls = sim.total_calls();
    let mut last_writes = write_calls(sim);
    loop {
        operator.check()?;
        let (calls, writes) = (sim.total_calls(), write_calls(sim));
        if calls != last_calls {
            (last_calls, last_call) = (calls, Instant::now());
        }
        if writes != last_writes {
            (last_writes, last_write) = (writes, Instant::now());
        }
        let quiet = last_call.elapsed() >= QUIET || last_write.elapsed() >= 3 * QUIET;
        if quiet && ready_tunnels(client).await? == tunnels {
            return Ok(started.elapsed());
        }
        if started.elapsed() > CONVERGE_LIMIT {
            bail!("the operator never went quiet");
        }
        tokio::time::sleep(POLL).await;
    }
}

fn write_calls(sim: &Simulator) -> u64 {
    let phase = Phase {
        calls: calls_by_operation(sim),
        refusals: 0,
        rollouts: 0,
        peak_rss_kib: 0,
        cpu_seconds: 0.0,
    };
    phase.writes()
}

/// Tunnels with `Ready=True`.
async fn ready_tunnels(client: &Client) -> anyhow::Result<usize> {
    let tunnels = Api::<Tunnel>::all(client.clone())
        .list(&ListParams::default())
        .await?;
    Ok(tunnels
        .items
        .iter()
        .filter_map(|t| t.status.as_ref()?.conditions.as_ref())
        .filter(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        .count())
}

/// A phase's Cloudflare calls, budget refusals, rollouts and the operator's resources.
struct Phase {
    calls: BTreeMap<Operation, u64>,
    refusals: u64,
    rollouts: usize,
    peak_rss_kib: u64,
    cpu_seconds: f64,
}

impl Phase {
    /// At the end of a phase, the operator still running.
    async fn measure(
        sim: &Simulator,
        client: &Client,
        operator: &mut Operator,
    ) -> anyhow::Result<Phase> {
        Ok(Phase {
            calls: calls_by_operation(sim),
            refusals: sim.budget_refusals(),
            rollouts: extra_rollouts(client).await?,
            peak_rss_kib: operator.peak_rss_kib(),
            cpu_seconds: budget::cpu_seconds(operator.pid()?)?,
        })
    }

    fn total(&self) -> u64 {
        self.calls.values().sum()
    }

    fn count(&self, ops: &[Operation]) -> u64 {
        self.calls
            .iter()
            .filter(|(op, _)| ops.contains(op))
            .map(|(_, n)| n)
            .sum()
    }

    fn writes(&self) -> u64 {
        use Operation::*;
        self.count(&[
            CreateTunnel,
            DeleteTunnel,
            CleanupConnections,
            PutConfiguration,
        ]) + self.dns_writes()
    }

    /// DNS write requests (single-record writes and batches).
    fn dns_writes(&self) -> u64 {
        use Operation::*;
        self.count(&[
            CreateDnsRecord,
            UpdateDnsRecord,
            PatchDnsRecord,
            DeleteDnsRecord,
            BatchDnsRecords,
        ])
    }

    fn put_configurations(&self) -> u64 {
        self.count(&[Operation::PutConfiguration])
    }

    fn breakdown(&self) -> String {
        breakdown(&self.calls)
    }
}

/// `calls` as `Operation n, …` (empty when there are none).
fn breakdown(calls: &BTreeMap<Operation, u64>) -> String {
    calls
        .iter()
        .map(|(op, n)| format!("{op:?} {n}"))
        .collect::<Vec<_>>()
        .join(", ")
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
