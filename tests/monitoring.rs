//! The shipped Grafana dashboard works against a real Prometheus: Prometheus (Debian's
//! `prometheus` package, or `CFTUNNEL_PROMETHEUS`) scrapes every second a real `cftunnel run`
//! process (its `/metrics` on `--health-listen`) reconciling a Tunnel with a TunnelBinding on
//! the real API server against the simulated Cloudflare, and a real cloudflared
//! (`CFTUNNEL_CLOUDFLARED`) serving its `--metrics` without Cloudflare's edge, labelled with
//! the `namespace` and `pod` the dashboard groups it by. The operator's webhook answers one
//! AdmissionReview so the admission families have series. Then both scrape targets are `up`,
//! and every query of `charts/cftunnel/files/grafana-dashboard.json` (each panel's
//! `targets[].expr`) returns at least one series from that Prometheus.
mod common;
mod install_support;
#[path = "faults/harness.rs"]
mod process;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use cftunnel_testenv::poll_until;
use serde_json::{Value, json};

use install_support::repo_path;
use process::{
    Cloudflare, Operator, Workload, ZONE, apply_workload, free_port, operator_user, plane,
    wait_converged,
};

/// Generous: series of `rate(...[5m])` need two scrapes after the first increment.
const WAIT: Duration = Duration::from_secs(180);
const POLL: Duration = Duration::from_secs(1);
const WORKLOAD: Workload = Workload {
    tunnels: 1,
    routes: 1,
};
/// The labels Prometheus attaches to cloudflared's target, as Kubernetes service discovery
/// would from the pod.
const CLOUDFLARED_POD: &str = "cloudflared-0";

/// A child process killed (and reaped) on drop; its log is printed when the test fails.
struct Guard {
    what: &'static str,
    child: Child,
    log: PathBuf,
}

impl Guard {
    fn spawn(what: &'static str, command: &mut Command, log: PathBuf) -> Guard {
        let file = std::fs::File::create(&log).expect("log file");
        let child = command
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .unwrap_or_else(|e| panic!("start {what} ({command:?}): {e}"));
        Guard { what, child, log }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            let lines: Vec<&str> = log.lines().collect();
            let tail = &lines[lines.len().saturating_sub(40)..];
            eprintln!(
                "--- the last lines of {} ---\n{}",
                self.what,
                tail.join("\n")
            );
        }
    }
}

/// Prometheus: `CFTUNNEL_PROMETHEUS`, else `prometheus` on PATH; the test fails without it.
fn prometheus_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("CFTUNNEL_PROMETHEUS").map(PathBuf::from) {
        assert!(
            path.is_file(),
            "CFTUNNEL_PROMETHEUS={path:?} is not a file (Debian's `prometheus` package installs \
             /usr/bin/prometheus; scripts/install-monitoring-deps.sh)"
        );
        return path;
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join("prometheus"))
        .find(|path| path.is_file())
        .unwrap_or_else(|| {
            panic!(
                "no Prometheus: set CFTUNNEL_PROMETHEUS or install Debian's `prometheus` package \
                 (apt-get install -y --no-install-recommends prometheus; \
                 scripts/install-monitoring-deps.sh)"
            )
        })
}

fn cloudflared_binary() -> PathBuf {
    match std::env::var_os("CFTUNNEL_CLOUDFLARED").map(PathBuf::from) {
        Some(path) if path.is_file() => path,
        other => panic!("CFTUNNEL_CLOUDFLARED must name a cloudflared binary ({other:?})"),
    }
}

/// A connector token as Cloudflare hands it out: base64 of `{"a","t","s"}`.
fn cloudflared_token() -> String {
    let token = json!({
        "a": "0123456789abcdef0123456789abcdef",
        "t": uuid::Uuid::new_v4().to_string(),
        "s": STANDARD.encode([7u8; 32]),
    });
    STANDARD.encode(token.to_string())
}

/// Every panel's title and queries, rows' nested panels included.
fn dashboard_queries(panels: &Value, out: &mut Vec<(String, String)>) {
    for panel in panels.as_array().into_iter().flatten() {
        let title = panel["title"].as_str().unwrap_or("(untitled)");
        for target in panel["targets"].as_array().into_iter().flatten() {
            if let Some(expr) = target["expr"].as_str() {
                out.push((title.to_string(), expr.to_string()));
            }
        }
        dashboard_queries(&panel["panels"], out);
    }
}

/// An instant query's `data.result`, `None` when Prometheus does not answer with success.
async fn query(client: &reqwest::Client, prometheus: &str, expr: &str) -> Option<Vec<Value>> {
    let body: Value = client
        .get(format!("{prometheus}/api/v1/query"))
        .query(&[("query", expr)])
        .send()
        .await
        .ok()?
        .json()
        .await
        .ok()?;
    if body["status"] != "success" {
        return None;
    }
    body["data"]["result"].as_array().cloned()
}

/// Each target's job, health and last error, for failure messages.
async fn targets(client: &reqwest::Client, prometheus: &str) -> String {
    let Ok(response) = client
        .get(format!("{prometheus}/api/v1/targets"))
        .send()
        .await
    else {
        return "(Prometheus does not answer /api/v1/targets)".to_string();
    };
    let body: Value = response.json().await.unwrap_or_default();
    body["data"]["activeTargets"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            format!(
                "{} {} health={} lastError={:?}",
                t["labels"]["job"], t["scrapeUrl"], t["health"], t["lastError"]
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

fn prometheus_config(dir: &Path, cftunnel: &str, cloudflared: &str, ns: &str) -> PathBuf {
    let config = format!(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
         scrape_configs:\n\
         \x20 - job_name: cftunnel\n\
         \x20   static_configs:\n\
         \x20     - targets: ['{cftunnel}']\n\
         \x20 - job_name: cloudflared\n\
         \x20   static_configs:\n\
         \x20     - targets: ['{cloudflared}']\n\
         \x20       labels: {{namespace: '{ns}', pod: '{CLOUDFLARED_POD}'}}\n"
    );
    let path = dir.join("prometheus.yml");
    std::fs::write(&path, config).expect("write prometheus.yml");
    path
}

/// Sends one Tunnel CREATE review to the operator's webhook until it is answered (allowed or
/// denied), so the admission families have series.
async fn review_once(webhook: &str, ca_pem: &str, ns: &str, account: &str) {
    cftunnel_testenv::install_crypto_provider();
    let root = reqwest::Certificate::from_pem(ca_pem.as_bytes()).expect("ca pem");
    let client = reqwest::Client::builder()
        .tls_certs_only([root])
        .timeout(Duration::from_secs(10))
        .build()
        .expect("https client");
    let uid = uuid::Uuid::new_v4().to_string();
    let review = json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "networking.cfargotunnel.com", "version": "v1alpha2", "kind": "Tunnel"},
            "resource": {"group": "networking.cfargotunnel.com", "version": "v1alpha2", "resource": "tunnels"},
            "name": "reviewed", "namespace": ns, "operation": "CREATE",
            "userInfo": {"username": "admin"},
            "object": {
                "apiVersion": "networking.cfargotunnel.com/v1alpha2",
                "kind": "Tunnel",
                "metadata": {"name": "reviewed", "namespace": ns},
                "spec": {
                    "newTunnel": {"name": "reviewed"},
                    "cloudflare": {"domain": ZONE, "secret": "cloudflare-api", "accountId": account},
                },
            },
            "dryRun": false,
        }
    });
    let url = format!("https://{webhook}/validate/tunnels");
    let answered = poll_until("the webhook to answer a review", WAIT, POLL, || async {
        let response = client.post(&url).json(&review).send().await.ok()?;
        if !response.status().is_success() {
            return None;
        }
        let body: Value = response.json().await.ok()?;
        (body["response"]["uid"] == uid.as_str()).then_some(body)
    })
    .await
    .unwrap_or_else(|e| panic!("{e}: POST {url}"));
    eprintln!(
        "webhook answered: allowed={}",
        answered["response"]["allowed"]
    );
}

#[tokio::test]
async fn prometheus_scrapes_cftunnel_and_cloudflared_and_every_dashboard_query_has_series() {
    let prometheus_bin = prometheus_binary();
    let cloudflared_bin = cloudflared_binary();
    let dashboard: Value = serde_json::from_str(
        &std::fs::read_to_string(repo_path("charts/cftunnel/files/grafana-dashboard.json"))
            .expect("read the dashboard"),
    )
    .expect("dashboard JSON");
    let mut queries = Vec::new();
    dashboard_queries(&dashboard["panels"], &mut queries);
    assert!(!queries.is_empty(), "the dashboard has no queries");

    let plane = plane().await;
    let admin = plane.admin_client().expect("admin client");
    let ns = plane
        .create_namespace("monitoring")
        .await
        .expect("namespace");
    let cf = Cloudflare::start();
    let user = operator_user(plane);
    let webhook = format!("127.0.0.1:{}", free_port());
    let operator = Operator::start_with_webhook(
        plane,
        user.kubeconfig(),
        &ns,
        &cf,
        "monitoring",
        &webhook,
        &["--leader-elect=false", "--edge-interval", "2s"],
    );
    let dir = tempfile::tempdir().expect("temp dir");

    // cloudflared with an edge that refuses connections: it keeps retrying and serves metrics.
    let cloudflared_metrics = format!("127.0.0.1:{}", free_port());
    let closed_edge = format!("127.0.0.1:{}", free_port());
    let token = cloudflared_token();
    let _cloudflared = Guard::spawn(
        "cloudflared",
        Command::new(&cloudflared_bin)
            .args(["tunnel", "--no-autoupdate", "--edge", &closed_edge])
            .args(["--metrics", &cloudflared_metrics, "run", "--token", &token]),
        dir.path().join("cloudflared.log"),
    );

    let config = prometheus_config(
        dir.path(),
        operator.health_addr(),
        &cloudflared_metrics,
        &ns,
    );
    let listen = format!("127.0.0.1:{}", free_port());
    let data = dir.path().join("tsdb");
    let _prometheus = Guard::spawn(
        "prometheus",
        Command::new(&prometheus_bin)
            .arg("--config.file")
            .arg(&config)
            .arg("--storage.tsdb.path")
            .arg(&data)
            .args(["--web.listen-address", &listen]),
        dir.path().join("prometheus.log"),
    );
    let prometheus = format!("http://{listen}");
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("http client");
    poll_until("Prometheus to be ready", WAIT, POLL, || async {
        let response = client
            .get(format!("{prometheus}/-/ready"))
            .send()
            .await
            .ok()?;
        response.status().is_success().then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));

    apply_workload(&admin, &ns, &cf.sim.account_id(), WORKLOAD).await;
    wait_converged(&admin, &ns, &cf, WORKLOAD).await;
    review_once(&webhook, plane.ca().cert_pem(), &ns, &cf.sim.account_id()).await;

    // Both targets up.
    let up = poll_until("both scrape targets up", WAIT, POLL, || async {
        let result = query(&client, &prometheus, "up").await?;
        let up_jobs = |job: &str| {
            result
                .iter()
                .any(|s| s["metric"]["job"] == job && s["value"][1] == "1")
        };
        (up_jobs("cftunnel") && up_jobs("cloudflared")).then_some(result)
    })
    .await;
    if let Err(e) = up {
        panic!(
            "{e}: up = {:?}; targets: {}",
            query(&client, &prometheus, "up").await,
            targets(&client, &prometheus).await
        );
    }

    // Every dashboard query returns a series (a NaN from histogram_quantile counts).
    let started = Instant::now();
    let mut missing = queries.clone();
    while !missing.is_empty() && started.elapsed() < WAIT {
        let mut still = Vec::new();
        for (title, expr) in missing {
            match query(&client, &prometheus, &expr).await {
                Some(result) if !result.is_empty() => {
                    eprintln!("{title:?}: {expr} -> {} series", result.len());
                }
                _ => still.push((title, expr)),
            }
        }
        missing = still;
        if !missing.is_empty() {
            tokio::time::sleep(POLL).await;
        }
    }
    assert!(
        missing.is_empty(),
        "after {:?}, {} of {} dashboard queries return no series:\n{}\ntargets: {}",
        started.elapsed(),
        missing.len(),
        queries.len(),
        missing
            .iter()
            .map(|(title, expr)| format!("  panel {title:?}: {expr}"))
            .collect::<Vec<_>>()
            .join("\n"),
        targets(&client, &prometheus).await
    );
    eprintln!(
        "all {} dashboard queries return series after {:?}",
        queries.len(),
        started.elapsed()
    );
}
