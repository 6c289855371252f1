//! Two clusters connected to one existing tunnel (HA, blue/green, disaster recovery), each with
//! its own control plane and cftunnel and no flag set, sharing one simulated Cloudflare account:
//! each keeps its hostnames through the other's drift rounds, restarts and deletions; a
//! hostname both route stays with the first and moves to the second once the first lets go.
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use cftunnel::caches::WatchScope;
use cftunnel::term::ControllerOptions;
use cftunnel_cloudflare::{CloudflareClient, ConfigSrc, Credentials};
use cftunnel_sim::{Operation, RunningSim, SimConfig, SimDnsRecord, Simulator};
use cftunnel_testenv::{ControlPlane, ControlPlaneOptions, poll_until};
use cftunnel_types::{Tunnel, TunnelBinding};
use k8s_openapi::api::core::v1::{Namespace, Secret, Service};
use kube::api::{DeleteParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

const TOKEN: &str = "two-clusters-token";
const ZONE: &str = "example.com";
const WAIT: Duration = Duration::from_secs(120);
const POLL: Duration = Duration::from_millis(250);
/// The drift interval of both operators: DNS is checked again this often.
const DRIFT: Duration = Duration::from_secs(2);

/// One cluster: its control plane, a namespace, and its operator (restartable).
struct Cluster {
    plane: ControlPlane,
    client: Client,
    ns: String,
    id: String,
    options: ControllerOptions,
    operator: Option<tokio::task::JoinHandle<()>>,
}

impl Cluster {
    async fn start(
        sim: &RunningSim,
        account: &str,
        credentials_file: &str,
        tunnel_id: &str,
    ) -> Cluster {
        let plane = ControlPlane::start(ControlPlaneOptions::for_cftunnel())
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let client = plane.admin_client().expect("admin client");
        // The same manifests in both clusters: one namespace name, one Tunnel name, so only the
        // cluster identity tells their records apart.
        let ns = "apps".to_string();
        let namespace: Namespace =
            serde_json::from_value(json!({"metadata": {"name": ns}})).expect("namespace");
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &namespace)
            .await
            .expect("namespace");
        let id = Api::<Namespace>::all(client.clone())
            .get("kube-system")
            .await
            .expect("kube-system")
            .metadata
            .uid
            .expect("uid");
        let secret: Secret = serde_json::from_value(json!({
            "metadata": {"name": "cloudflare-api"},
            "data": {
                "CLOUDFLARE_API_TOKEN": STANDARD.encode(TOKEN),
                "CLOUDFLARE_TUNNEL_CREDENTIAL_FILE": STANDARD.encode(credentials_file),
            },
        }))
        .expect("secret");
        Api::<Secret>::namespaced(client.clone(), &ns)
            .create(&PostParams::default(), &secret)
            .await
            .expect("API secret");
        let service: Service = serde_json::from_value(json!({
            "metadata": {"name": "web"},
            "spec": {"ports": [{"name": "http", "port": 80}]},
        }))
        .expect("service");
        Api::<Service>::namespaced(client.clone(), &ns)
            .create(&PostParams::default(), &service)
            .await
            .expect("service");
        let mut cluster = Cluster {
            plane,
            client,
            ns,
            id,
            options: ControllerOptions {
                cloudflare_api_url: sim.url.clone(),
                drift_interval: DRIFT,
                retry_base: Duration::from_millis(500),
                retry_max: Duration::from_secs(5),
                ..ControllerOptions::default()
            },
            operator: None,
        };
        cluster.options.cluster_resource_namespace = cluster.ns.clone();
        cluster.start_operator();
        let tunnel: Tunnel = serde_json::from_value(json!({
            "apiVersion": "networking.cfargotunnel.com/v1alpha2",
            "kind": "Tunnel",
            "metadata": {"name": "edge"},
            "spec": {
                "existingTunnel": {"id": tunnel_id},
                "cloudflare": {"domain": ZONE, "secret": "cloudflare-api", "accountId": account},
            },
        }))
        .expect("tunnel");
        cluster
            .tunnels()
            .create(&PostParams::default(), &tunnel)
            .await
            .expect("tunnel");
        cluster
    }

    fn start_operator(&mut self) {
        if let Some(task) = self.operator.take() {
            task.abort();
        }
        let scope = WatchScope {
            namespace: Some(self.ns.clone()),
            label_selector: None,
        };
        self.operator = Some(tokio::spawn(cftunnel::wiring::run_reconcilers(
            self.client.clone(),
            self.options.clone(),
            scope,
        )));
    }

    fn tunnels(&self) -> Api<Tunnel> {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    fn bindings(&self) -> Api<TunnelBinding> {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    async fn bind(&self, name: &str, fqdn: &str) {
        let binding: TunnelBinding = serde_json::from_value(json!({
            "apiVersion": "networking.cfargotunnel.com/v1alpha1",
            "kind": "TunnelBinding",
            "metadata": {"name": name},
            "subjects": [{"name": "web", "spec": {"fqdn": fqdn}}],
            "tunnelRef": {"kind": "Tunnel", "name": "edge"},
        }))
        .expect("binding");
        self.bindings()
            .create(&PostParams::default(), &binding)
            .await
            .expect("binding");
    }

    async fn unbind(&self, name: &str) {
        self.bindings()
            .delete(name, &DeleteParams::default())
            .await
            .expect("delete binding");
        poll_until(&format!("binding {name} gone"), WAIT, POLL, || async {
            matches!(self.bindings().get_opt(name).await, Ok(None)).then_some(())
        })
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    }

    /// The marker this cluster writes for its Tunnel `edge`.
    fn marker(&self) -> String {
        format!("cftunnel Tunnel {}/edge cluster={}", self.ns, self.id)
    }

    async fn binding_reason(&self, name: &str) -> Option<String> {
        let binding = self.bindings().get_opt(name).await.ok()??;
        let conditions = binding.status?.conditions?;
        conditions
            .into_iter()
            .find(|c| c.type_ == "Ready")
            .map(|c| c.reason)
    }
}

fn cname(sim: &Simulator, name: &str) -> Option<SimDnsRecord> {
    sim.dns_records(ZONE)
        .into_iter()
        .find(|r| r.record_type == "CNAME" && r.name == name)
}

/// Waits until the CNAME at `name` carries `marker`.
async fn wait_held_by(sim: &Simulator, name: &str, marker: &str) {
    poll_until(&format!("{name} held by {marker}"), WAIT, POLL, || async {
        (cname(sim, name)?.comment.as_deref() == Some(marker)).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}; zone holds {:?}", sim.dns_records(ZONE)));
}

/// Waits until the simulator has answered `more` further candidate reads (DNS syncs).
async fn wait_rounds(sim: &Simulator, more: u64) {
    let start = sim.calls(Operation::ListDnsRecords);
    poll_until("more DNS rounds", WAIT, POLL, || async {
        (sim.calls(Operation::ListDnsRecords) >= start + more).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
}

#[tokio::test]
async fn two_clusters_on_one_tunnel_keep_their_hostnames_and_hand_one_over() {
    cftunnel_testenv::install_crypto_provider();
    let sim = Simulator::new(SimConfig {
        tokens: vec![TOKEN.into()],
        zones: vec![ZONE.into()],
        ..SimConfig::default()
    });
    let running = sim
        .serve("127.0.0.1:0".parse().expect("addr"))
        .await
        .expect("sim");
    let secret = [3u8; 32];
    let cf = CloudflareClient::builder(Credentials::ApiToken(TOKEN.into()))
        .base_url(running.url.clone())
        .build()
        .expect("client");
    let tunnel = cf
        .create_tunnel(&sim.account_id(), "shared", &secret, ConfigSrc::Local)
        .await
        .expect("tunnel")
        .id;
    let file = json!({"AccountTag": sim.account_id(), "TunnelSecret": STANDARD.encode(secret), "TunnelID": tunnel}).to_string();

    let account = sim.account_id();
    let first = Cluster::start(&running, &account, &file, &tunnel).await;
    let mut second = Cluster::start(&running, &account, &file, &tunnel).await;
    assert_ne!(
        first.id, second.id,
        "two clusters are never the same owner by default"
    );

    first.bind("a", "a.example.com").await;
    first.bind("both", "both.example.com").await;
    wait_held_by(&sim, "a.example.com", &first.marker()).await;
    wait_held_by(&sim, "both.example.com", &first.marker()).await;
    second.bind("b", "b.example.com").await;
    second.bind("both", "both.example.com").await;
    wait_held_by(&sim, "b.example.com", &second.marker()).await;
    poll_until(
        "the second is told another cluster holds it",
        WAIT,
        POLL,
        || async {
            (second.binding_reason("both").await.as_deref() == Some("DNSHeldByOtherCluster"))
                .then_some(())
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));

    // Drift rounds of both, and a restart of the second: nobody's records move.
    wait_rounds(&sim, 6).await;
    second.start_operator();
    wait_rounds(&sim, 6).await;
    wait_held_by(&sim, "a.example.com", &first.marker()).await;
    wait_held_by(&sim, "b.example.com", &second.marker()).await;
    wait_held_by(&sim, "both.example.com", &first.marker()).await;

    // The first lets go of one of its own hostnames: only that record goes.
    first.unbind("a").await;
    poll_until("a.example.com gone", WAIT, POLL, || async {
        cname(&sim, "a.example.com").is_none().then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    wait_held_by(&sim, "b.example.com", &second.marker()).await;

    // The first lets go of the shared hostname: the second takes it over at a DNS check.
    first.unbind("both").await;
    wait_held_by(&sim, "both.example.com", &second.marker()).await;
    poll_until("the second's binding is Routed", WAIT, POLL, || async {
        (second.binding_reason("both").await.as_deref() == Some("Routed")).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));

    // The first cluster's Tunnel goes: the second's records stay.
    first
        .tunnels()
        .delete("edge", &DeleteParams::default())
        .await
        .expect("delete tunnel");
    poll_until("the first's Tunnel gone", WAIT, POLL, || async {
        matches!(first.tunnels().get_opt("edge").await, Ok(None)).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    wait_rounds(&sim, 3).await;
    wait_held_by(&sim, "b.example.com", &second.marker()).await;
    wait_held_by(&sim, "both.example.com", &second.marker()).await;
    let txts = sim
        .dns_records(ZONE)
        .into_iter()
        .filter(|r| r.name.starts_with("_managed."))
        .count();
    assert_eq!(txts, 2, "each of the second's hostnames keeps its TXT");

    if let Some(task) = second.operator.take() {
        task.abort();
    }
    let Cluster { plane, .. } = second;
    plane.stop().await;
    let Cluster {
        plane, operator, ..
    } = first;
    if let Some(task) = operator {
        task.abort();
    }
    plane.stop().await;
    running.shutdown().await;
}
