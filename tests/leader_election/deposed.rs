//! Two `cftunnel run` processes and one simulated Cloudflare: the leader is frozen (SIGSTOP)
//! in the middle of a DNS sync, past its lease; the other takes over; once the first wakes
//! (SIGCONT) it sends no Cloudflare write. Each process reaches the simulator under its own
//! path prefix, so every write is counted per process.
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::Request;
use axum::http::Method;
use axum::middleware::{self, Next};
use axum::response::Response;
use cftunnel_sim::{Fault, Operation, SimConfig, Simulator};
use cftunnel_testenv::{ControlPlane, poll_until};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Secret, Service};
use kube::api::PostParams;
use kube::{Api, Client};
use serde_json::json;
use tokio::time::Instant;

use super::harness::{POLL, WAIT, plane, read_record, serving_cert_dir, wait_record};

const TOKEN: &str = "sim-token-deposed";
const LEASE: &str = "cftunnel-deposed";
const HOSTNAMES: usize = 30;

/// Writes (any method but GET) seen by the simulator: which process, when.
#[derive(Clone, Default)]
struct Writes(Arc<Mutex<Vec<(char, Instant)>>>);

impl Writes {
    fn count(&self, door: char, after: Instant) -> usize {
        let all = self.0.lock().unwrap_or_else(|p| p.into_inner());
        all.iter()
            .filter(|(d, at)| *d == door && *at > after)
            .count()
    }
}

async fn record(writes: Writes, request: Request, next: Next) -> Response {
    if request.method() != Method::GET {
        let door = request
            .uri()
            .path()
            .trim_start_matches('/')
            .chars()
            .next()
            .unwrap_or('?');
        writes
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((door, Instant::now()));
    }
    next.run(request).await
}

/// The simulator behind `/a` and `/b`; returns its base address.
async fn serve(sim: &Simulator, writes: Writes) -> String {
    let router = Router::new()
        .nest("/a", sim.router())
        .nest("/b", sim.router())
        .layer(middleware::from_fn(move |request, next| {
            record(writes.clone(), request, next)
        }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("address");
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    format!("http://{addr}")
}

struct Process {
    child: Option<Child>,
    log: std::path::PathBuf,
}

impl Process {
    fn start(
        plane: &ControlPlane,
        ns: &str,
        pod: &str,
        api_url: &str,
        dir: &std::path::Path,
    ) -> Self {
        let log = dir.join(format!("{pod}.log"));
        let file = std::fs::File::create(&log).expect("log file");
        let child = Command::new(env!("CARGO_BIN_EXE_cftunnel"))
            .args(["run", "--webhook-listen", "127.0.0.1:0"])
            .args(["--health-listen", "127.0.0.1:0", "--tls-cert-file"])
            .arg(dir.join("tls.crt"))
            .arg("--tls-key-file")
            .arg(dir.join("tls.key"))
            .args(["--leader-election-namespace", ns])
            .args(["--leader-election-id", LEASE])
            .args(["--go-operator-lease-namespace", ns])
            .args(["--certificate-mode", "files"])
            .args(["--watch-namespace", ns, "--cluster-resource-namespace", ns])
            // One record per request, so a sync is many writes and the leader can be frozen in
            // the middle of one (a batched sync of these hostnames is a single request).
            .args(["--dns-batch", "never"])
            .args(["--cloudflare-api-url", api_url])
            .env("KUBECONFIG", plane.admin_kubeconfig())
            .env("POD_NAME", pod)
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .expect("start cftunnel run");
        Process {
            child: Some(child),
            log,
        }
    }

    fn signal(&self, signal: &str) {
        let pid = self.child.as_ref().map_or(0, Child::id).to_string();
        let status = Command::new("kill")
            .args([signal, &pid])
            .status()
            .expect("kill");
        assert!(status.success(), "kill {signal} {pid}");
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = Command::new("kill")
                .args(["-CONT", &child.id().to_string()])
                .status();
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

async fn create_objects(admin: &Client, ns: &str, account_id: &str) {
    let secret = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some("cloudflare-api".into()),
            ..Default::default()
        },
        data: Some(
            [(
                "CLOUDFLARE_API_TOKEN".to_string(),
                ByteString(TOKEN.as_bytes().to_vec()),
            )]
            .into(),
        ),
        ..Secret::default()
    };
    Api::<Secret>::namespaced(admin.clone(), ns)
        .create(&PostParams::default(), &secret)
        .await
        .expect("API Secret");
    let tunnels: Api<kube::api::DynamicObject> = Api::namespaced_with(
        admin.clone(),
        ns,
        &kube::api::ApiResource::erase::<cftunnel_types::Tunnel>(&()),
    );
    let tunnel = serde_json::from_value(json!({
        "apiVersion": "networking.cfargotunnel.com/v1alpha2",
        "kind": "Tunnel",
        "metadata": {"name": "edge"},
        "spec": {
            "newTunnel": {"name": format!("{ns}-edge")},
            "cloudflare": {"domain": "example.com", "secret": "cloudflare-api", "accountId": account_id},
        },
    }))
    .expect("tunnel json");
    tunnels
        .create(&PostParams::default(), &tunnel)
        .await
        .expect("Tunnel");
    let services: Api<Service> = Api::namespaced(admin.clone(), ns);
    for i in 0..HOSTNAMES {
        let service = serde_json::from_value(json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": format!("app{i}"), "labels": {"cfargotunnel.com/expose-tunnel": "edge"}},
            "spec": {"ports": [{"name": "http", "port": 80}]},
        }))
        .expect("service json");
        services
            .create(&PostParams::default(), &service)
            .await
            .expect("Service");
    }
}

pub async fn a_deposed_leader_sends_no_cloudflare_write_after_it_lost_the_lease() {
    let plane = plane().await;
    let admin = plane.admin_client().expect("admin client");
    let ns = plane
        .create_namespace("leader-deposed")
        .await
        .expect("namespace");
    let dir = serving_cert_dir(plane);
    let sim = Simulator::new(SimConfig {
        tokens: vec![TOKEN.to_string()],
        ..SimConfig::default()
    });
    // Slow DNS writes: the first leader is still syncing when it is frozen.
    for op in [Operation::CreateDnsRecord, Operation::UpdateDnsRecord] {
        sim.inject(op, Fault::latency(Duration::from_millis(300)));
    }
    let writes = Writes::default();
    let base = serve(&sim, writes.clone()).await;
    create_objects(&admin, &ns, &sim.account_id()).await;

    let start = Instant::now();
    let a = Process::start(plane, &ns, "deposed-a", &format!("{base}/a"), dir.path());
    wait_record(&admin, &ns, LEASE, "the first process leads", |r| {
        r.holder.starts_with("deposed-a_")
    })
    .await;
    let b = Process::start(plane, &ns, "deposed-b", &format!("{base}/b"), dir.path());
    poll_until("the first leader is writing DNS", WAIT, POLL, || {
        let (writes, sim) = (writes.clone(), sim.clone());
        async move {
            let dns = sim.calls(Operation::CreateDnsRecord);
            (dns >= 3 && writes.count('a', start) >= 4).then_some(())
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", a.log()));
    a.signal("-STOP");

    let taken = wait_record(&admin, &ns, LEASE, "the second process takes over", |r| {
        r.holder.starts_with("deposed-b_")
    })
    .await;
    let lost = Instant::now();
    assert!(taken.transitions >= 1);
    a.signal("-CONT");
    // The second leader writes; the first, awake again, does not.
    poll_until("the new leader writes DNS", WAIT, POLL, || {
        let writes = writes.clone();
        async move { (writes.count('b', lost) >= 3).then_some(()) }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", b.log()));
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        writes.count('a', lost),
        0,
        "the deposed leader wrote after it lost the lease\n{}",
        a.log()
    );
    let record = read_record(&admin, &ns, LEASE).await.expect("lease");
    assert!(record.holder.starts_with("deposed-b_"));
}
