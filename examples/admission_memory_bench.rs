//! Memory of the webhook under reviews at the body limit: a server process (this example
//! re-run with `serve`, cftunnel's webhook and decision logic, its allocator) receives N
//! concurrent reviews of ~3 MiB — TunnelBindings with thousands of subjects on /validate, or
//! labelled cloudflared Deployments with thousands of env entries on /mutate — sent straight to
//! it, each on its own connection, while four clients keep sending normal-size reviews.
//! Reports the server's peak RSS (VmHWM), how every large request ended and how fast, and the
//! share of normal reviews answered within 2 s. Each scenario runs against a fresh process.
//! The decode cost printed first is what the webhook reserves from its decoding budget
//! (`webhook::DEFAULT_MAX_DECODE_BYTES`) for one such review.
//!
//! With `--operator PATH` the server is the full `cftunnel run` (PATH, a release build) on a
//! local control plane with the Cloudflare simulator, judging with the admission view of a
//! running operator over `--world N` TunnelBindings of ten hostnames each; each scenario gets a
//! fresh operator process over the same cluster. `--rounds N` sends each large review N times
//! on its connection.
//!
//! Run: `cargo run --release --example admission_memory_bench -- [--concurrency 32,256]`, or
//! against the operator `scripts/bench-admission-memory.sh [--concurrency 32,256]`.
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cftunnel::certs::CertificateAuthority;
use cftunnel::metrics::Metrics;
use cftunnel::scope::Scope;
use cftunnel::webhook::{self, Policy, Readiness, WebhookConfig};
use cftunnel_policy::admission::review;
use cftunnel_policy::rules::AdmissionView;
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse};
use kube::core::conversion::{ConversionRequest, ConversionResponse};
use serde_json::{Value, json};

#[path = "admission_memory_bench/operator_mode.rs"]
mod operator_mode;
// Shared with the convergence benchmark, which also reads its peak RSS and CPU.
#[allow(dead_code)]
#[path = "convergence_bench/operator.rs"]
mod operator;

use operator_mode::OperatorEnv;

#[derive(Debug, clap::Parser)]
struct Args {
    /// How many large reviews are sent at once, one scenario per level and kind.
    #[arg(long, value_delimiter = ',', default_values_t = [32, 256])]
    concurrency: Vec<usize>,
    /// How many times each large review is sent, one after the other on its connection.
    #[arg(long, default_value_t = 1)]
    rounds: usize,
    /// The kinds of large review: `binding` (/validate), `deployment` (/mutate).
    #[arg(long, value_delimiter = ',', default_values_t = [String::from("binding"), String::from("deployment")])]
    kinds: Vec<String>,
    /// Serve with the full operator, this `cftunnel` binary, on a local control plane.
    #[arg(long)]
    operator: Option<PathBuf>,
    /// With `--operator`: TunnelBindings of ten hostnames each applied before the reviews.
    #[arg(long, default_value_t = 100)]
    world: usize,
}

/// The same allocator as the `cftunnel` binary.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The memory limit of the shipped Deployment and chart.
const SHIPPED_LIMIT_MIB: f64 = 256.0;
const LARGE_DEADLINE: Duration = Duration::from_secs(15);
const NORMAL_DEADLINE: Duration = Duration::from_secs(2);

struct Decisions(AdmissionView);
impl Policy for Decisions {
    fn validate(&self, r: &AdmissionRequest<DynamicObject>) -> AdmissionResponse {
        review::validate(r, &self.0)
    }
    fn mutate(&self, r: &AdmissionRequest<DynamicObject>) -> AdmissionResponse {
        review::mutate(r)
    }
    fn convert(&self, r: &ConversionRequest) -> ConversionResponse {
        review::convert(r)
    }
}

fn envelope(uid: &str, group: &str, kind: &str, resource: &str, object: Value) -> Value {
    let version = if group.is_empty() { "v1" } else { "v1alpha1" };
    json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": group, "version": version, "kind": kind},
            "resource": {"group": group, "version": version, "resource": resource},
            "name": "big", "namespace": "shop", "operation": "CREATE",
            "userInfo": {"username": "admin"}, "object": object, "dryRun": false
        }
    })
}

/// A TunnelBinding review just under the 3 MiB body limit, every subject with a path regex.
fn large_binding() -> Vec<u8> {
    let subjects: Vec<Value> = (0..30_000)
        .map(|i| json!({"name": format!("s{i}"), "spec": {"fqdn": format!("h{i}.example.com"), "path": format!("^/p{i}(/|$)")}}))
        .collect();
    let object = json!({
        "apiVersion": "networking.cfargotunnel.com/v1alpha1", "kind": "TunnelBinding",
        "metadata": {"name": "big", "namespace": "shop"},
        "subjects": subjects, "tunnelRef": {"kind": "ClusterTunnel", "name": "edge"}
    });
    fit(envelope(
        "big",
        "networking.cfargotunnel.com",
        "TunnelBinding",
        "tunnelbindings",
        object,
    ))
}

/// A labelled cloudflared Deployment review just under the limit: thousands of env entries.
fn large_deployment() -> Vec<u8> {
    let env: Vec<Value> = (0..60_000)
        .map(|i| json!({"name": format!("VAR_{i}"), "value": format!("value-{i}")}))
        .collect();
    let object = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "big", "namespace": "shop", "labels": {"cfargotunnel.com/app": "cloudflared"}},
        "spec": {"selector": {"matchLabels": {"app": "x"}}, "template": {
            "metadata": {"labels": {"app": "x", "cfargotunnel.com/app": "cloudflared"}},
            "spec": {"containers": [{"name": "cloudflared", "image": "cloudflare/cloudflared", "env": env}]}}}
    });
    let mut review = envelope("big", "apps", "Deployment", "deployments", object);
    review["request"]["kind"]["version"] = json!("v1");
    review["request"]["resource"]["version"] = json!("v1");
    fit(review)
}

/// Serialized, and trimmed to at most the body limit by dropping array entries from the end.
fn fit(mut review: Value) -> Vec<u8> {
    loop {
        let bytes = serde_json::to_vec(&review).unwrap_or_default();
        if bytes.len() <= webhook::DEFAULT_MAX_BODY_BYTES {
            return bytes;
        }
        let excess = bytes.len() - webhook::DEFAULT_MAX_BODY_BYTES;
        let pointer = if review.pointer("/request/object/subjects").is_some() {
            "/request/object/subjects"
        } else {
            "/request/object/spec/template/spec/containers/0/env"
        };
        let list = review.pointer_mut(pointer).and_then(Value::as_array_mut);
        let Some(list) = list else { return bytes };
        let drop_n = (excess / 40).max(1).min(list.len());
        list.truncate(list.len() - drop_n);
    }
}

fn normal_review(i: usize) -> Vec<u8> {
    let object = json!({
        "apiVersion": "networking.cfargotunnel.com/v1alpha1", "kind": "TunnelBinding",
        "metadata": {"name": format!("b{i}"), "namespace": "shop"},
        "subjects": [{"name": "web", "spec": {"fqdn": format!("n{i}.example.com")}}],
        "tunnelRef": {"kind": "ClusterTunnel", "name": "edge"}
    });
    let review = envelope(
        &format!("n{i}"),
        "networking.cfargotunnel.com",
        "TunnelBinding",
        "tunnelbindings",
        object,
    );
    serde_json::to_vec(&review).unwrap_or_default()
}

/// The server process: serves until its standard input closes.
fn serve(dir: &str) {
    cftunnel_cloudflare::install_crypto_provider();
    let runtime = tokio::runtime::Runtime::new().unwrap_or_else(|e| panic!("runtime: {e}"));
    runtime.block_on(async {
        let loopback = ([127, 0, 0, 1], 0).into();
        let config = WebhookConfig::new(
            loopback,
            loopback,
            format!("{dir}/tls.crt").into(),
            format!("{dir}/tls.key").into(),
        );
        let readiness = Readiness::new();
        readiness.set_ready(true);
        let policy = Arc::new(Decisions(AdmissionView::new(
            Vec::new(),
            Default::default(),
            Vec::new(),
        )));
        let stdin_closed = async {
            let _ = tokio::task::spawn_blocking(|| std::io::stdin().lines().count()).await;
        };
        let handle = webhook::serve(
            &Scope::root("webhook"),
            config,
            policy,
            readiness,
            Metrics::process(),
            stdin_closed,
        )
        .await
        .unwrap_or_else(|e| panic!("serve: {e}"));
        println!("{}", handle.https_addr().port());
        let _ = handle.join().await;
    });
}

fn status_kib(pid: u32, field: &str) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .unwrap_or(0.0)
}

struct Outcome {
    label: String,
    baseline_mib: f64,
    /// The high-water mark before the load (the operator's own start and first sync).
    before_mib: f64,
    peak_mib: f64,
    statuses: std::collections::BTreeMap<String, usize>,
    slowest_large: Duration,
    normal_total: usize,
    normal_within: usize,
}

/// The process answering the reviews: this example's own server, or the full operator.
enum Served {
    Standalone(Child, u16),
    Operator(operator::Operator, String),
}

impl Served {
    fn standalone(dir: &str) -> Served {
        let mut child: Child = Command::new(std::env::current_exe().unwrap_or_default())
            .args(["serve", dir])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("server process: {e}"));
        let mut line = String::new();
        if let Some(out) = child.stdout.take() {
            let _ = BufReader::new(out).read_line(&mut line);
        }
        let port: u16 = line
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("server said {line:?}"));
        Served::Standalone(child, port)
    }

    fn pid(&self) -> u32 {
        match self {
            Served::Standalone(child, _) => child.id(),
            Served::Operator(operator, _) => operator.pid().unwrap_or_else(|e| panic!("{e}")),
        }
    }

    fn base_url(&self) -> String {
        match self {
            Served::Standalone(_, port) => format!("https://localhost:{port}"),
            Served::Operator(_, url) => url.clone(),
        }
    }

    fn stop(self) {
        match self {
            Served::Standalone(mut child, _) => {
                drop(child.stdin.take());
                let _ = child.wait();
            }
            Served::Operator(mut operator, _) => {
                if let Err(e) = operator.check() {
                    panic!("{e}");
                }
                if let Err(e) = operator.stop() {
                    eprintln!("stopping the operator: {e}");
                }
            }
        }
    }
}

struct Load {
    path: &'static str,
    body: Arc<Vec<u8>>,
    concurrency: usize,
    rounds: usize,
}

async fn scenario(label: &str, load: Load, served: Served, ca: &[u8]) -> Outcome {
    let pid = served.pid();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let baseline_mib = status_kib(pid, "VmRSS:") / 1024.0;
    let before_mib = status_kib(pid, "VmHWM:") / 1024.0;
    let Load {
        path,
        body,
        concurrency,
        rounds,
    } = load;
    let url = format!("{}{path}", served.base_url());
    let normal_url = format!("{}/validate", served.base_url());
    let cert = reqwest::Certificate::from_pem(ca).unwrap_or_else(|e| panic!("CA: {e}"));
    let client = |cert: &reqwest::Certificate| {
        reqwest::Client::builder()
            .tls_certs_only([cert.clone()])
            .timeout(Duration::from_secs(60))
            .build()
            .unwrap_or_else(|e| panic!("client: {e}"))
    };
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut normals = Vec::new();
    for w in 0..4 {
        let (client, url, stop) = (client(&cert), normal_url.clone(), stop.clone());
        normals.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut i = w * 1_000_000;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                i += 1;
                let started = Instant::now();
                let ok = client
                    .post(&url)
                    .header("content-type", "application/json")
                    .body(normal_review(i))
                    .send()
                    .await
                    .is_ok_and(|r| r.status().is_success());
                latencies.push((started.elapsed(), ok));
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            latencies
        }));
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let large = (0..concurrency).map(|_| {
        let (client, url, body) = (client(&cert), url.clone(), body.clone());
        tokio::spawn(async move {
            let mut answers = Vec::new();
            for _ in 0..rounds {
                let started = Instant::now();
                let status = match client
                    .post(&url)
                    .header("content-type", "application/json")
                    .body(body.to_vec())
                    .send()
                    .await
                {
                    Ok(r) => r.status().as_u16().to_string(),
                    Err(e) => format!("error: {e}"),
                };
                answers.push((status, started.elapsed()));
            }
            answers
        })
    });
    let results = futures::future::join_all(large).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut normal_total = 0;
    let mut normal_within = 0;
    for worker in futures::future::join_all(normals)
        .await
        .into_iter()
        .flatten()
    {
        for (latency, ok) in worker {
            normal_total += 1;
            normal_within += usize::from(ok && latency <= NORMAL_DEADLINE);
        }
    }
    let peak_mib = status_kib(pid, "VmHWM:") / 1024.0;
    served.stop();
    let mut statuses = std::collections::BTreeMap::new();
    let mut slowest_large = Duration::ZERO;
    for (status, elapsed) in results.into_iter().flatten().flatten() {
        *statuses.entry(status).or_insert(0) += 1;
        slowest_large = slowest_large.max(elapsed);
    }
    Outcome {
        label: label.to_owned(),
        baseline_mib,
        before_mib,
        peak_mib,
        statuses,
        slowest_large,
        normal_total,
        normal_within,
    }
}

fn main() {
    let raw: Vec<String> = std::env::args().collect();
    if raw.get(1).map(String::as_str) == Some("serve") {
        return serve(raw.get(2).map_or(".", String::as_str));
    }
    let args: Args = clap::Parser::parse();
    cftunnel_cloudflare::install_crypto_provider();
    let hour = Duration::from_secs(3600);
    let ca = CertificateAuthority::generate(hour).unwrap_or_else(|e| panic!("CA: {e}"));
    let pair =
        cftunnel::certs::issue_serving_cert(&ca, &[], hour).unwrap_or_else(|e| panic!("cert: {e}"));
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let dir_path = dir.path().to_string_lossy().into_owned();
    std::fs::write(dir.path().join("tls.crt"), &pair.cert_pem).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(dir.path().join("tls.key"), &pair.key_pem).unwrap_or_else(|e| panic!("{e}"));
    let binding = Arc::new(large_binding());
    let deployment = Arc::new(large_deployment());
    println!(
        "large TunnelBinding review: {} bytes, decode cost {:.1} MiB; large Deployment review: {} bytes, decode cost {:.1} MiB",
        binding.len(),
        webhook::decode_cost(&binding) as f64 / 1048576.0,
        deployment.len(),
        webhook::decode_cost(&deployment) as f64 / 1048576.0
    );
    let runtime = tokio::runtime::Runtime::new().unwrap_or_else(|e| panic!("runtime: {e}"));
    let env = args.operator.as_ref().map(|binary| {
        runtime
            .block_on(OperatorEnv::start(binary, args.world))
            .unwrap_or_else(|e| panic!("starting the operator's cluster: {e:#}"))
    });
    let ca_pem = match &env {
        Some(env) => env.ca_pem().to_owned(),
        None => ca.cert_pem().to_owned(),
    };
    let mut out = std::io::stdout();
    let _ = writeln!(
        out,
        "| scenario | baseline RSS | peak before | peak RSS (VmHWM) | % of 256Mi | large requests | slowest large | normal ≤ 2 s |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|");
    for &n in &args.concurrency {
        for kind in &args.kinds {
            let (label, path, body) = match kind.as_str() {
                "binding" => ("TunnelBinding /validate", "/validate", binding.clone()),
                "deployment" => ("Deployment /mutate", "/mutate", deployment.clone()),
                other => panic!("--kinds takes binding and deployment, not {other:?}"),
            };
            let served = match &env {
                None => Served::standalone(&dir_path),
                Some(env) => runtime.block_on(async {
                    let operator = env
                        .operator()
                        .await
                        .unwrap_or_else(|e| panic!("operator: {e:#}"));
                    let client = reqwest::Client::builder()
                        .tls_certs_only([reqwest::Certificate::from_pem(ca_pem.as_bytes())
                            .unwrap_or_else(|e| panic!("CA: {e}"))])
                        .build()
                        .unwrap_or_else(|e| panic!("client: {e}"));
                    env.wait_ready(&client, normal_review(0))
                        .await
                        .unwrap_or_else(|e| panic!("{e:#}"));
                    // Its first reconciles settle before the baseline is read.
                    tokio::time::sleep(Duration::from_secs(10)).await;
                    Served::Operator(operator, env.base_url())
                }),
            };
            let load = Load {
                path,
                body,
                concurrency: n,
                rounds: args.rounds,
            };
            let o = runtime.block_on(scenario(
                &format!("{n} × {label}"),
                load,
                served,
                ca_pem.as_bytes(),
            ));
            let statuses: Vec<String> = o
                .statuses
                .iter()
                .map(|(s, c)| format!("{c}× {s}"))
                .collect();
            let _ = writeln!(
                out,
                "| {} | {:.0} MiB | {:.0} MiB | {:.0} MiB | {:.0} % | {} | {:.1} s | {}/{} ({:.0} %) |",
                o.label,
                o.baseline_mib,
                o.before_mib,
                o.peak_mib,
                100.0 * o.peak_mib / SHIPPED_LIMIT_MIB,
                statuses.join(", "),
                o.slowest_large.as_secs_f64(),
                o.normal_within,
                o.normal_total,
                100.0 * o.normal_within as f64 / o.normal_total.max(1) as f64
            );
            let _ = out.flush();
            if o.slowest_large > LARGE_DEADLINE {
                let _ = writeln!(
                    out,
                    "  ! a large request took longer than {LARGE_DEADLINE:?}"
                );
            }
        }
    }
    if let Some(env) = env {
        runtime.block_on(env.stop());
    }
}
