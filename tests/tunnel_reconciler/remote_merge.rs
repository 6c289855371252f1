//! Remotely-managed tunnels whose configuration others write too: a rule added in the
//! dashboard for a hostname cftunnel does not own survives every route change and drift check,
//! and deleting a Cloudflare-mode existingTunnel takes out only cftunnel's rules.
use std::time::Duration;

use cftunnel_cloudflare::ConfigSrc;
use cftunnel_sim::Operation;
use cftunnel_testenv::poll_until;
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::json;

use crate::harness::{Harness, POLL, TOKEN, WAIT};
use crate::remote::{pushed_rules, wait_rules};
use crate::routes::{API_SECRET, bindings, create_binding, create_service};

fn fast_drift(options: &mut cftunnel::term::ControllerOptions) {
    options.drift_interval = Duration::from_secs(2);
}

fn web(h: &Harness) -> String {
    format!("http://web.{}.svc:80", h.ns)
}

/// An existing remotely-managed tunnel whose configuration already holds a dashboard rule,
/// run by the Tunnel `edge` in Cloudflare mode.
async fn adopted_with_dashboard_rule(h: &Harness) -> String {
    let id = h
        .precreate_tunnel("dash", &[6u8; 32], ConfigSrc::Cloudflare)
        .await;
    h.cloudflare()
        .put_tunnel_configuration(
            &h.sim.account_id(),
            &id,
            &json!({"ingress": [
                {"hostname": "dashboard.example.com", "service": "http://dashboard:8080"},
                {"service": "http_status:404"}
            ]}),
        )
        .await
        .expect("the dashboard's configuration");
    h.create_api_secret(API_SECRET, &[("CLOUDFLARE_API_TOKEN", TOKEN)])
        .await;
    create_service(h, "web", 80, json!({}), json!({})).await;
    h.create_tunnel(
        "edge",
        h.spec(
            API_SECRET,
            json!({"existingTunnel": {"id": id}, "configSource": "Cloudflare"}),
        ),
    )
    .await;
    id
}

#[tokio::test]
async fn a_dashboard_rule_for_a_hostname_cftunnel_does_not_own_survives_route_changes_and_drift_checks()
 {
    let h = Harness::start_with("tr-rm-dash", fast_drift).await;
    let id = adopted_with_dashboard_rule(&h).await;
    let dashboard = DASHBOARD;
    create_binding(
        &h,
        "app",
        json!([{"name": "web", "spec": {"fqdn": "app.example.com"}}]),
    )
    .await;
    let web = web(&h);
    wait_rules(
        &h,
        &id,
        &[
            ("app.example.com", &web),
            dashboard,
            ("*", "http_status:404"),
        ],
    )
    .await;
    create_binding(
        &h,
        "api",
        json!([{"name": "web", "spec": {"fqdn": "api.example.com"}}]),
    )
    .await;
    wait_rules(
        &h,
        &id,
        &[
            ("api.example.com", &web),
            ("app.example.com", &web),
            dashboard,
            ("*", "http_status:404"),
        ],
    )
    .await;
    bindings(&h)
        .delete("app", &DeleteParams::default())
        .await
        .expect("delete app");
    wait_rules(
        &h,
        &id,
        &[
            ("api.example.com", &web),
            dashboard,
            ("*", "http_status:404"),
        ],
    )
    .await;
    // Several drift checks: each reads the document, none writes it.
    let puts = h.sim.calls(Operation::PutConfiguration);
    let reads = h.sim.calls(Operation::GetConfiguration);
    poll_until("three more drift reads", WAIT, POLL, || async {
        (h.sim.calls(Operation::GetConfiguration) >= reads + 3).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(h.sim.calls(Operation::PutConfiguration), puts);
    assert_eq!(
        pushed_rules(&h, &id),
        [
            ("api.example.com".to_string(), web.clone()),
            (dashboard.0.to_string(), dashboard.1.to_string()),
            ("*".to_string(), "http_status:404".to_string()),
        ]
    );
    let status = h
        .tunnels()
        .get("edge")
        .await
        .expect("edge")
        .status
        .expect("status");
    assert_eq!(
        status.config_hostnames,
        Some(vec!["api.example.com".to_string()])
    );
}

/// The dashboard's rule in Cloudflare's copy of the configuration.
const DASHBOARD: (&str, &str) = ("dashboard.example.com", "http://dashboard:8080");

/// [`adopted_with_dashboard_rule`] with cftunnel's rule for app.example.com pushed beside the
/// dashboard's; returns the tunnel id.
async fn app_beside_the_dashboard_rule(h: &Harness) -> String {
    let id = adopted_with_dashboard_rule(h).await;
    create_binding(
        h,
        "app",
        json!([{"name": "web", "spec": {"fqdn": "app.example.com"}}]),
    )
    .await;
    let web = web(h);
    wait_rules(
        h,
        &id,
        &[
            ("app.example.com", &web),
            DASHBOARD,
            ("*", "http_status:404"),
        ],
    )
    .await;
    id
}

#[tokio::test]
async fn deleting_a_cloudflare_mode_existing_tunnel_takes_out_only_cftunnels_rules() {
    let h = Harness::start("tr-rm-delete").await;
    let id = app_beside_the_dashboard_rule(&h).await;
    h.tunnels()
        .delete("edge", &DeleteParams::default())
        .await
        .expect("delete edge");
    h.wait_gone(&h.tunnels(), "edge").await;
    wait_rules(&h, &id, &[DASHBOARD, ("*", "http_status:404")]).await;
    assert_eq!(
        h.live_tunnels().len(),
        1,
        "an existing tunnel is never deleted"
    );
}

/// A first reconcile cut short right after its push (by the deletion itself, or a restart)
/// leaves `configHostnames` recorded, and neither `configVersion` nor the zone (written with
/// Ready, after the push): the deletion still takes cftunnel's rules out.
#[tokio::test]
async fn a_deletion_after_a_push_whose_version_was_never_recorded_still_takes_out_cftunnels_rules()
{
    let mut h = Harness::start("tr-rm-cut").await;
    let id = app_beside_the_dashboard_rule(&h).await;
    let recorded = poll_until(
        "the pushed hostnames and version in status",
        WAIT,
        POLL,
        || async {
            let status = h.tunnels().get("edge").await.ok()?.status?;
            (status.config_version.is_some()
                && status
                    .config_hostnames
                    .as_ref()
                    .is_some_and(|hosts| hosts.iter().any(|host| host == "app.example.com")))
            .then_some(())
        },
    )
    .await;
    recorded.unwrap_or_else(|e| panic!("{e}"));
    // The state a reconcile leaves when it stops right after the PUT.
    h.stop_operator();
    h.tunnels()
        .patch_status(
            "edge",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {
                "configVersion": null, "zoneId": null, "zoneDomain": null,
            }})),
        )
        .await
        .expect("configVersion and the zone removed");
    h.tunnels()
        .delete("edge", &DeleteParams::default())
        .await
        .expect("delete edge");
    h.start_operator();
    h.wait_gone(&h.tunnels(), "edge").await;
    wait_rules(&h, &id, &[DASHBOARD, ("*", "http_status:404")]).await;
}

/// The tunnel's `warp-routing` as Cloudflare holds it.
async fn warp_routing(h: &Harness, id: &str) -> serde_json::Value {
    h.cloudflare()
        .tunnel_configuration(&h.sim.account_id(), id)
        .await
        .expect("the configuration")
        .config
        .and_then(|c| c.get("warp-routing").cloned())
        .unwrap_or_default()
}

#[tokio::test]
async fn the_private_traffic_options_set_in_spec_are_pushed_and_put_back_and_the_others_kept() {
    let h = Harness::start_with("tr-rm-warp", fast_drift).await;
    let id = h
        .precreate_tunnel("warp", &[7u8; 32], ConfigSrc::Cloudflare)
        .await;
    let account = h.sim.account_id();
    h.cloudflare()
        .put_tunnel_configuration(
            &account,
            &id,
            &json!({"ingress": [{"service": "http_status:404"}],
                "warp-routing": {"tcpKeepAlive": 45, "maxActiveFlows": 10}}),
        )
        .await
        .expect("the dashboard's configuration");
    h.create_api_secret(API_SECRET, &[("CLOUDFLARE_API_TOKEN", TOKEN)])
        .await;
    h.create_tunnel(
        "edge",
        h.spec(
            API_SECRET,
            json!({"existingTunnel": {"id": id}, "configSource": "Cloudflare",
                "warpRouting": {"connectTimeout": "10s", "maxActiveFlows": 200}}),
        ),
    )
    .await;
    let wanted = json!({"connectTimeout": 10, "maxActiveFlows": 200, "tcpKeepAlive": 45});
    poll_until(
        "the options pushed beside the dashboard's",
        WAIT,
        POLL,
        || async { (warp_routing(&h, &id).await == wanted).then_some(()) },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));

    // Someone changes one of cftunnel's keys: the drift check puts it back, theirs stays.
    let mut changed = h
        .cloudflare()
        .tunnel_configuration(&account, &id)
        .await
        .expect("the configuration")
        .config
        .unwrap_or_default();
    changed["warp-routing"]["maxActiveFlows"] = json!(5);
    h.cloudflare()
        .put_tunnel_configuration(&account, &id, &changed)
        .await
        .expect("their change");
    poll_until("cftunnel's key put back", WAIT, POLL, || async {
        (warp_routing(&h, &id).await == wanted).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
}
