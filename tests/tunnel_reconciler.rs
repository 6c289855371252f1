//! The Tunnel / ClusterTunnel reconciler against a real API server with KCM and the simulated
//! Cloudflare, the operator running with the shipped RBAC as its own ServiceAccount user.
#[path = "tunnel_reconciler/access_conflict.rs"]
mod access_conflict;
#[path = "tunnel_reconciler/access_invariant.rs"]
mod access_invariant;
#[path = "tunnel_reconciler/access_policy.rs"]
mod access_policy;
#[path = "tunnel_reconciler/access_rbac.rs"]
mod access_rbac;
#[path = "tunnel_reconciler/access_retire.rs"]
mod access_retire;
#[path = "tunnel_reconciler/access_tunnel.rs"]
mod access_tunnel;
#[path = "tunnel_reconciler/api_secret.rs"]
mod api_secret;
#[path = "tunnel_reconciler/binding_deletion.rs"]
mod binding_deletion;
#[path = "tunnel_reconciler/budget.rs"]
mod budget;
#[path = "tunnel_reconciler/cluster_takeover.rs"]
mod cluster_takeover;
#[path = "tunnel_reconciler/coalescing.rs"]
mod coalescing;
mod common;
#[path = "tunnel_reconciler/deletion.rs"]
mod deletion;
#[path = "tunnel_reconciler/dns_reads.rs"]
mod dns_reads;
#[path = "tunnel_reconciler/domain_change.rs"]
mod domain_change;
#[path = "tunnel_reconciler/drift_chaos.rs"]
mod drift_chaos;
#[path = "tunnel_reconciler/drift_walk.rs"]
mod drift_walk;
#[path = "tunnel_reconciler/edge.rs"]
mod edge;
#[path = "tunnel_reconciler/harness.rs"]
mod harness;
#[path = "tunnel_reconciler/ingress.rs"]
mod ingress;
mod install_support;
#[path = "tunnel_reconciler/legacy.rs"]
mod legacy;
#[path = "tunnel_reconciler/metrics.rs"]
mod metrics;
#[path = "tunnel_reconciler/ownership.rs"]
mod ownership;
#[path = "tunnel_reconciler/private_networks.rs"]
mod private_networks;
#[path = "leader_election/proxy.rs"]
mod proxy;
#[path = "tunnel_reconciler/quota.rs"]
mod quota;
#[path = "tunnel_reconciler/remote.rs"]
mod remote;
#[path = "tunnel_reconciler/remote_connector.rs"]
mod remote_connector;
#[path = "tunnel_reconciler/remote_faults.rs"]
mod remote_faults;
#[path = "tunnel_reconciler/remote_merge.rs"]
mod remote_merge;
#[path = "tunnel_reconciler/routes.rs"]
mod routes;
#[path = "tunnel_reconciler/shared.rs"]
mod shared;
#[path = "tunnel_reconciler/takeover.rs"]
mod takeover;
#[path = "tunnel_reconciler/updates.rs"]
mod updates;
#[path = "tunnel_reconciler/zones.rs"]
mod zones;

use std::collections::BTreeMap;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use cftunnel_cloudflare::ConfigSrc;
use cftunnel_sim::{Fault, Operation};
use cftunnel_testenv::poll_until;
use cftunnel_types::names::{
    ANNOTATION_ADOPT_TUNNEL_ID, ANNOTATION_CHECKSUM, FINALIZER, FINALIZER_SECRET_IN_USE,
};
use harness::{Harness, POLL, TOKEN, WAIT};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, Secret, ServiceAccount};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;

const API_SECRET: &str = "cloudflare-api";
/// ClusterTunnels are cluster-wide: the Secret guard of every harness would count one naming
/// `API_SECRET` as a user of its own `API_SECRET`.
const CLUSTER_API_SECRET: &str = "cloudflare-api-cluster";

fn controlled_by(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    uid: &str,
) -> bool {
    meta.owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && o.uid == uid)
}

/// resourceVersion and the `cftunnel` managedFields entry of every managed object.
async fn fingerprints(h: &Harness, name: &str) -> BTreeMap<String, String> {
    let client = h.admin.clone();
    let ns = h.ns.as_str();
    let mut out = BTreeMap::new();
    let entry = |meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
        let managed = meta
            .managed_fields
            .iter()
            .flatten()
            .filter(|m| m.manager.as_deref() == Some("cftunnel"))
            .map(|m| format!("{:?}{:?}", m.time, m.fields_v1))
            .collect::<Vec<_>>()
            .join("|");
        format!(
            "{:?}|{:?}|{managed}",
            meta.resource_version, meta.generation
        )
    };
    let sa = Api::<ServiceAccount>::namespaced(client.clone(), ns)
        .get(&format!("{name}-cloudflared"))
        .await
        .expect("sa");
    out.insert("sa".into(), entry(&sa.metadata));
    let secret = Api::<Secret>::namespaced(client.clone(), ns)
        .get(name)
        .await
        .expect("secret");
    out.insert("secret".into(), entry(&secret.metadata));
    let cm = Api::<ConfigMap>::namespaced(client.clone(), ns)
        .get(name)
        .await
        .expect("cm");
    out.insert("configmap".into(), entry(&cm.metadata));
    // Deployment and PDB status is written by KCM; their spec generation and our fields must not move.
    let d = Api::<Deployment>::namespaced(client.clone(), ns)
        .get(name)
        .await
        .expect("deploy");
    let mut meta = d.metadata.clone();
    meta.resource_version = None;
    out.insert("deployment".into(), entry(&meta));
    let pdb = Api::<PodDisruptionBudget>::namespaced(client, ns)
        .get(name)
        .await
        .expect("pdb");
    let mut meta = pdb.metadata.clone();
    meta.resource_version = None;
    out.insert("pdb".into(), entry(&meta));
    out
}

#[tokio::test]
async fn new_tunnel_creates_one_tunnel_its_objects_and_then_stays_quiet() {
    let mut h = Harness::start("tr-new").await;
    h.create_api_secret(API_SECRET, &[("CLOUDFLARE_API_TOKEN", TOKEN)])
        .await;
    h.create_tunnel(
        "web",
        h.spec(API_SECRET, json!({"newTunnel": {"name": "web-tunnel"}})),
    )
    .await;
    let tunnel = h.wait_reason(&h.tunnels(), "web", "Ready").await;

    let live = h.live_tunnels();
    assert_eq!(live.len(), 1, "exactly one tunnel on Cloudflare");
    assert_eq!(live[0].name, "web-tunnel");
    assert_eq!(live[0].config_src, "local");
    let status = tunnel.status.clone().expect("status");
    assert_eq!(status.tunnel_id.as_deref(), Some(live[0].id.as_str()));
    assert_eq!(status.tunnel_name.as_deref(), Some("web-tunnel"));
    assert_eq!(status.account_id, Some(h.sim.account_id()));
    assert_eq!(status.zone_id, h.sim.zone_id("example.com"));
    assert_eq!(status.zone_domain.as_deref(), Some("example.com"));
    assert_eq!(status.observed_generation, tunnel.metadata.generation);
    assert!(tunnel.finalizers().contains(&FINALIZER.to_string()));
    assert_eq!(
        tunnel.labels().get("cfargotunnel.com/id"),
        Some(&live[0].id)
    );
    assert_eq!(
        tunnel
            .labels()
            .get("cfargotunnel.com/is-cluster-tunnel")
            .map(String::as_str),
        Some("false")
    );

    let uid = tunnel.uid().expect("uid");
    let secret = h.secrets().get("web").await.expect("managed secret");
    assert!(controlled_by(&secret.metadata, &uid));
    let creds: serde_json::Value = serde_json::from_slice(
        &secret
            .data
            .as_ref()
            .and_then(|d| d.get("credentials.json"))
            .expect("credentials.json")
            .0,
    )
    .expect("json");
    assert_eq!(creds["TunnelID"], json!(live[0].id));
    let stored = STANDARD
        .decode(creds["TunnelSecret"].as_str().expect("secret"))
        .expect("b64");
    assert_eq!(
        STANDARD.decode(&live[0].tunnel_secret).expect("sim b64"),
        stored
    );
    assert!(
        !secret
            .data
            .as_ref()
            .is_some_and(|d| d.contains_key("tunnelSecret"))
    );
    let cm = Api::<ConfigMap>::namespaced(h.admin.clone(), &h.ns)
        .get("web")
        .await
        .expect("cm");
    assert!(controlled_by(&cm.metadata, &uid));
    assert!(cm.data.expect("data")["config.yaml"].contains(&live[0].id));
    let d = Api::<Deployment>::namespaced(h.admin.clone(), &h.ns)
        .get("web")
        .await
        .expect("deploy");
    assert!(controlled_by(&d.metadata, &uid));
    assert_eq!(d.spec.replicas, Some(2));
    let strategy = d
        .spec
        .strategy
        .clone()
        .and_then(|s| s.rolling_update)
        .expect("rolling");
    assert_eq!(
        strategy.max_unavailable,
        Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(0))
    );
    let annotations = d
        .spec
        .template
        .metadata
        .clone()
        .and_then(|m| m.annotations)
        .unwrap_or_default();
    assert_eq!(
        annotations.get(ANNOTATION_CHECKSUM).map(|c| c.len()),
        Some(64)
    );
    // Every label the Go operator put on its Deployment and pods, with its values, so
    // selectors written for the Go operator's pods keep matching.
    let go_labels = BTreeMap::from([
        ("cfargotunnel.com/tunnel".to_string(), "web".to_string()),
        (
            "cfargotunnel.com/app".to_string(),
            "cloudflared".to_string(),
        ),
        ("cfargotunnel.com/id".to_string(), live[0].id.clone()),
        (
            "cfargotunnel.com/name".to_string(),
            "web-tunnel".to_string(),
        ),
        (
            "cfargotunnel.com/domain".to_string(),
            "example.com".to_string(),
        ),
        (
            "cfargotunnel.com/is-cluster-tunnel".to_string(),
            "false".to_string(),
        ),
    ]);
    let template_labels = d
        .spec
        .template
        .metadata
        .clone()
        .and_then(|m| m.labels)
        .unwrap_or_default();
    for (key, value) in &go_labels {
        assert_eq!(d.labels().get(key), Some(value), "Deployment label {key}");
        assert_eq!(
            template_labels.get(key),
            Some(value),
            "pod template label {key}"
        );
    }
    let go_selector = go_labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",");
    let pods: Api<Pod> = Api::namespaced(h.admin.clone(), &h.ns);
    poll_until(
        "the pods match the Go operator's labels",
        WAIT,
        POLL,
        || async {
            let found = pods
                .list(&ListParams::default().labels(&go_selector))
                .await
                .ok()?
                .items
                .len();
            (found == 2).then_some(())
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let pdb = Api::<PodDisruptionBudget>::namespaced(h.admin.clone(), &h.ns)
        .get("web")
        .await
        .expect("pdb");
    assert!(controlled_by(&pdb.metadata, &uid));
    let api_secret = h.secrets().get(API_SECRET).await.expect("api secret");
    assert!(
        api_secret
            .finalizers()
            .contains(&FINALIZER_SECRET_IN_USE.to_string())
    );
    // The Ready Event is published after the status write that showed Ready.
    h.wait_event("web", "Ready").await;
    let reasons = h.event_reasons("web").await;
    assert!(
        reasons.contains(&"TunnelCreated".to_string()),
        "{reasons:?}"
    );
    assert!(reasons.contains(&"Ready".to_string()), "{reasons:?}");

    // Steady state: a restarted operator and an edited annotation cost nothing.
    let before = fingerprints(&h, "web").await;
    h.sim.reset_counters();
    h.stop_operator();
    h.start_operator();
    h.tunnels()
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"touched": "1"}}})),
        )
        .await
        .expect("touch");
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(h.sim.total_calls(), 0, "{:?}", h.sim.request_log());
    assert_eq!(fingerprints(&h, "web").await, before);
    let after = h.tunnels().get("web").await.expect("tunnel");
    assert_eq!(
        harness::ready(after.status.as_ref()).map(|c| c.last_transition_time.clone()),
        harness::ready(tunnel.status.as_ref()).map(|c| c.last_transition_time.clone())
    );
}

#[tokio::test]
async fn cluster_tunnel_objects_live_in_the_cluster_resource_namespace() {
    let h = Harness::start("tr-cluster").await;
    h.create_api_secret(CLUSTER_API_SECRET, &[("CLOUDFLARE_API_TOKEN", TOKEN)])
        .await;
    let name = format!("ct-{}", h.ns);
    h.create_cluster_tunnel(
        &name,
        h.spec(CLUSTER_API_SECRET, json!({"newTunnel": {"name": name}})),
    )
    .await;
    let ct = h.wait_reason(&h.cluster_tunnels(), &name, "Ready").await;
    assert_eq!(h.live_tunnels().len(), 1);
    assert_eq!(
        ct.labels()
            .get("cfargotunnel.com/is-cluster-tunnel")
            .map(String::as_str),
        Some("true")
    );
    let child = format!("clustertunnel-{name}");
    let d = Api::<Deployment>::namespaced(h.admin.clone(), &h.ns)
        .get(&child)
        .await
        .expect("deploy");
    assert!(controlled_by(&d.metadata, &ct.uid().expect("uid")));
    assert_eq!(
        d.labels()
            .get("cfargotunnel.com/is-cluster-tunnel")
            .map(String::as_str),
        Some("true")
    );
    let secret = h.secrets().get(&child).await.expect("secret");
    assert!(secret.data.expect("data").contains_key("credentials.json"));
    h.cluster_tunnels()
        .delete(&name, &DeleteParams::default())
        .await
        .expect("delete");
    h.wait_gone(&h.cluster_tunnels(), &name).await;
    assert_eq!(h.live_tunnels().len(), 0);
}

#[tokio::test]
async fn a_user_secret_with_the_tunnel_name_is_never_touched() {
    let h = Harness::start("tr-conflict").await;
    h.create_api_secret(API_SECRET, &[("CLOUDFLARE_API_TOKEN", TOKEN)])
        .await;
    h.create_api_secret("web", &[("mine", "do-not-touch")])
        .await;
    let before = h.secrets().get("web").await.expect("user secret");
    h.create_tunnel(
        "web",
        h.spec(API_SECRET, json!({"newTunnel": {"name": "web"}})),
    )
    .await;
    let t = h.wait_reason(&h.tunnels(), "web", "NameConflict").await;
    let message = harness::ready_message(t.status.as_ref());
    assert!(
        message.contains(&format!(
            "Secret {}/web already exists and is not controlled by Tunnel {}/web",
            h.ns, h.ns
        )),
        "{message}"
    );
    let after = h.secrets().get("web").await.expect("user secret");
    assert_eq!(
        after.metadata.resource_version,
        before.metadata.resource_version
    );
    assert_eq!(after.data, before.data);
    assert!(
        h.sim.tunnels().is_empty(),
        "no tunnel created while blocked"
    );
}

/// The Service `app` routed to `tunnel` at `app.example.com`.
async fn expose_app(h: &Harness, tunnel: &str) {
    let labels = json!({"cfargotunnel.com/expose-tunnel": tunnel});
    let annotations = json!({"cfargotunnel.com/hostname": "app.example.com"});
    routes::create_service(h, "app", 80, labels, annotations).await;
}

/// A Tunnel `name` running the existing tunnel `id`.
async fn run_existing(h: &Harness, name: &str, id: &str) {
    let spec = h.spec(API_SECRET, json!({"existingTunnel": {"id": id}}));
    h.create_tunnel(name, spec).await;
}

/// One Cloudflare tunnel is run by one object: two existingTunnels naming the same tunnel (by
/// id and by name) used to run two cloudflared configs for it; now the older one runs it and
/// the other waits with `TunnelIdConflict` until it is deleted.
#[tokio::test]
async fn existing_tunnels_by_id_and_name_are_run_one_at_a_time_never_deleted_and_remote_ones_refused()
 {
    let h = Harness::start("tr-existing").await;
    let secret = [9u8; 32];
    let id = h.precreate_with_credential_file(API_SECRET, secret).await;
    // A route of the object that waits: no DNS record may point at the tunnel for it.
    expose_app(&h, "by-name").await;
    run_existing(&h, "by-id", &id).await;
    h.create_tunnel(
        "by-name",
        h.spec(API_SECRET, json!({"existingTunnel": {"name": "pre"}})),
    )
    .await;
    let check_running = |t: &cftunnel_types::Tunnel| {
        assert_eq!(
            t.status.as_ref().and_then(|s| s.tunnel_id.clone()),
            Some(id.clone())
        );
        // Held so that its DNS records are removed on deletion; the tunnel itself stays.
        assert!(t.finalizers().contains(&FINALIZER.to_string()));
    };
    let first = h.wait_reason(&h.tunnels(), "by-id", "Ready").await;
    check_running(&first);
    let waiting = h
        .wait_reason(&h.tunnels(), "by-name", "TunnelIdConflict")
        .await;
    let message = harness::ready_message(waiting.status.as_ref());
    assert!(
        message.contains(&format!("Tunnel {}/by-id", h.ns)) && message.contains(&id),
        "{message}"
    );
    assert!(
        message.contains("point spec.existingTunnel at another tunnel"),
        "{message}"
    );
    assert_eq!(
        waiting.status.as_ref().and_then(|s| s.tunnel_id.clone()),
        None
    );
    let deployments: Api<Deployment> = Api::namespaced(h.admin.clone(), &h.ns);
    assert!(deployments.get_opt("by-id").await.expect("get").is_some());
    assert!(
        deployments.get_opt("by-name").await.expect("get").is_none(),
        "no cloudflared for the object that waits"
    );
    assert!(routes::records(&h, "app.example.com").is_empty());
    let managed = h.secrets().get("by-id").await.expect("managed secret");
    let creds: serde_json::Value =
        serde_json::from_slice(&managed.data.expect("data")["credentials.json"].0).expect("json");
    assert_eq!(creds["TunnelSecret"], json!(STANDARD.encode(secret)));

    // The one running it goes: the other takes over, with its DNS record.
    h.tunnels()
        .delete("by-id", &DeleteParams::default())
        .await
        .expect("delete");
    h.wait_gone(&h.tunnels(), "by-id").await;
    let next = h.wait_reason(&h.tunnels(), "by-name", "Ready").await;
    check_running(&next);
    assert!(deployments.get_opt("by-name").await.expect("get").is_some());
    routes::wait_records(&h, "app.example.com", 1).await;

    let remote = h
        .precreate_tunnel("remote", &[3u8; 32], ConfigSrc::Cloudflare)
        .await;
    h.create_tunnel(
        "remote",
        h.spec(API_SECRET, json!({"existingTunnel": {"id": remote}})),
    )
    .await;
    h.wait_reason(&h.tunnels(), "remote", "RemotelyManagedTunnel")
        .await;
    for name in ["by-name", "remote"] {
        h.tunnels()
            .delete(name, &DeleteParams::default())
            .await
            .expect("delete");
        h.wait_gone(&h.tunnels(), name).await;
    }
    assert!(routes::records(&h, "app.example.com").is_empty());
    assert_eq!(
        h.live_tunnels().len(),
        2,
        "existing tunnels stay on Cloudflare"
    );
    assert_eq!(h.sim.calls(Operation::DeleteTunnel), 0);
}

#[tokio::test]
async fn deletion_waits_for_the_pods_then_deletes_the_tunnel_and_releases_everything() {
    let h = Harness::start("tr-delete").await;
    h.create_api_secret(API_SECRET, &[("CLOUDFLARE_API_TOKEN", TOKEN)])
        .await;
    h.create_tunnel(
        "web",
        h.spec(API_SECRET, json!({"newTunnel": {"name": "web"}})),
    )
    .await;
    let t = h.wait_reason(&h.tunnels(), "web", "Ready").await;
    let id = t.status.and_then(|s| s.tunnel_id).expect("id");
    let pods: Api<Pod> = Api::namespaced(h.admin.clone(), &h.ns);
    let selector = "cfargotunnel.com/tunnel=web";
    poll_until("2 cloudflared pods", WAIT, POLL, || async {
        (pods
            .list(&ListParams::default().labels(selector))
            .await
            .ok()?
            .items
            .len()
            == 2)
            .then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    h.tunnels()
        .delete("web", &DeleteParams::default())
        .await
        .expect("delete");
    poll_until(
        "tunnel object gone",
        WAIT,
        Duration::from_millis(50),
        || async {
            let deleted = h
                .sim
                .tunnels()
                .iter()
                .any(|t| t.id == id && t.deleted_at.is_some());
            let pod_count = pods
                .list(&ListParams::default().labels(selector))
                .await
                .ok()?
                .items
                .len();
            assert!(
                !(deleted && pod_count > 0),
                "the tunnel was deleted while {pod_count} pods remained"
            );
            let gone = matches!(h.tunnels().get_opt("web").await, Ok(None));
            (gone && deleted).then_some(())
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(h.live_tunnels().len(), 0);
    // Released right after the tunnel's finalizer: the object may be gone a moment before.
    poll_until("API Secret guard released", WAIT, POLL, || async {
        let api_secret = h.secrets().get(API_SECRET).await.ok()?;
        (!api_secret
            .finalizers()
            .contains(&FINALIZER_SECRET_IN_USE.to_string()))
        .then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
}

#[tokio::test]
async fn deleting_the_namespace_leaves_no_tunnel_and_nothing_stuck() {
    let h = Harness::start("tr-nsdel").await;
    h.create_api_secret(API_SECRET, &[("CLOUDFLARE_API_TOKEN", TOKEN)])
        .await;
    h.create_tunnel("a", h.spec(API_SECRET, json!({"newTunnel": {"name": "a"}})))
        .await;
    h.create_tunnel("b", h.spec(API_SECRET, json!({"newTunnel": {"name": "b"}})))
        .await;
    h.wait_reason(&h.tunnels(), "a", "Ready").await;
    h.wait_reason(&h.tunnels(), "b", "Ready").await;
    assert_eq!(h.live_tunnels().len(), 2);
    let namespaces: Api<Namespace> = Api::all(h.admin.clone());
    namespaces
        .delete(&h.ns, &DeleteParams::default())
        .await
        .expect("delete ns");
    h.wait_gone(&namespaces, &h.ns).await;
    assert_eq!(
        h.live_tunnels().len(),
        0,
        "every tunnel deleted on Cloudflare"
    );
}

#[tokio::test]
async fn a_lost_create_answer_leaves_exactly_one_tunnel_the_one_in_status() {
    let h = Harness::start("tr-crash").await;
    h.sim
        .inject(Operation::CreateTunnel, Fault::fail_after_apply(1, 500));
    h.create_api_secret(API_SECRET, &[("CLOUDFLARE_API_TOKEN", TOKEN)])
        .await;
    h.create_tunnel(
        "web",
        h.spec(API_SECRET, json!({"newTunnel": {"name": "web"}})),
    )
    .await;
    let t = h.wait_reason(&h.tunnels(), "web", "Ready").await;
    let lost = h
        .sim
        .request_log()
        .iter()
        .any(|r| r.operation == Some(Operation::CreateTunnel) && r.status == 500);
    assert!(lost, "the create answer was lost once");
    let live = h.live_tunnels();
    assert_eq!(live.len(), 1);
    assert_eq!(h.sim.tunnels().len(), 1);
    assert_eq!(t.status.and_then(|s| s.tunnel_id), Some(live[0].id.clone()));
}

#[tokio::test]
async fn a_same_named_foreign_tunnel_is_a_conflict_until_adopted_explicitly() {
    let h = Harness::start("tr-adopt").await;
    h.create_api_secret(API_SECRET, &[("CLOUDFLARE_API_TOKEN", TOKEN)])
        .await;
    let id = h
        .precreate_tunnel("shared", &[5u8; 32], ConfigSrc::Local)
        .await;
    h.create_tunnel(
        "web",
        h.spec(API_SECRET, json!({"newTunnel": {"name": "shared"}})),
    )
    .await;
    let t = h
        .wait_reason(&h.tunnels(), "web", "TunnelNameConflict")
        .await;
    let message = harness::ready_message(t.status.as_ref());
    assert!(
        message.contains(&format!("{ANNOTATION_ADOPT_TUNNEL_ID}: {id}")),
        "{message}"
    );
    // The Event is published after the status write that `wait_reason` saw.
    h.wait_event("web", "TunnelNameConflict").await;
    h.tunnels()
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {ANNOTATION_ADOPT_TUNNEL_ID: id}}})),
        )
        .await
        .expect("annotate");
    let t = h.wait_reason(&h.tunnels(), "web", "Ready").await;
    assert_eq!(t.status.and_then(|s| s.tunnel_id), Some(id.clone()));
    assert_eq!(h.sim.tunnels().len(), 1, "adopted, not duplicated");
    let managed = h.secrets().get("web").await.expect("managed");
    let creds: serde_json::Value =
        serde_json::from_slice(&managed.data.expect("data")["credentials.json"].0).expect("json");
    assert_eq!(creds["TunnelSecret"], json!(STANDARD.encode([5u8; 32])));
    // Owned from then on: deleting the object deletes the tunnel.
    h.tunnels()
        .delete("web", &DeleteParams::default())
        .await
        .expect("delete");
    h.wait_gone(&h.tunnels(), "web").await;
    assert_eq!(h.live_tunnels().len(), 0);
}

#[tokio::test]
async fn a_missing_api_secret_is_reported_without_a_hot_loop_and_recovers() {
    let h = Harness::start("tr-nosecret").await;
    h.create_tunnel(
        "web",
        h.spec(API_SECRET, json!({"newTunnel": {"name": "web"}})),
    )
    .await;
    let t = h.wait_reason(&h.tunnels(), "web", "SecretNotFound").await;
    let message = harness::ready_message(t.status.as_ref());
    assert_eq!(
        message,
        format!(
            "Secret {}/{API_SECRET} named by spec.cloudflare.secret does not exist",
            h.ns
        )
    );
    h.wait_event("web", "SecretNotFound").await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(h.sim.total_calls(), 0);
    let again = h.tunnels().get("web").await.expect("tunnel");
    assert_eq!(
        again.metadata.resource_version, t.metadata.resource_version,
        "no status churn while blocked"
    );
    h.create_api_secret(API_SECRET, &[("CLOUDFLARE_API_TOKEN", TOKEN)])
        .await;
    h.wait_reason(&h.tunnels(), "web", "Ready").await;
    assert_eq!(h.live_tunnels().len(), 1);
}

#[tokio::test]
async fn a_rejected_token_is_reported_with_bounded_cloudflare_calls() {
    let h = Harness::start("tr-badtoken").await;
    h.create_api_secret(API_SECRET, &[("CLOUDFLARE_API_TOKEN", "wrong-token")])
        .await;
    h.create_tunnel(
        "web",
        h.spec(API_SECRET, json!({"newTunnel": {"name": "web"}})),
    )
    .await;
    h.wait_reason(&h.tunnels(), "web", "CloudflareAuthFailed")
        .await;
    tokio::time::sleep(Duration::from_secs(10)).await;
    let calls = h.sim.total_calls();
    // Backoff 0.5 s doubling to 5 s: about 6 attempts in ten seconds, never hundreds.
    assert!(
        calls <= 20,
        "{calls} Cloudflare calls while the token is rejected"
    );
    assert!(h.sim.tunnels().is_empty());
}

/// An object already running a tunnel that a newTunnel then adopts (the newTunnel, owning the
/// tunnel, comes first): it stops, its cloudflared is scaled to zero and its records go.
#[tokio::test]
async fn an_object_whose_tunnel_another_takes_over_stops_and_removes_its_records() {
    let h = Harness::start("tr-id-taken").await;
    let id = h
        .precreate_with_credential_file(API_SECRET, [6u8; 32])
        .await;
    expose_app(&h, "first").await;
    run_existing(&h, "first", &id).await;
    h.wait_reason(&h.tunnels(), "first", "Ready").await;
    routes::wait_records(&h, "app.example.com", 1).await;
    let deployments: Api<Deployment> = Api::namespaced(h.admin.clone(), &h.ns);
    let owner: cftunnel_types::Tunnel = serde_json::from_value(json!({
        "apiVersion": "networking.cfargotunnel.com/v1alpha2",
        "kind": "Tunnel",
        "metadata": {
            "name": "owner",
            "labels": {"cftunnel-test/run": h.ns},
            "annotations": {cftunnel_types::names::ANNOTATION_ADOPT_TUNNEL_ID: id},
        },
        "spec": h.spec(API_SECRET, json!({"newTunnel": {"name": "pre"}})),
    }))
    .expect("tunnel json");
    h.tunnels()
        .create(&kube::api::PostParams::default(), &owner)
        .await
        .expect("create owner");
    let adopted = h.wait_reason(&h.tunnels(), "owner", "Ready").await;
    assert_eq!(adopted.status.and_then(|s| s.tunnel_id), Some(id.clone()));
    let stopped = h
        .wait_reason(&h.tunnels(), "first", "TunnelIdConflict")
        .await;
    let message = harness::ready_message(stopped.status.as_ref());
    assert!(
        message.contains(&format!("Tunnel {}/owner", h.ns)),
        "{message}"
    );
    poll_until("first scaled to zero", WAIT, POLL, || async {
        let d = deployments.get("first").await.ok()?;
        (d.spec.replicas == Some(0)).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    routes::wait_records(&h, "app.example.com", 0).await;
    routes::wait_records(&h, "_managed.app.example.com", 0).await;
    assert_eq!(h.live_tunnels().len(), 1);
}
