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
//! Run: `cargo run --release --example admission_memory_bench -- [--concurrency 32,256]`
use std::io::{BufRead, BufReader, Write};
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
    peak_mib: f64,
    statuses: std::collections::BTreeMap<String, usize>,
    slowest_large: Duration,
    normal_total: usize,
    normal_within: usize,
}

async fn scenario(
    label: &str,
    path: &str,
    body: Arc<Vec<u8>>,
    concurrency: usize,
    ca: &[u8],
    dir: &str,
) -> Outcome {
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
    let pid = child.id();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let baseline_mib = status_kib(pid, "VmRSS:") / 1024.0;
    let url = format!("https://localhost:{port}{path}");
    let normal_url = format!("https://localhost:{port}/validate");
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
            (status, started.elapsed())
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
    drop(child.stdin.take());
    let _ = child.wait();
    let mut statuses = std::collections::BTreeMap::new();
    let mut slowest_large = Duration::ZERO;
    for (status, elapsed) in results.into_iter().flatten() {
        *statuses.entry(status).or_insert(0) += 1;
        slowest_large = slowest_large.max(elapsed);
    }
    Outcome {
        label: label.to_owned(),
        baseline_mib,
        peak_mib,
        statuses,
        slowest_large,
        normal_total,
        normal_within,
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("serve") {
        return serve(args.get(2).map_or(".", String::as_str));
    }
    let levels: Vec<usize> = args
        .iter()
        .position(|a| a == "--concurrency")
        .and_then(|i| args.get(i + 1))
        .map_or_else(
            || vec![32, 256],
            |v| v.split(',').filter_map(|n| n.parse().ok()).collect(),
        );
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
    let mut out = std::io::stdout();
    let _ = writeln!(
        out,
        "| scenario | baseline RSS | peak RSS (VmHWM) | % of 256Mi | large requests | slowest large | normal ≤ 2 s |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|");
    for &n in &levels {
        for (label, path, body) in [
            ("TunnelBinding /validate", "/validate", binding.clone()),
            ("Deployment /mutate", "/mutate", deployment.clone()),
        ] {
            let o = runtime.block_on(scenario(
                &format!("{n} × {label}"),
                path,
                body,
                n,
                ca.cert_pem().as_bytes(),
                &dir_path,
            ));
            let statuses: Vec<String> = o
                .statuses
                .iter()
                .map(|(s, c)| format!("{c}× {s}"))
                .collect();
            let _ = writeln!(
                out,
                "| {} | {:.0} MiB | {:.0} MiB | {:.0} % | {} | {:.1} s | {}/{} ({:.0} %) |",
                o.label,
                o.baseline_mib,
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
}
