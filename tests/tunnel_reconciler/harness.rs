//! One harness for the tunnel reconciler tests: the shared control plane (with KCM and
//! OwnerReferencesPermissionEnforcement), the shipped RBAC bound to the operator's user, a
//! simulator per test and one operator per test, scoped to the test's namespace and label.
#![allow(dead_code)] // each test uses its own subset

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use cftunnel::caches::WatchScope;
use cftunnel::term::ControllerOptions;
use cftunnel_cloudflare::{CloudflareClient, ConfigSrc, Credentials};
use cftunnel_sim::{RunningSim, SimConfig, Simulator};
use cftunnel_testenv::{ControlPlane, ControlPlaneOptions, poll_until, shared};
use cftunnel_types::crds::{self, ConversionService};
use cftunnel_types::{ClusterTunnel, Tunnel, TunnelStatus};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use kube::api::{ListParams, PostParams};
use kube::{Api, Client, Resource};
use serde_json::{Value, json};
use tokio::sync::OnceCell;

use crate::install_support::install_namespaces_and_rbac;

pub const TOKEN: &str = "sim-token-for-tests";
/// A second token of the same account (another credential, so another DNS group).
pub const TOKEN_B: &str = "sim-token-for-tests-b";
pub const WAIT: Duration = Duration::from_secs(120);
pub const POLL: Duration = Duration::from_millis(250);
pub use crate::install_support::OPERATOR_USER;
const RUN_LABEL: &str = "cftunnel-test/run";

static RBAC: OnceCell<()> = OnceCell::const_new();

pub struct Harness {
    pub plane: &'static ControlPlane,
    pub admin: Client,
    pub ns: String,
    pub sim: Simulator,
    pub running: RunningSim,
    operator: Option<tokio::task::JoinHandle<()>>,
    tweak: fn(&mut ControllerOptions),
    /// The operator's log, written out if the test fails ([`LogsOnFailure`]).
    _logs: Option<LogsOnFailure>,
}

impl Drop for Harness {
    fn drop(&mut self) {
        if let Some(task) = self.operator.take() {
            task.abort();
        }
    }
}

async fn plane() -> &'static ControlPlane {
    let plane = shared(|| ControlPlaneOptions {
        controller_manager: true,
        crds: crds::all(&ConversionService::default()),
        extra_apiserver_args: vec![
            "--enable-admission-plugins=OwnerReferencesPermissionEnforcement".into(),
        ],
        ..ControlPlaneOptions::default()
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    RBAC.get_or_init(|| install_namespaces_and_rbac(plane))
        .await;
    plane
}

impl Harness {
    /// A namespace, a simulator and a running operator (as its own ServiceAccount user).
    pub async fn start(prefix: &str) -> Harness {
        Harness::start_with(prefix, |_| {}).await
    }

    /// Like [`Harness::start`], with operator options changed by `tweak`.
    pub async fn start_with(prefix: &str, tweak: fn(&mut ControllerOptions)) -> Harness {
        Harness::start_full(prefix, tweak, &["example.com"], true).await
    }

    /// Like [`Harness::start`], the simulated account holding `zones` (the tunnels' domain
    /// `example.com` among them).
    pub async fn start_in_zones(prefix: &str, zones: &[&str]) -> Harness {
        Harness::start_full(prefix, |_| {}, zones, true).await
    }

    /// Like [`Harness::start`] without starting the operator ([`Harness::start_operator`]
    /// starts it): for tests that prepare what the operator finds first.
    /// The simulated account holds `zones`.
    pub async fn start_stopped(prefix: &str, zones: &[&str]) -> Harness {
        Harness::start_full(prefix, |_| {}, zones, false).await
    }

    async fn start_full(
        prefix: &str,
        tweak: fn(&mut ControllerOptions),
        zones: &[&str],
        run: bool,
    ) -> Harness {
        let logs = LogsOnFailure::for_this_test();
        let plane = plane().await;
        let admin = plane.admin_client().expect("admin client");
        let ns = plane.create_namespace(prefix).await.expect("namespace");
        let sim = Simulator::new(SimConfig {
            tokens: vec![TOKEN.to_string(), TOKEN_B.to_string()],
            zones: zones.iter().map(|z| z.to_string()).collect(),
            ..SimConfig::default()
        });
        let running = sim
            .serve("127.0.0.1:0".parse().expect("addr"))
            .await
            .expect("sim");
        let mut harness = Harness {
            plane,
            admin,
            ns,
            sim,
            running,
            operator: None,
            tweak,
            _logs: logs,
        };
        if run {
            harness.start_operator();
        }
        harness
    }

    pub fn options(&self) -> ControllerOptions {
        let mut options = ControllerOptions {
            cloudflare_api_url: self.running.url.clone(),
            cluster_resource_namespace: self.ns.clone(),
            drift_interval: Duration::ZERO,
            // Like drift checks, the edge health task calls Cloudflare on its own clock (a
            // walk per interval, connectors on a change): off unless a test is about it, so
            // call counts say what the reconcilers did.
            edge_interval: Duration::ZERO,
            retry_base: Duration::from_millis(500),
            retry_max: Duration::from_secs(5),
            ..ControllerOptions::default()
        };
        (self.tweak)(&mut options);
        options
    }

    /// (Re)starts the operator; a restart reconciles every object from scratch.
    pub fn start_operator(&mut self) {
        let client = self
            .plane
            .user(OPERATOR_USER, &["system:serviceaccounts"])
            .expect("operator user")
            .client()
            .expect("operator client");
        self.start_operator_with(client);
    }

    /// (Re)starts the operator with `client` (the operator's user, reached some other way).
    pub fn start_operator_with(&mut self, client: Client) {
        let scope = WatchScope {
            namespace: Some(self.ns.clone()),
            label_selector: Some(format!("{RUN_LABEL}={}", self.ns)),
        };
        self.spawn_operator(client, scope);
    }

    /// Like [`Harness::start_operator`], watching every namespace (tunnels and bindings still
    /// only those labelled for this test): for objects whose namespaces a manifest fixes.
    pub fn start_operator_in_all_namespaces(&mut self) {
        let client = self
            .plane
            .user(OPERATOR_USER, &["system:serviceaccounts"])
            .expect("operator user")
            .client()
            .expect("operator client");
        let scope = WatchScope {
            namespace: None,
            label_selector: Some(format!("{RUN_LABEL}={}", self.ns)),
        };
        self.spawn_operator(client, scope);
    }

    fn spawn_operator(&mut self, client: Client, scope: WatchScope) {
        if let Some(task) = self.operator.take() {
            task.abort();
        }
        self.operator = Some(tokio::spawn(cftunnel::wiring::run_reconcilers(
            client,
            self.options(),
            scope,
        )));
    }

    pub fn stop_operator(&mut self) {
        if let Some(task) = self.operator.take() {
            task.abort();
        }
    }

    /// An IngressClass of cftunnel's controller whose parameters name the test namespace's
    /// Tunnel `tunnel`; its name (`cftunnel-<namespace>`).
    pub async fn create_ingress_class(&self, tunnel: &str) -> String {
        use k8s_openapi::api::networking::v1::IngressClass;
        let name = format!("cftunnel-{}", self.ns);
        let class: IngressClass = serde_json::from_value(json!({
            "apiVersion": "networking.k8s.io/v1", "kind": "IngressClass",
            "metadata": {"name": name},
            "spec": {"controller": "cfargotunnel.com/cftunnel",
                     "parameters": {"apiGroup": "networking.cfargotunnel.com", "kind": "Tunnel",
                                    "name": tunnel, "scope": "Namespace", "namespace": self.ns}},
        }))
        .expect("class json");
        Api::<IngressClass>::all(self.admin.clone())
            .create(&PostParams::default(), &class)
            .await
            .expect("create IngressClass");
        name
    }

    pub fn tunnels(&self) -> Api<Tunnel> {
        Api::namespaced(self.admin.clone(), &self.ns)
    }

    pub fn cluster_tunnels(&self) -> Api<ClusterTunnel> {
        Api::all(self.admin.clone())
    }

    pub fn secrets(&self) -> Api<Secret> {
        Api::namespaced(self.admin.clone(), &self.ns)
    }

    pub async fn create_api_secret(&self, name: &str, data: &[(&str, &str)]) {
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..ObjectMeta::default()
            },
            data: Some(
                data.iter()
                    .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
                    .collect(),
            ),
            ..Secret::default()
        };
        self.secrets()
            .create(&PostParams::default(), &secret)
            .await
            .expect("create secret");
    }

    /// A spec with the simulator's account and zone; `source` is the newTunnel/existingTunnel part.
    pub fn spec(&self, secret: &str, source: Value) -> Value {
        let mut spec = json!({
            "cloudflare": {
                "domain": "example.com",
                "secret": secret,
                "accountId": self.sim.account_id(),
            }
        });
        if let (Some(spec), Some(source)) = (spec.as_object_mut(), source.as_object()) {
            spec.extend(source.clone());
        }
        spec
    }

    fn object(&self, kind: &str, name: &str, spec: Value) -> Value {
        json!({
            "apiVersion": "networking.cfargotunnel.com/v1alpha2",
            "kind": kind,
            "metadata": { "name": name, "labels": { RUN_LABEL: self.ns } },
            "spec": spec,
        })
    }

    /// A Tunnel labelled for this test in `namespace` (the operator must watch it).
    pub async fn create_tunnel_in(&self, namespace: &str, name: &str, spec: Value) -> Tunnel {
        let tunnel: Tunnel =
            serde_json::from_value(self.object("Tunnel", name, spec)).expect("tunnel json");
        Api::<Tunnel>::namespaced(self.admin.clone(), namespace)
            .create(&PostParams::default(), &tunnel)
            .await
            .expect("create tunnel")
    }

    pub async fn create_tunnel(&self, name: &str, spec: Value) -> Tunnel {
        let tunnel: Tunnel =
            serde_json::from_value(self.object("Tunnel", name, spec)).expect("tunnel json");
        self.tunnels()
            .create(&PostParams::default(), &tunnel)
            .await
            .expect("create tunnel")
    }

    pub async fn create_cluster_tunnel(&self, name: &str, spec: Value) -> ClusterTunnel {
        let tunnel: ClusterTunnel =
            serde_json::from_value(self.object("ClusterTunnel", name, spec)).expect("json");
        self.cluster_tunnels()
            .create(&PostParams::default(), &tunnel)
            .await
            .expect("create cluster tunnel")
    }

    /// Waits until `Ready` has `reason`; returns the object.
    pub async fn wait_reason<K>(&self, api: &Api<K>, name: &str, reason: &str) -> K
    where
        K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + HasStatus,
    {
        poll_until(
            &format!("{name} Ready reason {reason}"),
            WAIT,
            POLL,
            || async {
                let obj = api.get_opt(name).await.ok().flatten()?;
                (ready(obj.status_of())?.reason == reason).then_some(obj)
            },
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"))
    }

    /// A client of the simulated Cloudflare, as a user would hold one.
    pub fn cloudflare(&self) -> CloudflareClient {
        CloudflareClient::builder(Credentials::ApiToken(TOKEN.into()))
            .base_url(self.running.url.clone())
            .build()
            .expect("cloudflare client")
    }

    /// Creates a tunnel on the simulator directly (the user's pre-existing tunnel).
    pub async fn precreate_tunnel(&self, name: &str, secret: &[u8], src: ConfigSrc) -> String {
        self.cloudflare()
            .create_tunnel(&self.sim.account_id(), name, secret, src)
            .await
            .expect("precreate tunnel")
            .id
    }

    /// A tunnel `pre` created on the simulator with `secret`, and the API Secret `api_secret`
    /// holding a token and that tunnel's credentials.json; returns the tunnel id.
    pub async fn precreate_with_credential_file(
        &self,
        api_secret: &str,
        secret: [u8; 32],
    ) -> String {
        let id = self
            .precreate_tunnel("pre", &secret, ConfigSrc::Local)
            .await;
        let file = json!({"AccountTag": self.sim.account_id(), "TunnelSecret": STANDARD.encode(secret), "TunnelID": id}).to_string();
        self.create_api_secret(
            api_secret,
            &[
                ("CLOUDFLARE_API_TOKEN", TOKEN),
                ("CLOUDFLARE_TUNNEL_CREDENTIAL_FILE", &file),
            ],
        )
        .await;
        id
    }

    /// Live (not deleted) tunnels on the simulator.
    pub fn live_tunnels(&self) -> Vec<cftunnel_sim::SimTunnel> {
        self.sim
            .tunnels()
            .into_iter()
            .filter(|t| t.deleted_at.is_none())
            .collect()
    }

    /// Reasons of the Events about `name` in the test namespace, and in `default` where the
    /// Events of cluster-scoped objects (ClusterTunnels) go.
    pub async fn event_reasons(&self, name: &str) -> Vec<String> {
        let mut reasons = Vec::new();
        for ns in [self.ns.as_str(), "default"] {
            let events: Api<Event> = Api::namespaced(self.admin.clone(), ns);
            reasons.extend(
                events
                    .list(&ListParams::default())
                    .await
                    .expect("list events")
                    .items
                    .into_iter()
                    .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
                    .filter_map(|e| e.reason),
            );
        }
        reasons
    }

    /// Waits until an Event with `reason` is recorded about `name`.
    pub async fn wait_event(&self, name: &str, reason: &str) {
        poll_until(
            &format!("{reason} event about {name}"),
            WAIT,
            POLL,
            || async {
                self.event_reasons(name)
                    .await
                    .iter()
                    .any(|r| r == reason)
                    .then_some(())
            },
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    }

    /// Waits until the object is gone from the API.
    pub async fn wait_gone<K>(&self, api: &Api<K>, name: &str)
    where
        K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    {
        poll_until(&format!("{name} gone"), WAIT, POLL, || async {
            matches!(api.get_opt(name).await, Ok(None)).then_some(())
        })
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    }
}

/// Log lines written on this thread while the guard lives, at debug level (noisy transport
/// crates at info). `#[tokio::test]` runs the operator's tasks on the test's thread, so this
/// captures what the in-process operator logs.
pub fn capture_logs() -> (
    tracing::subscriber::DefaultGuard,
    std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
) {
    #[derive(Clone)]
    struct Sink(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);
    impl std::io::Write for Sink {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    // The harness then leaves the log to this capture (see [`LogsOnFailure`]).
    CAPTURING.with(|c| c.set(true));
    let buffer = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = Sink(buffer.clone());
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(
            "debug,h2=info,hyper=info,hyper_util=info,rustls=info,tower=info",
        ))
        .with_ansi(false)
        .with_writer(move || sink.clone())
        .finish();
    (tracing::subscriber::set_default(subscriber), buffer)
}

/// What [`capture_logs`] captured so far.
pub fn captured(buffer: &std::sync::Mutex<Vec<u8>>) -> String {
    String::from_utf8_lossy(
        &buffer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
    )
    .into_owned()
}

/// The Ready condition's message, empty when there is none.
pub fn ready_message(status: Option<&TunnelStatus>) -> String {
    ready(status).map(|c| c.message.clone()).unwrap_or_default()
}

pub fn ready(status: Option<&TunnelStatus>) -> Option<&Condition> {
    status?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
}

/// Status access for both kinds.
pub trait HasStatus {
    fn status_of(&self) -> Option<&TunnelStatus>;
}

impl HasStatus for Tunnel {
    fn status_of(&self) -> Option<&TunnelStatus> {
        self.status.as_ref()
    }
}

impl HasStatus for ClusterTunnel {
    fn status_of(&self) -> Option<&TunnelStatus> {
        self.status.as_ref()
    }
}

/// Captures what the in-process operator logs (info, cftunnel's own lines at debug) and, when
/// the test panics, writes it to `$CFTUNNEL_TEST_LOG_DIR/<test name>.log` (nothing is captured
/// without the variable; scripts/run-tests.sh sets it to its log directory). A failure seen once
/// in a loaded run can then be read, not guessed.
pub struct LogsOnFailure {
    name: String,
    _guard: tracing::subscriber::DefaultGuard,
    buffer: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
}

thread_local! {
    /// A test of this thread captures the log itself ([`capture_logs`]): a harness must not
    /// take the lines it searches.
    static CAPTURING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// The most a captured log keeps: its newest half once it grows past this.
const LOG_CAP: usize = 32 << 20;

impl LogsOnFailure {
    /// For the test running on this thread (its thread is named after it).
    pub fn for_this_test() -> Option<LogsOnFailure> {
        std::env::var_os("CFTUNNEL_TEST_LOG_DIR")?;
        if CAPTURING.with(std::cell::Cell::get) {
            return None;
        }
        let name = std::thread::current()
            .name()
            .unwrap_or("test")
            .replace("::", "-");
        #[derive(Clone)]
        struct Sink(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);
        impl std::io::Write for Sink {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                let mut kept = self
                    .0
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                if kept.len() + buf.len() > LOG_CAP {
                    let drop = kept.len() / 2;
                    kept.drain(..drop);
                }
                kept.extend_from_slice(buf);
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let buffer = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = Sink(buffer.clone());
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(
                "debug,h2=info,hyper=info,hyper_util=info,rustls=info,tower=info,kube_client=info",
            ))
            .with_ansi(false)
            .with_writer(move || sink.clone())
            .finish();
        Some(LogsOnFailure {
            name,
            _guard: tracing::subscriber::set_default(subscriber),
            buffer,
        })
    }
}

impl Drop for LogsOnFailure {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        if let Some(dir) = std::env::var_os("CFTUNNEL_TEST_LOG_DIR") {
            let path = std::path::Path::new(&dir).join(format!("{}.operator.log", self.name));
            let _ = std::fs::write(&path, captured(&self.buffer));
            eprintln!("operator log: {}", path.display());
        }
    }
}
