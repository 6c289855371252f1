//! A Tunnel in Cloudflare mode on the node: its cloudflared pod runs from the connector token in
//! the managed Secret (no config file), and a route change reaches the tunnel's configuration at
//! Cloudflare while the pod keeps running: same uid, no restart, no new ReplicaSet.

use std::time::Duration;

use cftunnel_testenv::{ControlPlane, poll_until};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;

use super::common::{apply, kubectl};
use super::install::{Cloudflare, ZONE};
use super::pods::{POLL, WAIT};
use super::tunnel::{
    apply_tunnel_after_its_routes, cloudflared_pod, running_pods, tunnel_manifest_with,
};

const TUNNEL: &str = "relay";
/// Service names, so hostnames (`<service>.<zone>`) other than those of the Local-mode scenario
/// (a hostname has one owner: the older claim would keep it).
const FIRST: &str = "relay-web";
const SECOND: &str = "relay-api";
/// How long after the pushed change the pod is watched for a restart or a replacement.
const SETTLE: Duration = Duration::from_secs(15);

/// `hostname`s of the tunnel's configuration at Cloudflare, in order (`*` for the catch-all).
fn pushed_hostnames(cf: &Cloudflare, tunnel_id: &str) -> Vec<String> {
    let tunnel = cf.sim.tunnels().into_iter().find(|t| t.id == tunnel_id);
    let config = tunnel.and_then(|t| t.config).unwrap_or_default();
    config["ingress"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| r["hostname"].as_str().unwrap_or("*").to_string())
        .collect()
}

async fn wait_pushed(cf: &Cloudflare, tunnel_id: &str, wanted: &[String]) {
    poll_until(
        "the configuration pushed to Cloudflare",
        WAIT,
        POLL,
        || async { (pushed_hostnames(cf, tunnel_id) == wanted).then_some(()) },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}; pushed: {:?}", pushed_hostnames(cf, tunnel_id)));
}

fn restarts(pod: &Pod) -> Vec<i32> {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .map(|c| c.iter().map(|c| c.restart_count).collect())
        .unwrap_or_default()
}

async fn replica_sets(plane: &ControlPlane, ns: &str) -> Vec<String> {
    let sets: Api<ReplicaSet> = Api::namespaced(plane.admin_client().expect("client"), ns);
    let mut names: Vec<String> = sets
        .list(&ListParams::default().labels("cfargotunnel.com/app=cloudflared"))
        .await
        .expect("replica sets")
        .items
        .into_iter()
        .filter_map(|r| r.metadata.name)
        .collect();
    names.sort();
    names
}

/// The scenario; the Tunnel stays for the uninstall check.
pub async fn remote_tunnel_changes_routes_without_a_restart(plane: &ControlPlane, cf: &Cloudflare) {
    let ns = plane
        .create_namespace("node-remote")
        .await
        .expect("namespace");
    let manifest =
        tunnel_manifest_with(TUNNEL, &cf.sim.account_id(), "  configSource: Cloudflare\n");
    apply_tunnel_after_its_routes(plane, &ns, TUNNEL, FIRST, &manifest).await;
    let pod = cloudflared_pod(plane, &ns, TUNNEL).await;
    let name = pod.metadata.name.clone().expect("pod name");
    let uid = pod.metadata.uid.clone().expect("pod uid");
    let tunnel = cf
        .sim
        .tunnels()
        .into_iter()
        .find(|t| t.name == format!("{TUNNEL}-node-test") && t.deleted_at.is_none())
        .expect("the tunnel at Cloudflare");
    assert_eq!(tunnel.config_src, "cloudflare");

    // cloudflared took the token from its environment (the Secret) and started that tunnel.
    let logs = poll_until("cloudflared's start-up log", WAIT, POLL, || async {
        let (ok, out) = kubectl(plane, &["logs", "-n", &ns, &name], "");
        (ok && out.contains("Starting metrics server")).then_some(out)
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        logs.contains(&format!("Starting tunnel tunnelID={}", tunnel.id)),
        "{logs}"
    );
    assert!(!logs.contains("config.yaml"), "no config file: {logs}");
    wait_pushed(
        cf,
        &tunnel.id,
        &[format!("{FIRST}.{ZONE}"), "*".to_string()],
    )
    .await;
    let sets = replica_sets(plane, &ns).await;

    let more = format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{name: {SECOND}}}\nspec:\n  ports: [{{name: http, port: 80}}]\n---\napiVersion: networking.cfargotunnel.com/v1alpha1\nkind: TunnelBinding\nmetadata: {{name: {SECOND}}}\nsubjects: [{{name: {SECOND}}}]\ntunnelRef: {{kind: Tunnel, name: {TUNNEL}}}\n"
    );
    let (ok, printed) = apply(plane, &ns, &more);
    assert!(ok, "{printed}");
    wait_pushed(
        cf,
        &tunnel.id,
        &[
            format!("{SECOND}.{ZONE}"),
            format!("{FIRST}.{ZONE}"),
            "*".to_string(),
        ],
    )
    .await;
    tokio::time::sleep(SETTLE).await;

    let pods = running_pods(plane, &ns).await;
    let uids: Vec<String> = pods.iter().filter_map(|p| p.metadata.uid.clone()).collect();
    assert_eq!(
        uids,
        vec![uid],
        "the same single pod after the route change"
    );
    assert_eq!(restarts(&pods[0]), vec![0], "restartCount");
    assert_eq!(replica_sets(plane, &ns).await, sets, "no new ReplicaSet");
}
