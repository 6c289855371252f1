//! Drift (a tunnel deleted on Cloudflare behind cftunnel's back), quiet resyncs of many tunnels
//! and convergence under injected Cloudflare failures.
use std::collections::BTreeSet;
use std::time::Duration;

use cftunnel_cloudflare::ConfigSrc;
use cftunnel_sim::{Fault, Operation};
use cftunnel_testenv::poll_until;
use cftunnel_types::Tunnel;
use cftunnel_types::names::ANNOTATION_CHECKSUM;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{DeleteParams, ListParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use super::harness::{Harness, POLL, TOKEN, WAIT, ready};

const API_SECRET: &str = "cloudflare-api";
const MANY: usize = 20;

fn checksum(deployment: &Deployment) -> Option<String> {
    deployment
        .spec
        .template
        .metadata
        .as_ref()?
        .annotations
        .as_ref()?
        .get(ANNOTATION_CHECKSUM)
        .cloned()
}

fn config_yaml(cm: &ConfigMap) -> String {
    cm.data
        .as_ref()
        .and_then(|d| d.get("config.yaml"))
        .cloned()
        .unwrap_or_default()
}

/// credentials.json of the managed Secret `web`.
async fn credentials(h: &Harness) -> serde_json::Value {
    let secret = h.secrets().get("web").await.expect("managed secret");
    let bytes = secret
        .data
        .as_ref()
        .and_then(|d| d.get("credentials.json"))
        .map(|b| b.0.clone())
        .unwrap_or_default();
    serde_json::from_slice(&bytes).expect("credentials json")
}

#[tokio::test]
async fn a_new_tunnel_deleted_on_cloudflare_is_recreated_and_its_old_id_kept() {
    let h = Harness::start_with("tr-drift", |o| o.drift_interval = Duration::from_secs(2)).await;
    h.create_api_secret(API_SECRET, &[("CLOUDFLARE_API_TOKEN", TOKEN)])
        .await;
    h.create_tunnel(
        "web",
        h.spec(API_SECRET, json!({"newTunnel": {"name": "web-tunnel"}})),
    )
    .await;
    let tunnel = h.wait_reason(&h.tunnels(), "web", "Ready").await;
    let old_id = tunnel
        .status
        .as_ref()
        .and_then(|s| s.tunnel_id.clone())
        .expect("tunnel id");
    let deployments: Api<Deployment> = Api::namespaced(h.admin.clone(), &h.ns);
    let config_maps: Api<ConfigMap> = Api::namespaced(h.admin.clone(), &h.ns);
    let old_checksum = checksum(&deployments.get("web").await.expect("deployment"));
    assert!(config_yaml(&config_maps.get("web").await.expect("cm")).contains(&old_id));
    let old_creds = credentials(&h).await;
    assert_eq!(old_creds["TunnelID"], json!(old_id));

    // The first recreate attempt fails: the recorded old id must survive the failure report.
    h.sim
        .inject(Operation::CreateTunnel, Fault::fail_next(1, 400));
    assert!(h.sim.delete_tunnel_out_of_band(&old_id));

    let recreated = poll_until("tunnel recreated", WAIT, POLL, || async {
        let t = h.tunnels().get_opt("web").await.ok().flatten()?;
        let status = t.status.as_ref()?;
        let id = status.tunnel_id.clone()?;
        let is_ready = ready(Some(status))?.reason == "Ready";
        (id != old_id && is_ready && ready(Some(status))?.message.contains(&id)).then_some(t)
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let status = recreated.status.clone().expect("status");
    let new_id = status.tunnel_id.clone().expect("new id");
    assert_eq!(status.previous_tunnel_ids, Some(vec![old_id.clone()]));
    let live = h.live_tunnels();
    assert_eq!(live.len(), 1, "exactly one live tunnel");
    assert_eq!(live[0].id, new_id);
    assert_eq!(live[0].name, "web-tunnel");
    assert_eq!(recreated.labels().get("cfargotunnel.com/id"), Some(&new_id));

    // The workload follows: new config and credentials, so the pods roll.
    let cm = poll_until("config map follows", WAIT, POLL, || async {
        let cm = config_maps.get_opt("web").await.ok().flatten()?;
        config_yaml(&cm).contains(&new_id).then_some(cm)
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(!config_yaml(&cm).contains(&old_id));
    let new_checksum = checksum(&deployments.get("web").await.expect("deployment"));
    assert!(new_checksum.is_some());
    assert_ne!(new_checksum, old_checksum, "the pod template changed");
    let creds = credentials(&h).await;
    assert_eq!(creds["TunnelID"], json!(new_id));
    assert_ne!(
        creds["TunnelSecret"], old_creds["TunnelSecret"],
        "a recreated tunnel gets a new secret"
    );

    let refused = h
        .sim
        .request_log()
        .iter()
        .filter(|r| r.operation == Some(Operation::CreateTunnel) && r.status == 400)
        .count();
    assert_eq!(refused, 1, "the failing recreate attempt was made");
    assert_eq!(h.sim.calls(Operation::CreateTunnel), 3);

    let reasons = h.event_reasons("web").await;
    assert!(reasons.iter().any(|r| r == "TunnelDeleted"), "{reasons:?}");
}

#[tokio::test]
async fn an_existing_tunnel_deleted_on_cloudflare_is_reported_never_recreated() {
    let h = Harness::start_with("tr-drift-ex", |o| o.drift_interval = Duration::from_secs(2)).await;
    h.create_api_secret(API_SECRET, &[("CLOUDFLARE_API_TOKEN", TOKEN)])
        .await;
    let id = h
        .precreate_tunnel("theirs", &[9u8; 32], ConfigSrc::Local)
        .await;
    h.create_tunnel(
        "ext",
        h.spec(API_SECRET, json!({"existingTunnel": {"id": id}})),
    )
    .await;
    h.wait_reason(&h.tunnels(), "ext", "Ready").await;
    let creates = h.sim.calls(Operation::CreateTunnel);

    assert!(h.sim.delete_tunnel_out_of_band(&id));

    let reported = h.wait_reason(&h.tunnels(), "ext", "TunnelDeleted").await;
    let status = reported.status.clone().expect("status");
    assert_eq!(status.tunnel_id.as_deref(), Some(id.as_str()));
    assert_eq!(status.previous_tunnel_ids, None);
    let condition = ready(Some(&status)).expect("ready");
    assert_eq!(condition.status, "False");
    assert!(condition.message.contains(&id), "{}", condition.message);
    assert_eq!(h.sim.calls(Operation::CreateTunnel), creates);
    assert!(h.live_tunnels().is_empty());
}

async fn create_many(h: &Harness) -> Vec<Tunnel> {
    h.create_api_secret(API_SECRET, &[("CLOUDFLARE_API_TOKEN", TOKEN)])
        .await;
    for i in 0..MANY {
        h.create_tunnel(
            &format!("t{i}"),
            h.spec(
                API_SECRET,
                json!({"newTunnel": {"name": format!("tunnel-{i}")}}),
            ),
        )
        .await;
    }
    let mut out = Vec::new();
    for i in 0..MANY {
        out.push(h.wait_reason(&h.tunnels(), &format!("t{i}"), "Ready").await);
    }
    out
}

#[tokio::test]
async fn a_forced_resync_of_twenty_converged_tunnels_makes_no_cloudflare_call() {
    quiet_resync(Harness::start("tr-quiet").await).await;
}

#[tokio::test]
async fn with_drift_checks_on_a_resync_before_one_is_due_makes_no_cloudflare_call() {
    let h = Harness::start_with("tr-quiet-drift", |o| {
        o.drift_interval = Duration::from_secs(3600);
    })
    .await;
    quiet_resync(h).await;
}

/// Converges twenty tunnels, restarts the operator and forces a reconcile of each.
async fn quiet_resync(mut h: Harness) {
    create_many(&h).await;
    // Twenty tunnels on one domain and one credential: one zone lookup between them.
    assert_eq!(h.sim.calls(Operation::ListZones), 1);
    assert_eq!(h.sim.calls(Operation::CreateTunnel), MANY as u64);
    h.stop_operator();
    h.sim.reset_counters();
    let config_maps: Api<ConfigMap> = Api::namespaced(h.admin.clone(), &h.ns);
    let mut old_uids = Vec::new();
    for i in 0..MANY {
        let cm = config_maps.get(&format!("t{i}")).await.expect("cm");
        old_uids.push(cm.uid().expect("uid"));
        config_maps
            .delete(&format!("t{i}"), &DeleteParams::default())
            .await
            .expect("delete cm");
    }
    // A restarted operator reconciles every object; each ConfigMap coming back proves it.
    h.start_operator();
    for (i, old_uid) in old_uids.iter().enumerate() {
        poll_until(&format!("t{i} config map back"), WAIT, POLL, || async {
            let cm = config_maps.get_opt(&format!("t{i}")).await.ok().flatten()?;
            (cm.uid().as_ref() != Some(old_uid)).then_some(())
        })
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    }
    assert_eq!(h.sim.total_calls(), 0, "steady state calls Cloudflare");
    assert_eq!(h.live_tunnels().len(), MANY);
}

#[tokio::test]
async fn twenty_tunnels_converge_through_failing_cloudflare_calls_without_orphans() {
    let h = Harness::start_with("tr-chaos", |o| {
        o.cloudflare_max_attempts = Some(2);
        o.retry_base = Duration::from_millis(200);
        o.retry_max = Duration::from_secs(2);
    })
    .await;
    for op in Operation::ALL {
        h.sim.inject(op, Fault::error_rate(0.3, 503));
    }
    h.sim
        .inject(Operation::CreateTunnel, Fault::rate_limit_next(2, 1));
    h.sim
        .inject(Operation::ListZones, Fault::rate_limit_next(2, 1));
    let tunnels = create_many(&h).await;

    let ids: BTreeSet<String> = tunnels
        .iter()
        .filter_map(|t| t.status.as_ref()?.tunnel_id.clone())
        .collect();
    assert_eq!(ids.len(), MANY, "every object has its own tunnel");
    let live: BTreeSet<String> = h.live_tunnels().into_iter().map(|t| t.id).collect();
    assert_eq!(live, ids, "no orphan, no duplicate");
    assert!(h.sim.calls(Operation::CreateTunnel) >= MANY as u64);
    let log = h.sim.request_log();
    let unavailable = log.iter().filter(|r| r.status == 503).count();
    let limited = log.iter().filter(|r| r.status == 429).count();
    assert!(unavailable > 0, "no injected 503 was served");
    assert_eq!(limited, 4, "both rate-limit faults were served");
    let listed = h
        .tunnels()
        .list(&ListParams::default())
        .await
        .expect("list")
        .items
        .len();
    assert_eq!(listed, MANY);
}
