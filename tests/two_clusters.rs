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
use cftunnel_types::network::{NetworkRoute, VirtualNetwork};
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
        Cluster::start_with(sim, account, credentials_file, tunnel_id, json!({})).await
    }

    /// [`Cluster::start`] with `extra` merged into the Tunnel's spec.
    async fn start_with(
        sim: &RunningSim,
        account: &str,
        credentials_file: &str,
        tunnel_id: &str,
        extra: serde_json::Value,
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
        let mut spec = json!({
            "existingTunnel": {"id": tunnel_id},
            "cloudflare": {"domain": ZONE, "secret": "cloudflare-api", "accountId": account},
        });
        if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
            spec.extend(extra.clone());
        }
        let tunnel: Tunnel = serde_json::from_value(json!({
            "apiVersion": "networking.cfargotunnel.com/v1alpha2",
            "kind": "Tunnel",
            "metadata": {"name": "edge"},
            "spec": spec,
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

    /// The message of the Tunnel's `SharedTunnel` condition, if it has one.
    async fn shared_condition(&self) -> Option<String> {
        let tunnel = self.tunnels().get_opt("edge").await.ok()??;
        let conditions = tunnel.status?.conditions?;
        conditions
            .into_iter()
            .find(|c| c.type_ == "SharedTunnel")
            .map(|c| c.message)
    }

    async fn stop(mut self) {
        if let Some(task) = self.operator.take() {
            task.abort();
        }
        self.plane.stop().await;
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
    // Each routes a hostname the other does not: each Tunnel says so, naming the other's.
    for (cluster, other, theirs, mine) in [
        (&first, &second.id, "b.example.com", "a.example.com"),
        (&second, &first.id, "a.example.com", "b.example.com"),
    ] {
        let message = poll_until("the SharedTunnel condition", WAIT, POLL, || async {
            cluster
                .shared_condition()
                .await
                .filter(|m| m.contains(theirs))
        })
        .await
        .unwrap_or_else(|e| panic!("{e}"));
        assert!(
            message.starts_with(&format!("cluster(s) {other} route {theirs} through")),
            "{message}"
        );
        assert!(message.contains("catch-all (http_status:404)"), "{message}");
        assert!(
            !message.contains(mine) && !message.contains("both.example.com"),
            "{message}"
        );
        let events = Api::<k8s_openapi::api::events::v1::Event>::namespaced(
            cluster.client.clone(),
            &cluster.ns,
        )
        .list(&Default::default())
        .await
        .expect("events");
        assert!(
            events
                .items
                .iter()
                .any(|e| e.reason.as_deref() == Some("SharedTunnel")
                    && e.note.as_deref().is_some_and(|n| n.contains(theirs))),
            "a SharedTunnel Event names {theirs}"
        );
    }
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

    second.stop().await;
    first.stop().await;
    running.shutdown().await;
}

/// A simulated account holding one tunnel created with `src`, and the credentials file of it.
async fn shared_tunnel(src: ConfigSrc) -> (Simulator, RunningSim, String, String) {
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
        .create_tunnel(&sim.account_id(), "shared", &secret, src)
        .await
        .expect("tunnel")
        .id;
    let file = json!({"AccountTag": sim.account_id(), "TunnelSecret": STANDARD.encode(secret), "TunnelID": tunnel}).to_string();
    (sim, running, tunnel, file)
}

#[tokio::test]
async fn two_clusters_routing_the_same_hostnames_through_one_tunnel_are_not_a_shared_layout() {
    let (sim, running, tunnel, file) = shared_tunnel(ConfigSrc::Local).await;
    let account = sim.account_id();
    let first = Cluster::start(&running, &account, &file, &tunnel).await;
    let second = Cluster::start(&running, &account, &file, &tunnel).await;
    for cluster in [&first, &second] {
        cluster.bind("app", "app.example.com").await;
    }
    // Whichever wrote it first holds the record; both route the hostname.
    poll_until("app.example.com written", WAIT, POLL, || async {
        cname(&sim, "app.example.com").map(|_| ())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    wait_rounds(&sim, 6).await;
    for cluster in [&first, &second] {
        assert_eq!(
            cluster.shared_condition().await,
            None,
            "replicas share a tunnel rightly"
        );
    }
    second.stop().await;
    first.stop().await;
    running.shutdown().await;
}

/// `(hostname, service)` of every rule of the tunnel's configuration.
fn remote_rules(sim: &Simulator, tunnel: &str) -> Vec<(String, String)> {
    let config = sim
        .tunnels()
        .into_iter()
        .find(|t| t.id == tunnel)
        .and_then(|t| t.config)
        .unwrap_or_default();
    config["ingress"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            (
                r["hostname"].as_str().unwrap_or("*").to_string(),
                r["service"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

#[tokio::test]
async fn two_clusters_on_one_remote_tunnel_keep_both_their_rules_through_drift_checks() {
    let (sim, running, tunnel, file) = shared_tunnel(ConfigSrc::Cloudflare).await;
    let account = sim.account_id();
    let remote = json!({"configSource": "Cloudflare"});
    let first = Cluster::start_with(&running, &account, &file, &tunnel, remote.clone()).await;
    let second = Cluster::start_with(&running, &account, &file, &tunnel, remote).await;
    first.bind("a", "a.example.com").await;
    second.bind("b", "b.example.com").await;
    let both = vec![
        (
            "a.example.com".to_string(),
            "http://web.apps.svc:80".to_string(),
        ),
        (
            "b.example.com".to_string(),
            "http://web.apps.svc:80".to_string(),
        ),
        ("*".to_string(), "http_status:404".to_string()),
    ];
    // Exact hostnames in the order their writers pushed them; the catch-all last.
    let sorted = || {
        let mut rules = remote_rules(&sim, &tunnel);
        let catch_all = rules.pop();
        rules.sort();
        rules.extend(catch_all);
        rules
    };
    poll_until("both clusters' rules", WAIT, POLL, || async {
        (sorted() == both).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}: {:?}", remote_rules(&sim, &tunnel)));
    // Several drift intervals: each reads the configuration, neither writes it again.
    let puts = sim.calls(Operation::PutConfiguration);
    let reads = sim.calls(Operation::GetConfiguration);
    poll_until("six more drift reads", WAIT, POLL, || async {
        (sim.calls(Operation::GetConfiguration) >= reads + 6).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        sim.calls(Operation::PutConfiguration),
        puts,
        "a cluster restored its copy"
    );
    assert_eq!(sorted(), both);
    second.stop().await;
    first.stop().await;
    running.shutdown().await;
}

/// Creates, in `cluster`, the VirtualNetwork `network` (made at Cloudflare) and the
/// NetworkRoute `pods` routing `cidr` in it through the Tunnel `edge`.
async fn route_pods_in(cluster: &Cluster, account: &str, network: &str, cidr: &str) {
    let vnet: VirtualNetwork = serde_json::from_value(json!({
        "apiVersion": "networking.cfargotunnel.com/v1alpha2",
        "kind": "VirtualNetwork",
        "metadata": {"name": network},
        "spec": {"name": network, "cloudflare": {"accountId": account, "secret": "cloudflare-api"}},
    }))
    .expect("VirtualNetwork");
    Api::<VirtualNetwork>::all(cluster.client.clone())
        .create(&PostParams::default(), &vnet)
        .await
        .expect("create VirtualNetwork");
    let route: NetworkRoute = serde_json::from_value(json!({
        "apiVersion": "networking.cfargotunnel.com/v1alpha2",
        "kind": "NetworkRoute",
        "metadata": {"name": "pods"},
        "spec": {"tunnelRef": {"name": "edge"}, "virtualNetworkRef": {"name": network},
            "cidrs": [cidr]},
    }))
    .expect("NetworkRoute");
    Api::<NetworkRoute>::namespaced(cluster.client.clone(), &cluster.ns)
        .create(&PostParams::default(), &route)
        .await
        .expect("create NetworkRoute");
}

/// The live IP routes of `cidr`, by virtual network name.
fn routes_of(sim: &Simulator, cidr: &str) -> Vec<(String, String)> {
    let networks = sim.virtual_networks();
    let mut out: Vec<(String, String)> = sim
        .ip_routes()
        .into_iter()
        .filter(|r| r.deleted_at.is_none() && r.network == cidr)
        .map(|r| {
            let name = networks
                .iter()
                .find(|n| n.id == r.virtual_network_id)
                .map(|n| n.name.clone())
                .unwrap_or_default();
            (name, r.id)
        })
        .collect();
    out.sort();
    out
}

#[tokio::test]
async fn two_clusters_route_the_same_cidr_in_their_own_virtual_networks_and_never_touch_each_other()
{
    let (sim, running, tunnel, file) = shared_tunnel(ConfigSrc::Local).await;
    let account = sim.account_id();
    let first = Cluster::start(&running, &account, &file, &tunnel).await;
    let second = Cluster::start(&running, &account, &file, &tunnel).await;
    // Every cluster has a 10.96.0.0/12: each in a network of its own.
    route_pods_in(&first, &account, "cluster-a", "10.96.0.0/12").await;
    route_pods_in(&second, &account, "cluster-b", "10.96.0.0/12").await;
    let both = poll_until("the CIDR routed in both networks", WAIT, POLL, || async {
        let routes = routes_of(&sim, "10.96.0.0/12");
        let names: Vec<&str> = routes.iter().map(|(n, _)| n.as_str()).collect();
        (names == ["cluster-a", "cluster-b"]).then_some(routes)
    })
    .await
    .unwrap_or_else(|e| panic!("{e}: {:?}", sim.ip_routes()));
    // Drift checks of both (every 2 s): neither changes, deletes or remakes the other's.
    let lists = sim.calls(Operation::ListIpRoutes);
    poll_until("several drift checks", WAIT, POLL, || async {
        (sim.calls(Operation::ListIpRoutes) >= lists + 6).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(routes_of(&sim, "10.96.0.0/12"), both, "both kept, same ids");
    assert_eq!(sim.calls(Operation::UpdateIpRoute), 0);
    // The first cluster lets go: only its route goes.
    Api::<NetworkRoute>::namespaced(first.client.clone(), &first.ns)
        .delete("pods", &DeleteParams::default())
        .await
        .expect("delete NetworkRoute");
    poll_until(
        "only the second cluster's route left",
        WAIT,
        POLL,
        || async {
            let routes = routes_of(&sim, "10.96.0.0/12");
            (routes.len() == 1 && routes[0] == both[1]).then_some(())
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}: {:?}", routes_of(&sim, "10.96.0.0/12")));
    first.stop().await;
    second.stop().await;
}
