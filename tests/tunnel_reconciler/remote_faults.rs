//! Remotely-managed tunnels on Cloudflare's bad days: a recreated tunnel whose first push is
//! refused, a switch to Cloudflare mode while every push is refused, and a drift check against
//! a document holding fields cftunnel never wrote. Each fault case runs beside a control with
//! the same workload and no fault.
use std::time::{Duration, Instant};

use cftunnel_cloudflare::ConfigSrc;
use cftunnel_sim::{Fault, Operation};
use cftunnel_testenv::poll_until;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use crate::harness::{Harness, POLL, TOKEN, WAIT, ready};
use crate::remote::{deployments, remote_edge, sim_tunnel, wait_rules};
use crate::routes::{API_SECRET, create_binding, create_service};

/// A drift interval long enough that a push which waits for the next drift check is told
/// apart from one made at once.
fn slow_drift(options: &mut cftunnel::term::ControllerOptions) {
    options.drift_interval = Duration::from_secs(12);
}

fn fast_drift(options: &mut cftunnel::term::ControllerOptions) {
    options.drift_interval = Duration::from_secs(2);
}

fn app_rules(h: &Harness) -> [(String, String); 2] {
    [
        (
            "app.example.com".to_string(),
            format!("http://web.{}.svc:80", h.ns),
        ),
        ("*".to_string(), "http_status:404".to_string()),
    ]
}

async fn wait_app_rules(h: &Harness, id: &str) {
    let rules = app_rules(h);
    let wanted: Vec<(&str, &str)> = rules
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    wait_rules(h, id, &wanted).await;
}

async fn tunnel_id(h: &Harness) -> Option<String> {
    let t = h.tunnels().get_opt("edge").await.ok().flatten()?;
    t.status?.tunnel_id
}

/// A remote tunnel with one route is deleted on Cloudflare; its drift check creates another.
/// With `refuse_first_push` the first push to the new tunnel is refused (403, not retried by
/// the client), so the reconcile that recorded the new id fails after it.
async fn recreated_tunnel_gets_its_configuration(prefix: &str, refuse_first_push: bool) {
    let h = Harness::start_with(prefix, slow_drift).await;
    let old = remote_edge(&h).await;
    create_binding(
        &h,
        "app",
        json!([{"name": "web", "spec": {"fqdn": "app.example.com"}}]),
    )
    .await;
    wait_app_rules(&h, &old).await;
    if refuse_first_push {
        h.sim
            .inject(Operation::PutConfiguration, Fault::fail_next(1, 403));
    }
    assert!(h.sim.delete_tunnel_out_of_band(&old));
    let new = poll_until("a new tunnel id", WAIT, POLL, || async {
        tunnel_id(&h).await.filter(|id| *id != old)
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    wait_app_rules(&h, &new).await;
    h.wait_reason(&h.tunnels(), "edge", "Ready").await;

    let log = h.sim.request_log();
    let on_new = |r: &&cftunnel_sim::LoggedRequest| r.path.contains(&new);
    let pushed_at = log
        .iter()
        .filter(on_new)
        .position(|r| r.operation == Some(Operation::PutConfiguration) && r.status == 200);
    let refused = log
        .iter()
        .filter(on_new)
        .filter(|r| r.operation == Some(Operation::PutConfiguration) && r.status == 403)
        .count();
    assert_eq!(
        refused,
        usize::from(refuse_first_push),
        "the refused push was made"
    );
    // The push follows the failure at once: no drift check of the new tunnel came before it.
    let drift_checked_at = log
        .iter()
        .filter(on_new)
        .position(|r| r.operation == Some(Operation::GetTunnel));
    assert!(
        pushed_at.is_some() && drift_checked_at.is_none_or(|d| Some(d) > pushed_at),
        "pushed at {pushed_at:?}, drift check of the new tunnel at {drift_checked_at:?}"
    );
    let version = sim_tunnel(&h, &new).config_version as i64;
    poll_until("the new tunnel's version recorded", WAIT, POLL, || async {
        let status = h.tunnels().get("edge").await.ok()?.status?;
        (status.config_version == Some(version) && status.tunnel_id.as_deref() == Some(&*new))
            .then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(h.live_tunnels().len(), 1, "no duplicate tunnel");
}

#[tokio::test]
async fn a_recreated_tunnel_whose_first_push_is_refused_gets_its_configuration_before_the_next_drift_check()
 {
    recreated_tunnel_gets_its_configuration("tr-rf-recreate", true).await;
}

#[tokio::test]
async fn control_a_recreated_tunnel_gets_its_configuration_before_the_next_drift_check() {
    recreated_tunnel_gets_its_configuration("tr-rf-recreate-ok", false).await;
}

/// The arguments of the cloudflared container and whether the config.yaml ConfigMap exists.
async fn workload(h: &Harness) -> (Vec<String>, bool) {
    let deployment = deployments(h).get("edge").await.expect("deployment");
    let args = deployment.spec.template.spec.expect("pod").containers[0]
        .args
        .clone()
        .unwrap_or_default();
    let config_maps: Api<ConfigMap> = Api::namespaced(h.admin.clone(), &h.ns);
    let has_config = config_maps.get_opt("edge").await.expect("get").is_some();
    (args, has_config)
}

/// A Local tunnel with one route is switched to Cloudflare mode. With `refused_for`, every push
/// is refused (403: a token without Tunnel Edit) for that long, then accepted.
async fn switch_to_cloudflare(prefix: &str, refused_for: Option<Duration>) {
    let h = Harness::start(prefix).await;
    h.create_api_secret(API_SECRET, &[("CLOUDFLARE_API_TOKEN", TOKEN)])
        .await;
    create_service(&h, "web", 80, json!({}), json!({})).await;
    h.create_tunnel(
        "edge",
        h.spec(API_SECRET, json!({"newTunnel": {"name": "edge"}})),
    )
    .await;
    create_binding(
        &h,
        "app",
        json!([{"name": "web", "spec": {"fqdn": "app.example.com"}}]),
    )
    .await;
    let t = h.wait_reason(&h.tunnels(), "edge", "Ready").await;
    let id = t.status.and_then(|s| s.tunnel_id).expect("id");
    let local = workload(&h).await;
    assert!(
        local.0.iter().any(|a| a == "--config") && local.1,
        "{local:?}"
    );
    if refused_for.is_some() {
        h.sim
            .inject(Operation::PutConfiguration, Fault::error_rate(1.0, 403));
    }
    h.tunnels()
        .patch(
            "edge",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"configSource": "Cloudflare"}})),
        )
        .await
        .expect("switch");
    if let Some(refused_for) = refused_for {
        let failing = h
            .wait_reason(&h.tunnels(), "edge", "ConfigurationPushFailed")
            .await;
        let message = ready(failing.status.as_ref())
            .expect("ready")
            .message
            .clone();
        assert!(
            message.contains("HTTP 403") && message.contains("keeps the configuration it runs"),
            "{message}"
        );
        // For as long as the pushes are refused, the Local workload is left as it was.
        let until = Instant::now() + refused_for;
        while Instant::now() < until {
            assert_eq!(
                workload(&h).await,
                local,
                "the pod template moved before a push"
            );
            let t = h.tunnels().get("edge").await.expect("edge");
            assert_eq!(
                ready(t.status.as_ref()).map(|c| c.reason.as_str()),
                Some("ConfigurationPushFailed")
            );
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        assert!(
            h.sim.calls(Operation::PutConfiguration) >= 2,
            "the push was tried again while refused"
        );
        h.sim.clear_faults();
    }
    let accepted = Instant::now();
    wait_app_rules(&h, &id).await;
    let pushed_after = accepted.elapsed();
    poll_until("the pods run from the token", WAIT, POLL, || async {
        let (args, has_config) = workload(&h).await;
        (!args.iter().any(|a| a == "--config") && !has_config).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    h.wait_reason(&h.tunnels(), "edge", "Ready").await;
    println!(
        "{prefix}: pushed {:.1}s after Cloudflare accepted pushes",
        pushed_after.as_secs_f64()
    );
    let first_put = h
        .sim
        .request_log()
        .into_iter()
        .find(|r| r.operation == Some(Operation::PutConfiguration) && r.status == 200);
    assert!(first_put.is_some(), "the push went through");
}

#[tokio::test]
async fn a_switch_to_cloudflare_mode_while_pushes_are_refused_keeps_the_local_workload_until_one_succeeds()
 {
    switch_to_cloudflare("tr-rf-switch", Some(Duration::from_secs(20))).await;
}

#[tokio::test]
async fn control_a_switch_to_cloudflare_mode_moves_the_workload_to_the_token() {
    switch_to_cloudflare("tr-rf-switch-ok", None).await;
}

#[tokio::test]
async fn drift_checks_compare_only_what_cftunnel_writes_and_a_push_keeps_the_rest() {
    let h = Harness::start_with("tr-rf-owned", fast_drift).await;
    let id = h
        .precreate_tunnel("dash", &[5u8; 32], ConfigSrc::Cloudflare)
        .await;
    h.cloudflare()
        .put_tunnel_configuration(
            &h.sim.account_id(),
            &id,
            &json!({"ingress": [{"service": "http_status:503"}], "warp-routing": {"enabled": true}}),
        )
        .await
        .expect("the dashboard's configuration");
    h.create_api_secret(API_SECRET, &[("CLOUDFLARE_API_TOKEN", TOKEN)])
        .await;
    create_service(&h, "web", 80, json!({}), json!({})).await;
    h.create_tunnel(
        "edge",
        h.spec(
            API_SECRET,
            json!({"existingTunnel": {"id": id}, "configSource": "Cloudflare"}),
        ),
    )
    .await;
    create_binding(
        &h,
        "app",
        json!([{"name": "web", "spec": {"fqdn": "app.example.com"}}]),
    )
    .await;
    wait_app_rules(&h, &id).await;
    h.wait_reason(&h.tunnels(), "edge", "Ready").await;
    let stored = sim_tunnel(&h, &id).config.expect("config");
    assert_eq!(stored["warp-routing"], json!({"enabled": true}), "{stored}");

    // The simulator answers every GET with fields cftunnel never sent (an empty originRequest
    // on each rule); several drift checks later nothing was put back.
    let puts = h.sim.calls(Operation::PutConfiguration);
    let reads = h.sim.calls(Operation::GetConfiguration);
    poll_until("three more drift reads", WAIT, POLL, || async {
        (h.sim.calls(Operation::GetConfiguration) >= reads + 3).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        h.sim.calls(Operation::PutConfiguration),
        puts,
        "a drift check wrote"
    );
    assert!(
        !h.event_reasons("edge")
            .await
            .contains(&"ConfigurationRestored".to_string())
    );
}
