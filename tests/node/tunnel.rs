//! A Tunnel with a binding, reconciled by the in-cluster operator: its cloudflared pod runs
//! hardened, loads the config cftunnel wrote, waits for the (unreachable) edge without
//! restarting, and a route change rolls out a new pod while the old one keeps running.

use std::collections::BTreeSet;
use std::time::Duration;

use cftunnel_testenv::{ControlPlane, poll_until};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;

use super::common::{apply, kubectl};
use super::install::{API_TOKEN, Cloudflare, ZONE, is_ready};
use super::pods::{Enforced, POLL, WAIT, container_pid};

/// cloudflared with a static local edge address: it skips the DNS lookup of Cloudflare's edge
/// (which fails, and makes it exit, in a namespace without a route off the machine) and keeps
/// retrying a connection to an address where nothing listens.
pub const LOCAL_EDGE: &str = "127.0.0.1:7844";
const CHECKSUM: &str = "cfargotunnel.com/checksum";
/// How long the test watches an edge-less cloudflared for restarts.
const WATCH: Duration = Duration::from_secs(40);

/// The Secret, Service and binding a user writes for Tunnel `tunnel`.
pub fn route_manifests(tunnel: &str, service: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Secret
metadata: {{name: cloudflare-secrets}}
stringData: {{CLOUDFLARE_API_TOKEN: {API_TOKEN}}}
---
apiVersion: v1
kind: Service
metadata: {{name: {service}}}
spec:
  ports: [{{name: http, port: 80}}]
---
apiVersion: networking.cfargotunnel.com/v1alpha1
kind: TunnelBinding
metadata: {{name: {service}}}
subjects: [{{name: {service}}}]
tunnelRef: {{kind: Tunnel, name: {tunnel}}}
"#
    )
}

/// The Tunnel (deployPatch: one replica, local edge).
pub fn tunnel_manifest(tunnel: &str, account_id: &str) -> String {
    tunnel_manifest_with(tunnel, account_id, "")
}

/// [`tunnel_manifest`] with more lines of `spec` (each indented two spaces, ending in `\n`).
pub fn tunnel_manifest_with(tunnel: &str, account_id: &str, more_spec: &str) -> String {
    format!(
        r#"apiVersion: networking.cfargotunnel.com/v1alpha2
kind: Tunnel
metadata: {{name: {tunnel}}}
spec:
{more_spec}  newTunnel: {{name: {tunnel}-node-test}}
  cloudflare: {{domain: {ZONE}, secret: cloudflare-secrets, accountId: {account_id}}}
  deployPatch: |
    spec:
      replicas: 1
      template:
        spec:
          containers:
            - name: cloudflared
              env: [{{name: TUNNEL_EDGE, value: "{LOCAL_EDGE}"}}]
"#
    )
}

/// Applies the routes, waits until the operator has seen them (the binding reports that its
/// tunnel does not exist yet), then the Tunnel: its first Deployment then already carries the
/// routes, so exactly one ReplicaSet exists before the route change below. (Applied together,
/// a route computed just after the Tunnel's first sync rolls a second ReplicaSet, and without
/// an edge neither pod ever becomes available to let the other go.)
pub async fn apply_tunnel_after_its_routes(
    plane: &ControlPlane,
    ns: &str,
    tunnel: &str,
    service: &str,
    tunnel_manifest: &str,
) {
    let (ok, printed) = apply(plane, ns, &route_manifests(tunnel, service));
    assert!(ok, "{printed}");
    poll_until(
        "the binding to report its missing tunnel",
        WAIT,
        POLL,
        || async {
            let (ok, out) = kubectl(
                plane,
                &["get", "tunnelbinding", service, "-n", ns, "-o", "json"],
                "",
            );
            (ok && out.contains("TunnelNotFound")).then_some(())
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let (ok, printed) = apply(plane, ns, tunnel_manifest);
    assert!(ok, "{printed}");
}

/// The running cloudflared pods of Deployment `name` (selected by its ReplicaSets' hash).
pub async fn running_pods(plane: &ControlPlane, ns: &str) -> Vec<Pod> {
    let pods: Api<Pod> = Api::namespaced(plane.admin_client().expect("client"), ns);
    let list = pods
        .list(&ListParams::default().labels("cfargotunnel.com/app=cloudflared"))
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    list.into_iter()
        .filter(|p| {
            p.metadata.deletion_timestamp.is_none()
                && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
        })
        .collect()
}

fn checksum_of(pod: &Pod) -> Option<String> {
    pod.metadata.annotations.as_ref()?.get(CHECKSUM).cloned()
}

/// GET from a pod's metrics server (port 2000) over the pod network.
pub async fn metrics_get(pod: &Pod, path: &str) -> Option<(u16, String)> {
    let ip = pod.status.as_ref()?.pod_ip.clone()?;
    let response = reqwest::get(format!("http://{ip}:2000{path}")).await.ok()?;
    let status = response.status().as_u16();
    Some((status, response.text().await.ok()?))
}

/// The whole scenario; returns the namespace (the Tunnel stays for the uninstall check).
pub async fn tunnel_runs_hardened_cloudflared(plane: &ControlPlane, cf: &Cloudflare) -> String {
    let ns = plane
        .create_namespace("node-tunnel")
        .await
        .expect("namespace");
    let manifest = tunnel_manifest("shop", &cf.sim.account_id());
    apply_tunnel_after_its_routes(plane, &ns, "shop", "web", &manifest).await;

    let pod = cloudflared_pod(plane, &ns, "shop").await;
    let name = pod.metadata.name.clone().expect("pod name");
    let pid = container_pid(plane, &ns, &name, "cloudflared").await;
    assert_eq!(
        Enforced::of_pid(pid),
        Enforced::hardened(),
        "cloudflared as the kernel sees it"
    );

    // cloudflared's own log: it started the tunnel cftunnel created, from the mounted config.
    let tunnel_id = cf
        .sim
        .tunnels()
        .into_iter()
        .find(|t| t.name == "shop-node-test" && t.deleted_at.is_none())
        .map(|t| t.id)
        .expect("tunnel shop-node-test created in the simulator");
    let logs = poll_until("cloudflared's start-up log", WAIT, POLL, || async {
        let (ok, out) = kubectl(plane, &["logs", "-n", &ns, &name], "");
        (ok && out.contains("Starting metrics server")).then_some(out)
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        logs.contains(&format!("Starting tunnel tunnelID={tunnel_id}")),
        "{logs}"
    );
    assert!(
        logs.contains("config:/etc/cloudflared/config/config.yaml"),
        "{logs}"
    );
    // Its ingress rules, as cloudflared holds them (`/config` of its metrics server).
    let (status, config) = metrics_get(&pod, "/config").await.expect("GET /config");
    assert_eq!(status, 200);
    let config: serde_json::Value = serde_json::from_str(&config).expect("config JSON");
    let rules: Vec<(String, String)> = config["config"]["ingress"]
        .as_array()
        .expect("ingress rules")
        .iter()
        .map(|r| {
            (
                r["hostname"].as_str().unwrap_or_default().to_string(),
                r["service"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    assert_eq!(
        rules,
        vec![
            (format!("web.{ZONE}"), format!("http://web.{ns}.svc:80")),
            (String::new(), "http_status:404".to_string()),
        ]
    );

    edge_unreachable_waits_without_restarts(plane, &ns, &name, &pod).await;
    route_change_rolls_out_keeping_the_old_pod(plane, &ns).await;
    ns
}

/// Without the edge: `/ready` answers 503 with no connection, `/healthcheck` 200, the pod is not
/// Ready and the container is not restarted (the startup probe allows five minutes).
async fn edge_unreachable_waits_without_restarts(
    plane: &ControlPlane,
    ns: &str,
    name: &str,
    pod: &Pod,
) {
    let (status, body) = metrics_get(pod, "/ready").await.expect("GET /ready");
    assert_eq!(status, 503, "{body}");
    assert!(body.contains(r#""readyConnections":0"#), "{body}");
    let (status, body) = metrics_get(pod, "/healthcheck")
        .await
        .expect("GET /healthcheck");
    assert_eq!((status, body.trim()), (200, "OK"));
    tokio::time::sleep(WATCH).await;
    let pods: Api<Pod> = Api::namespaced(plane.admin_client().expect("client"), ns);
    let now = pods.get(name).await.expect("cloudflared pod");
    assert!(!is_ready(&now), "cloudflared Ready without an edge");
    let restarts: Vec<i32> = now
        .status
        .and_then(|s| s.container_statuses)
        .unwrap_or_default()
        .iter()
        .map(|c| c.restart_count)
        .collect();
    assert_eq!(
        restarts,
        vec![0],
        "restarts after {WATCH:?} without an edge"
    );
}

/// The Deployment's only pod, once the controller has seen the template: the running pod whose
/// checksum is the one the template carries.
async fn settled_pod(plane: &ControlPlane, ns: &str) -> (Pod, String) {
    let deployments: Api<Deployment> = Api::namespaced(plane.admin_client().expect("client"), ns);
    poll_until(
        "the cloudflared Deployment to run one pod of its current template",
        WAIT * 2,
        POLL,
        || async {
            let list = deployments
                .list(&ListParams::default().labels("cfargotunnel.com/app=cloudflared"))
                .await
                .ok()?;
            let deployment = list.items.into_iter().next()?;
            let status = deployment.status.as_ref()?;
            if status.observed_generation != deployment.metadata.generation
                || status.updated_replicas != Some(1)
                || status.replicas != Some(1)
            {
                return None;
            }
            let want = deployment
                .spec
                .template
                .metadata?
                .annotations?
                .get(CHECKSUM)?
                .clone();
            let pod = running_pods(plane, ns)
                .await
                .into_iter()
                .find(|p| checksum_of(p).as_ref() == Some(&want))?;
            Some((pod, want))
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"))
}

/// A second binding changes config.yaml: a new ReplicaSet's pod starts with the new checksum
/// and the new route, and the old pod keeps running (maxUnavailable 0; it was never available,
/// so nothing may go).
async fn route_change_rolls_out_keeping_the_old_pod(plane: &ControlPlane, ns: &str) {
    let (old, old_checksum) = settled_pod(plane, ns).await;
    let old_name = old.metadata.name.clone().expect("name");
    let old_pid = container_pid(plane, ns, &old_name, "cloudflared").await;
    let sets: Api<ReplicaSet> = Api::namespaced(plane.admin_client().expect("client"), ns);
    let set_names = || async {
        sets.list(&ListParams::default().labels("cfargotunnel.com/app=cloudflared"))
            .await
            .expect("replica sets")
            .items
            .iter()
            .filter_map(|r| r.metadata.name.clone())
            .collect::<BTreeSet<String>>()
    };
    let sets_before = set_names().await;

    let more = "apiVersion: v1\nkind: Service\nmetadata: {name: api}\nspec:\n  ports: [{name: http, port: 80}]\n---\napiVersion: networking.cfargotunnel.com/v1alpha1\nkind: TunnelBinding\nmetadata: {name: api}\nsubjects: [{name: api}]\ntunnelRef: {kind: Tunnel, name: shop}\n";
    let (ok, printed) = apply(plane, ns, more);
    assert!(ok, "{printed}");
    let api_rule = format!("\"hostname\":\"api.{ZONE}\"");
    let api_rule = &api_rule;
    let old_checksum = &old_checksum;
    let new = poll_until(
        "a cloudflared pod with a new checksum serving api.example.com",
        WAIT * 2,
        POLL,
        || async move {
            for pod in running_pods(plane, ns).await {
                if checksum_of(&pod).is_some_and(|c| &c != old_checksum)
                    && let Some((200, config)) = metrics_get(&pod, "/config").await
                    && config.contains(api_rule)
                {
                    return Some(pod);
                }
            }
            None
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let new_set = new
        .metadata
        .owner_references
        .as_ref()
        .and_then(|o| o.first())
        .map(|o| o.name.clone())
        .expect("new pod's ReplicaSet");
    assert!(
        !sets_before.contains(&new_set),
        "the new pod belongs to a new ReplicaSet: {new_set} not in {sets_before:?}"
    );
    let still: Vec<String> = running_pods(plane, ns)
        .await
        .iter()
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    assert!(still.contains(&old_name), "old pod gone: {still:?}");
    assert!(
        std::path::Path::new(&format!("/proc/{old_pid}")).exists(),
        "old cloudflared process gone"
    );
    let new_name = new.metadata.name.clone().expect("name");
    let pid = container_pid(plane, ns, &new_name, "cloudflared").await;
    assert_eq!(Enforced::of_pid(pid), Enforced::hardened());
}

/// The first running cloudflared pod in `ns` (the Tunnel's), waiting for it; the namespace's
/// tunnels, Deployments, pods and Events are printed when it never runs.
pub async fn cloudflared_pod(plane: &ControlPlane, ns: &str, tunnel: &str) -> Pod {
    poll_until(
        &format!("the cloudflared pod of Tunnel {tunnel} running"),
        WAIT * 2,
        POLL,
        || async { running_pods(plane, ns).await.into_iter().next() },
    )
    .await
    .unwrap_or_else(|e| {
        let (_, out) = kubectl(
            plane,
            &["get", "tunnel,deploy,pods,events", "-n", ns, "-o", "wide"],
            "",
        );
        panic!("{e}\n{out}")
    })
}
