//! The Go operator's Deployment of a ClusterTunnel (docs/design.md §7.3): the Go operator named it after
//! the ClusterTunnel, cftunnel names its own `clustertunnel-<name>`, so the Go one is retired —
//! deleted only once cftunnel's has an available replica, and before the tunnel on deletion.
use std::collections::BTreeMap;
use std::time::Duration;

use cftunnel_testenv::poll_until;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use super::harness::{Harness, POLL, TOKEN, WAIT};
use super::takeover::{controller_uid, go_deployment_of, plant};

/// Its own name: the Secret guard of every harness counts ClusterTunnels (cluster-wide) naming
/// a Secret of its name, so a ClusterTunnel left by a failed test must not name theirs.
const API_SECRET: &str = "cloudflare-api-ct-takeover";
/// Keeps a pod in Terminating until the test lets it go.
const HOLD: &str = "cftunnel-test/hold";

/// The Go operator's selector for a ClusterTunnel: the fixed labels plus spec-dependent ones.
fn go_cluster_selector(name: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("cfargotunnel.com/app".into(), "cloudflared".into()),
        ("cfargotunnel.com/is-cluster-tunnel".into(), "true".into()),
        ("cfargotunnel.com/tunnel".into(), name.into()),
        (
            "cfargotunnel.com/id".into(),
            "0c1f8a53-5d3b-4f67-9d0e-2d6c1b7a9e41".into(),
        ),
        ("cfargotunnel.com/name".into(), name.into()),
        ("cfargotunnel.com/domain".into(), "example.com".into()),
    ])
}

/// A ClusterTunnel created while the operator is stopped, with the Go operator's Deployment
/// planted under its Go name; returns (name, Go Deployment uid, Go pod name).
async fn stopped_with_go_cluster_tunnel(h: &mut Harness) -> (String, String, String) {
    h.stop_operator();
    h.create_api_secret(API_SECRET, &[("CLOUDFLARE_API_TOKEN", TOKEN)])
        .await;
    let name = format!("ct-{}", h.ns);
    let ct = h
        .create_cluster_tunnel(
            &name,
            h.spec(API_SECRET, json!({"newTunnel": {"name": name}})),
        )
        .await;
    let uid = ct.uid().expect("uid");
    let go = go_deployment_of(
        "ClusterTunnel",
        &name,
        &go_cluster_selector(&name),
        Some(&uid),
    );
    let (go_uid, _, rs_uid, _) = plant(h, &go).await;
    let pods: Api<Pod> = Api::namespaced(h.admin.clone(), &h.ns);
    let pod = pods
        .list(&ListParams::default())
        .await
        .expect("pods")
        .items
        .into_iter()
        .find(|p| controller_uid(p.owner_references()) == Some(rs_uid.clone()))
        .expect("the Go pod");
    (name, go_uid, pod.name_any())
}

/// Writes the status a kubelet would write for a ready pod of `deployment` (there is no
/// kubelet here); returns the pod's name.
async fn mark_a_pod_ready(h: &Harness, deployment: &Deployment) -> String {
    let deployment_uid = deployment.uid().expect("uid");
    let replica_sets: Api<ReplicaSet> = Api::namespaced(h.admin.clone(), &h.ns);
    let pods: Api<Pod> = Api::namespaced(h.admin.clone(), &h.ns);
    let pod = poll_until("a pod of our Deployment", WAIT, POLL, || async {
        let sets = replica_sets.list(&ListParams::default()).await.ok()?;
        let rs_uids: Vec<String> = sets
            .items
            .iter()
            .filter(|rs| controller_uid(rs.owner_references()) == Some(deployment_uid.clone()))
            .filter_map(|rs| rs.uid())
            .collect();
        pods.list(&ListParams::default())
            .await
            .ok()?
            .items
            .into_iter()
            .find(|p| controller_uid(p.owner_references()).is_some_and(|u| rs_uids.contains(&u)))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let now = jiff::Timestamp::now().to_string();
    pods.patch_status(
        &pod.name_any(),
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now}],
        }})),
    )
    .await
    .expect("mark the pod ready");
    pod.name_any()
}

#[tokio::test]
async fn a_go_cluster_tunnel_deployment_is_retired_once_ours_has_a_ready_replica() {
    let mut h = Harness::start("tr-ct-takeover").await;
    let (name, go_uid, go_pod) = stopped_with_go_cluster_tunnel(&mut h).await;
    h.start_operator();
    h.wait_reason(&h.cluster_tunnels(), &name, "Ready").await;
    h.wait_event(&name, "WaitingToRetireGoDeployment").await;

    // Ours exists beside it; the Go Deployment and its pod keep serving meanwhile.
    let deployments: Api<Deployment> = Api::namespaced(h.admin.clone(), &h.ns);
    let ours = deployments
        .get(&format!("clustertunnel-{name}"))
        .await
        .expect("our Deployment");
    let go = deployments.get(&name).await.expect("Go Deployment kept");
    assert_eq!(go.uid(), Some(go_uid));
    assert!(go.metadata.deletion_timestamp.is_none());
    let pods: Api<Pod> = Api::namespaced(h.admin.clone(), &h.ns);
    let pod = pods.get(&go_pod).await.expect("Go pod kept");
    assert!(pod.metadata.deletion_timestamp.is_none());
    assert!(
        !h.event_reasons(&name)
            .await
            .contains(&"RetiredGoDeployment".to_string())
    );

    mark_a_pod_ready(&h, &ours).await;
    h.wait_gone(&deployments, &name).await;
    h.wait_event(&name, "RetiredGoDeployment").await;
    let kept = deployments
        .get(&format!("clustertunnel-{name}"))
        .await
        .expect("ours kept");
    assert_eq!(kept.uid(), ours.uid());
    h.wait_reason(&h.cluster_tunnels(), &name, "Ready").await;
    assert_eq!(h.live_tunnels().len(), 1);

    h.cluster_tunnels()
        .delete(&name, &DeleteParams::default())
        .await
        .expect("delete");
    h.wait_gone(&h.cluster_tunnels(), &name).await;
    assert_eq!(h.live_tunnels().len(), 0);
}

#[tokio::test]
async fn deleting_a_cluster_tunnel_removes_the_go_pods_before_the_tunnel() {
    let mut h = Harness::start("tr-ct-takeover-delete").await;
    let (name, _, go_pod) = stopped_with_go_cluster_tunnel(&mut h).await;
    let pods: Api<Pod> = Api::namespaced(h.admin.clone(), &h.ns);
    pods.patch(
        &go_pod,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": [HOLD]}})),
    )
    .await
    .expect("hold the Go pod");
    h.start_operator();
    h.wait_reason(&h.cluster_tunnels(), &name, "Ready").await;
    assert_eq!(h.live_tunnels().len(), 1);

    h.cluster_tunnels()
        .delete(&name, &DeleteParams::default())
        .await
        .expect("delete");
    poll_until("the Go pod terminating", WAIT, POLL, || async {
        let pod = pods.get_opt(&go_pod).await.ok().flatten()?;
        pod.metadata.deletion_timestamp.is_some().then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    // Several cleanup passes (every 2 s) run while the Go pod is held: none deletes the tunnel.
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(h.live_tunnels().len(), 1, "tunnel deleted under a live pod");
    assert!(
        h.cluster_tunnels()
            .get_opt(&name)
            .await
            .expect("get")
            .is_some()
    );

    pods.patch(
        &go_pod,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .expect("release the Go pod");
    h.wait_gone(&h.cluster_tunnels(), &name).await;
    assert_eq!(h.live_tunnels().len(), 0);
    let deployments: Api<Deployment> = Api::namespaced(h.admin.clone(), &h.ns);
    assert!(deployments.get_opt(&name).await.expect("get").is_none());
}
