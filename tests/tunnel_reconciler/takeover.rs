//! Takeover of the Deployment the Go operator left behind (docs/design.md §7.3): re-created with our
//! selector, none of the Go field manager's values kept, its ReplicaSet orphaned (not deleted)
//! and adopted by the new Deployment.
use std::collections::BTreeMap;

use cftunnel_testenv::poll_until;
use cftunnel_types::names::ANNOTATION_CHECKSUM;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use kube::api::{ListParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

use super::harness::{Harness, POLL, TOKEN, WAIT, ready, ready_message};

const API_SECRET: &str = "cloudflare-api";
const GO_MANAGER: &str = "cloudflare-operator";
const GO_TUNNEL_ID: &str = "6ff42ae2-765d-4adf-8112-31c55c1551ef";

/// `spec` without the pod template's config checksum annotation.
fn without_checksum(
    mut spec: k8s_openapi::api::apps::v1::DeploymentSpec,
) -> k8s_openapi::api::apps::v1::DeploymentSpec {
    if let Some(meta) = spec.template.metadata.as_mut() {
        if let Some(annotations) = meta.annotations.as_mut() {
            annotations.remove(ANNOTATION_CHECKSUM);
        }
        if meta.annotations.as_ref().is_some_and(BTreeMap::is_empty) {
            meta.annotations = None;
        }
    }
    spec
}

/// Our fixed selector for the Tunnel `web`.
fn our_selector() -> BTreeMap<String, String> {
    BTreeMap::from([
        (
            "cfargotunnel.com/app".to_string(),
            "cloudflared".to_string(),
        ),
        (
            "cfargotunnel.com/is-cluster-tunnel".to_string(),
            "false".to_string(),
        ),
        ("cfargotunnel.com/tunnel".to_string(), "web".to_string()),
    ])
}

/// The Go operator's selector: ours plus the spec-dependent id, name and domain.
fn go_selector() -> BTreeMap<String, String> {
    let mut labels = our_selector();
    labels.insert("cfargotunnel.com/id".into(), GO_TUNNEL_ID.into());
    labels.insert("cfargotunnel.com/name".into(), "web-tunnel".into());
    labels.insert("cfargotunnel.com/domain".into(), "example.com".into());
    labels
}

/// A Deployment in the Go operator's shape; `owner_uid` makes it controlled by the Tunnel.
fn go_deployment(selector: &BTreeMap<String, String>, owner_uid: Option<&str>) -> Deployment {
    go_deployment_of("Tunnel", "web", selector, owner_uid)
}

/// A Deployment in the Go operator's shape, named after its `kind` object `name` as the Go
/// operator names it; `owner_uid` makes it controlled by that object.
pub(super) fn go_deployment_of(
    kind: &str,
    name: &str,
    selector: &BTreeMap<String, String>,
    owner_uid: Option<&str>,
) -> Deployment {
    let owners: Vec<Value> = owner_uid
        .map(|uid| {
            vec![json!({
                "apiVersion": "networking.cfargotunnel.com/v1alpha2",
                "kind": kind,
                "name": name,
                "uid": uid,
                "controller": true,
                "blockOwnerDeletion": true,
            })]
        })
        .unwrap_or_default();
    serde_json::from_value(json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": selector, "ownerReferences": owners},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": {"labels": selector},
                "spec": {
                    "securityContext": {"runAsNonRoot": true},
                    "containers": [{
                        "name": "cloudflared",
                        "image": "cloudflare/cloudflared:2022.12.1",
                        "args": ["tunnel", "--config", "/etc/cloudflared/config/config.yaml", "run"],
                        "livenessProbe": {
                            "httpGet": {"path": "/ready", "port": 2000},
                            "failureThreshold": 1,
                            "initialDelaySeconds": 10,
                            "periodSeconds": 10,
                        },
                        "securityContext": {
                            "allowPrivilegeEscalation": false,
                            "readOnlyRootFilesystem": true,
                            "runAsUser": 1002,
                        },
                    }],
                },
            },
        },
    }))
    .expect("go deployment json")
}

/// Creates the Go-shaped Deployment as the Go operator's field manager; waits for its
/// ReplicaSet and pod; returns (deployment uid, ReplicaSet name, ReplicaSet uid, pod uid).
pub(super) async fn plant(
    h: &Harness,
    deployment: &Deployment,
) -> (String, String, String, String) {
    let deployments: Api<Deployment> = Api::namespaced(h.admin.clone(), &h.ns);
    let created = deployments
        .create(
            &PostParams {
                field_manager: Some(GO_MANAGER.into()),
                ..PostParams::default()
            },
            deployment,
        )
        .await
        .expect("create go deployment");
    let uid = created.uid().expect("uid");
    let replica_sets: Api<ReplicaSet> = Api::namespaced(h.admin.clone(), &h.ns);
    let rs = poll_until("the Go ReplicaSet", WAIT, POLL, || async {
        replica_sets
            .list(&ListParams::default())
            .await
            .ok()?
            .items
            .into_iter()
            .find(|rs| controller_uid(rs.owner_references()) == Some(uid.clone()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let rs_uid = rs.uid().expect("rs uid");
    let pods: Api<Pod> = Api::namespaced(h.admin.clone(), &h.ns);
    let pod = poll_until("the Go pod", WAIT, POLL, || async {
        pods.list(&ListParams::default())
            .await
            .ok()?
            .items
            .into_iter()
            .find(|p| controller_uid(p.owner_references()) == Some(rs_uid.clone()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    (uid, rs.name_any(), rs_uid, pod.uid().expect("pod uid"))
}

pub(super) fn controller_uid(
    owners: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference],
) -> Option<String> {
    owners
        .iter()
        .find(|o| o.controller == Some(true))
        .map(|o| o.uid.clone())
}

/// A Tunnel `web` created while the operator is stopped; returns its uid.
async fn stopped_with_tunnel(prefix: &str) -> (Harness, String) {
    let mut h = Harness::start(prefix).await;
    h.stop_operator();
    h.create_api_secret(API_SECRET, &[("CLOUDFLARE_API_TOKEN", TOKEN)])
        .await;
    let tunnel = h
        .create_tunnel(
            "web",
            h.spec(API_SECRET, json!({"newTunnel": {"name": "web-tunnel"}})),
        )
        .await;
    let uid = tunnel.uid().expect("tunnel uid");
    (h, uid)
}

/// Starts the operator and checks everything a takeover promises; returns the event note.
async fn assert_taken_over(h: &mut Harness, old: (String, String, String, String)) -> String {
    let (old_uid, rs_name, rs_uid, pod_uid) = old;
    h.start_operator();
    let deployments: Api<Deployment> = Api::namespaced(h.admin.clone(), &h.ns);
    let fresh = poll_until("the re-created Deployment", WAIT, POLL, || async {
        let d = deployments.get_opt("web").await.ok().flatten()?;
        (d.uid().as_deref() != Some(old_uid.as_str())).then_some(d)
    })
    .await;
    let fresh = match fresh {
        Ok(d) => d,
        Err(e) => {
            let tunnel = h.tunnels().get_opt("web").await.ok().flatten();
            let live = deployments.get_opt("web").await.ok().flatten();
            panic!(
                "{e}; tunnel status {:?}; deployment metadata {:?}",
                tunnel.and_then(|t| t.status),
                live.map(|d| d.metadata)
            );
        }
    };
    // Orphaned, not deleted in cascade: the old ReplicaSet and its pod are still there.
    let replica_sets: Api<ReplicaSet> = Api::namespaced(h.admin.clone(), &h.ns);
    let rs = replica_sets
        .get(&rs_name)
        .await
        .expect("old ReplicaSet kept");
    assert_eq!(rs.uid().as_deref(), Some(rs_uid.as_str()));
    assert!(rs.metadata.deletion_timestamp.is_none());
    let pods: Api<Pod> = Api::namespaced(h.admin.clone(), &h.ns);
    let live_pods = pods.list(&ListParams::default()).await.expect("pods");
    assert!(
        live_pods
            .items
            .iter()
            .any(|p| p.uid().as_deref() == Some(pod_uid.as_str())
                && p.metadata.deletion_timestamp.is_none()),
        "the old pod keeps running"
    );

    let tunnel = h.wait_reason(&h.tunnels(), "web", "Ready").await;
    let tunnel_uid = tunnel.uid().expect("uid");
    let d = deployments.get("web").await.expect("deployment");
    assert_eq!(d.uid(), fresh.uid(), "re-created exactly once");
    assert_eq!(controller_uid(d.owner_references()), Some(tunnel_uid));
    assert_eq!(d.spec.selector.match_labels, Some(our_selector()));
    let managers: Vec<String> = d
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter_map(|m| m.manager.clone())
        .collect();
    assert!(!managers.iter().any(|m| m == GO_MANAGER), "{managers:?}");
    assert!(managers.iter().any(|m| m == "cftunnel"), "{managers:?}");
    let pod_spec = d.spec.template.spec.clone().expect("pod spec");
    assert_ne!(
        pod_spec.security_context.and_then(|s| s.run_as_user),
        Some(1002)
    );
    assert_eq!(pod_spec.containers.len(), 1);
    let container = &pod_spec.containers[0];
    assert_eq!(container.name, "cloudflared");
    assert_ne!(
        container
            .security_context
            .clone()
            .and_then(|s| s.run_as_user),
        Some(1002),
        "stale runAsUser"
    );
    assert_ne!(
        container
            .liveness_probe
            .clone()
            .and_then(|p| p.failure_threshold),
        Some(1),
        "stale liveness failureThreshold"
    );
    assert_ne!(
        container.image.as_deref(),
        Some("cloudflare/cloudflared:2022.12.1")
    );

    // The new Deployment adopts the orphaned ReplicaSet (its labels include our selector).
    let new_uid = d.uid().expect("uid");
    poll_until("old ReplicaSet adopted", WAIT, POLL, || async {
        let rs = replica_sets.get_opt(&rs_name).await.ok().flatten()?;
        (rs.uid().as_deref() == Some(rs_uid.as_str())
            && controller_uid(rs.owner_references()) == Some(new_uid.clone()))
        .then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));

    let events: Api<Event> = Api::namespaced(h.admin.clone(), &h.ns);
    let notes: Vec<String> = events
        .list(&ListParams::default())
        .await
        .expect("events")
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.kind.as_deref()) == Some("Tunnel"))
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("web"))
        .filter(|e| e.reason.as_deref() == Some("TookOverDeployment"))
        .filter_map(|e| e.note)
        .collect();
    assert_eq!(notes.len(), 1, "{notes:?}");
    notes[0].clone()
}

#[tokio::test]
async fn a_go_deployment_with_its_own_selector_is_recreated_keeping_its_pods() {
    let (mut h, uid) = stopped_with_tunnel("tr-takeover").await;
    let old = plant(&h, &go_deployment(&go_selector(), Some(&uid))).await;
    let note = assert_taken_over(&mut h, old).await;
    assert!(
        note.contains(&format!("Deployment {}/web: its immutable selector", h.ns)),
        "{note}"
    );
    assert!(note.contains("cfargotunnel.com/id=6ff42ae2"), "{note}");
    assert!(note.contains("propagationPolicy=Orphan"), "{note}");
    let t = h.wait_reason(&h.tunnels(), "web", "Ready").await;
    assert_eq!(
        ready(t.status.as_ref()).map(|c| c.status.as_str()),
        Some("True")
    );
}

#[tokio::test]
async fn a_go_deployment_with_our_selector_keeps_none_of_the_go_fields() {
    let (mut h, uid) = stopped_with_tunnel("tr-takeover-same").await;
    let old = plant(&h, &go_deployment(&our_selector(), Some(&uid))).await;
    let note = assert_taken_over(&mut h, old).await;
    assert!(
        note.contains("fields were owned by the cloudflare-operator manager"),
        "{note}"
    );
}

#[tokio::test]
async fn a_go_shaped_deployment_not_controlled_by_the_tunnel_is_a_name_conflict() {
    let (mut h, _) = stopped_with_tunnel("tr-takeover-foreign").await;
    let (old_uid, ..) = plant(&h, &go_deployment(&go_selector(), None)).await;
    let deployments: Api<Deployment> = Api::namespaced(h.admin.clone(), &h.ns);
    let planted = deployments.get("web").await.expect("planted deployment");
    h.start_operator();
    let t = h.wait_reason(&h.tunnels(), "web", "NameConflict").await;
    let message = ready_message(t.status.as_ref());
    assert!(
        message.contains(&format!(
            "Deployment {}/web already exists and is not controlled by Tunnel {}/web",
            h.ns, h.ns
        )),
        "{message}"
    );
    let d = deployments.get("web").await.expect("deployment kept");
    assert_eq!(d.uid(), Some(old_uid));
    assert_eq!(d.spec.selector.match_labels, Some(go_selector()));
    // Not taken over: its spec is the planted one. The only addition allowed is the config
    // checksum the checksum watcher keeps on every cloudflared workload no Tunnel controls.
    assert_eq!(without_checksum(d.spec), planted.spec);
    assert!(
        !h.event_reasons("web")
            .await
            .contains(&"TookOverDeployment".to_string())
    );
}
