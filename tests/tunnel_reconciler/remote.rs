//! Remotely-managed tunnels (`configSource: Cloudflare`): the rendered ingress is pushed to the
//! tunnel's configuration, cloudflared runs from its connector token, and a route change
//! touches no Deployment.
use std::time::Duration;

use cftunnel_cloudflare::{ConfigSrc, TunnelToken};
use cftunnel_sim::{Operation, SimTunnel};
use cftunnel_testenv::poll_until;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use serde_json::{Value, json};

use crate::harness::{Harness, POLL, TOKEN, WAIT};
use crate::routes::{API_SECRET, bindings, create_binding, create_service};

fn fast_drift(options: &mut cftunnel::term::ControllerOptions) {
    options.drift_interval = Duration::from_secs(2);
}

pub(crate) fn sim_tunnel(h: &Harness, id: &str) -> SimTunnel {
    h.sim
        .tunnels()
        .into_iter()
        .find(|t| t.id == id)
        .expect("the tunnel on the simulator")
}

/// `(hostname, service)` of every rule of the tunnel's configuration on Cloudflare.
pub(crate) fn pushed_rules(h: &Harness, id: &str) -> Vec<(String, String)> {
    let config = sim_tunnel(h, id).config.unwrap_or(Value::Null);
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

pub(crate) async fn wait_rules(h: &Harness, id: &str, wanted: &[(&str, &str)]) {
    let wanted: Vec<(String, String)> = wanted
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    let result = poll_until("the pushed configuration", WAIT, POLL, || async {
        (pushed_rules(h, id) == wanted).then_some(())
    })
    .await;
    if let Err(e) = result {
        let status = h.tunnels().get("edge").await.ok().and_then(|t| t.status);
        panic!(
            "{e}; Cloudflare holds {:?}; the tunnel's status: {status:?}",
            pushed_rules(h, id)
        );
    }
}

pub(crate) fn deployments(h: &Harness) -> Api<Deployment> {
    Api::namespaced(h.admin.clone(), &h.ns)
}

/// The Deployment's generation and its ReplicaSets' names.
async fn rollout_state(h: &Harness) -> (Option<i64>, Vec<String>) {
    let deployment = deployments(h).get("edge").await.expect("deployment");
    let sets: Api<ReplicaSet> = Api::namespaced(h.admin.clone(), &h.ns);
    let mut names: Vec<String> = sets
        .list(&ListParams::default())
        .await
        .expect("replicasets")
        .items
        .into_iter()
        .filter(|rs| {
            rs.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.name == "edge")
        })
        .filter_map(|rs| rs.metadata.name)
        .collect();
    names.sort();
    (deployment.metadata.generation, names)
}

pub(crate) async fn remote_edge(h: &Harness) -> String {
    h.create_api_secret(API_SECRET, &[("CLOUDFLARE_API_TOKEN", TOKEN)])
        .await;
    create_service(h, "web", 80, json!({}), json!({})).await;
    h.create_tunnel(
        "edge",
        h.spec(
            API_SECRET,
            json!({"newTunnel": {"name": "edge"}, "configSource": "Cloudflare"}),
        ),
    )
    .await;
    let t = h.wait_reason(&h.tunnels(), "edge", "Ready").await;
    t.status.and_then(|s| s.tunnel_id).expect("tunnel id")
}

#[tokio::test]
async fn a_tunnel_in_cloudflare_mode_is_pushed_its_routes_and_changes_them_without_a_rollout() {
    let h = Harness::start("tr-remote").await;
    let id = remote_edge(&h).await;
    assert_eq!(sim_tunnel(&h, &id).config_src, "cloudflare");
    let status = h
        .tunnels()
        .get("edge")
        .await
        .expect("edge")
        .status
        .expect("status");
    assert!(
        status.config_version.is_some(),
        "Ready once pushed: {status:?}"
    );
    wait_rules(&h, &id, &[("*", "http_status:404")]).await;

    // cloudflared runs from the token in the managed Secret, never from an argument.
    let (args, token) = super::remote_connector::connector(&h).await;
    assert_eq!(TunnelToken::decode(&token).expect("a token").tunnel_id, id);
    assert!(!args.iter().any(|a| a.contains(&token)), "{args:?}");
    assert!(!args.iter().any(|a| a == "--config"), "{args:?}");
    let config_maps: Api<ConfigMap> = Api::namespaced(h.admin.clone(), &h.ns);
    assert!(
        config_maps.get_opt("edge").await.expect("get").is_none(),
        "no config.yaml"
    );

    let before = rollout_state(&h).await;
    let puts = h.sim.calls(Operation::PutConfiguration);
    create_binding(
        &h,
        "app",
        json!([{"name": "web", "spec": {"fqdn": "app.example.com"}}]),
    )
    .await;
    wait_rules(
        &h,
        &id,
        &[
            ("app.example.com", &format!("http://web.{}.svc:80", h.ns)),
            ("*", "http_status:404"),
        ],
    )
    .await;
    let added = h.sim.calls(Operation::PutConfiguration) - puts;
    assert!((1..=2).contains(&added), "{added} PUTs for one change");
    bindings(&h)
        .delete("app", &DeleteParams::default())
        .await
        .expect("delete binding");
    wait_rules(&h, &id, &[("*", "http_status:404")]).await;
    let removed = h.sim.calls(Operation::PutConfiguration) - puts - added;
    assert!((1..=2).contains(&removed), "{removed} PUTs for one change");
    assert_eq!(
        rollout_state(&h).await,
        before,
        "same generation, same ReplicaSets"
    );
    let status = h
        .tunnels()
        .get("edge")
        .await
        .expect("edge")
        .status
        .expect("status");
    assert_eq!(
        status.config_version,
        Some(sim_tunnel(&h, &id).config_version as i64),
        "status shows the version pushed"
    );
}

#[tokio::test]
async fn a_configuration_changed_behind_cftunnels_back_gets_cftunnels_parts_back_at_the_drift_interval()
 {
    let h = Harness::start_with("tr-remote-drift", fast_drift).await;
    let id = remote_edge(&h).await;
    wait_rules(&h, &id, &[("*", "http_status:404")]).await;
    h.cloudflare()
        .put_tunnel_configuration(
            &h.sim.account_id(),
            &id,
            &json!({"ingress": [{"hostname": "dashboard.example.com", "service": "http://elsewhere:80"}, {"service": "http_status:503"}]}),
        )
        .await
        .expect("a PUT from elsewhere");
    // The dashboard's rule is not cftunnel's and stays; the catch-all cftunnel wrote comes back.
    wait_rules(
        &h,
        &id,
        &[
            ("dashboard.example.com", "http://elsewhere:80"),
            ("*", "http_status:404"),
        ],
    )
    .await;
    poll_until("a ConfigurationRestored Event", WAIT, POLL, || async {
        h.event_reasons("edge")
            .await
            .contains(&"ConfigurationRestored".to_string())
            .then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
}

#[tokio::test]
async fn an_existing_remotely_managed_tunnel_is_adopted_without_a_credentials_secret() {
    let h = Harness::start("tr-remote-existing").await;
    let id = h
        .precreate_tunnel("dash", &[4u8; 32], ConfigSrc::Cloudflare)
        .await;
    h.create_api_secret(API_SECRET, &[("CLOUDFLARE_API_TOKEN", TOKEN)])
        .await;
    h.create_tunnel(
        "edge",
        h.spec(
            API_SECRET,
            json!({"existingTunnel": {"id": id}, "configSource": "Cloudflare"}),
        ),
    )
    .await;
    h.wait_reason(&h.tunnels(), "edge", "Ready").await;
    wait_rules(&h, &id, &[("*", "http_status:404")]).await;
    let secret = h.secrets().get("edge").await.expect("managed secret");
    let token = secret
        .data
        .as_ref()
        .and_then(|d| d.get("token"))
        .map(|b| String::from_utf8_lossy(&b.0).into_owned())
        .expect("token");
    assert_eq!(
        token,
        h.sim.tunnel_token(&id).expect("the token endpoint's"),
        "the token comes from the API"
    );
}

#[tokio::test]
async fn switching_modes_costs_one_rollout_each_way_and_keeps_the_dns_records() {
    let h = Harness::start("tr-remote-switch").await;
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
    let records = crate::routes::wait_records(&h, "app.example.com", 1).await;
    // Each switch is one change of the pod template: one rollout (KCM's generation count).
    let generation = || async {
        deployments(&h)
            .get("edge")
            .await
            .ok()
            .and_then(|d| d.metadata.generation)
            .unwrap_or_default()
    };
    let args = || async {
        let d = deployments(&h).get("edge").await.expect("deployment");
        d.spec.template.spec.expect("pod").containers[0]
            .args
            .clone()
            .unwrap_or_default()
    };
    let local = generation().await;
    let switch = |source: &'static str| {
        let tunnels = h.tunnels();
        async move {
            tunnels
                .patch(
                    "edge",
                    &PatchParams::default(),
                    &Patch::Merge(json!({"spec": {"configSource": source}})),
                )
                .await
                .expect("switch");
        }
    };
    switch("Cloudflare").await;
    wait_rules(
        &h,
        &id,
        &[
            ("app.example.com", &format!("http://web.{}.svc:80", h.ns)),
            ("*", "http_status:404"),
        ],
    )
    .await;
    poll_until("the pods run from the token", WAIT, POLL, || async {
        (!args().await.iter().any(|a| a == "--config")).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    h.wait_reason(&h.tunnels(), "edge", "Ready").await;
    assert_eq!(
        generation().await,
        local + 1,
        "one rollout to Cloudflare mode"
    );
    switch("Local").await;
    poll_until("back to config.yaml", WAIT, POLL, || async {
        let config_maps: Api<ConfigMap> = Api::namespaced(h.admin.clone(), &h.ns);
        let has_config = config_maps.get_opt("edge").await.ok().flatten().is_some();
        (has_config && args().await.iter().any(|a| a == "--config")).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    h.wait_reason(&h.tunnels(), "edge", "Ready").await;
    assert_eq!(generation().await, local + 2, "one rollout back");
    // The tunnel stays remotely managed at Cloudflare, whose copy cloudflared would apply over
    // config.yaml: a route added in Local mode reaches that copy too.
    assert_eq!(sim_tunnel(&h, &id).config_src, "cloudflare");
    create_service(&h, "api", 80, json!({}), json!({})).await;
    create_binding(
        &h,
        "api",
        json!([{"name": "api", "spec": {"fqdn": "api.example.com"}}]),
    )
    .await;
    wait_rules(
        &h,
        &id,
        &[
            ("api.example.com", &format!("http://api.{}.svc:80", h.ns)),
            ("app.example.com", &format!("http://web.{}.svc:80", h.ns)),
            ("*", "http_status:404"),
        ],
    )
    .await;
    let now = crate::routes::wait_records(&h, "app.example.com", 1).await;
    assert_eq!(now[0].id, records[0].id, "the same record, untouched");
    assert_eq!(now[0].content, records[0].content);
}
