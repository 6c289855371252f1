//! Work that waits for the budget coalesces (docs/design.md §3.12): a configuration push is
//! rendered when the pacer lets it go, so routes that arrive while it waits go in that one push;
//! a push to a tunnel cftunnel created reads nothing before it, merging onto what cftunnel last
//! pushed or read there (so a rule a drift check found stays); a new tunnel with no route yet
//! is pushed once, with its route, while a backlog waits; and a tunnel deleted while its push
//! waits makes no push.
use std::time::Duration;

use cftunnel_sim::Operation;
use cftunnel_testenv::poll_until;
use kube::api::DeleteParams;
use serde_json::json;

use crate::harness::{Harness, POLL, TOKEN, WAIT};
use crate::remote::{pushed_rules, sim_tunnel};
use crate::routes::{API_SECRET, ZONE, create_binding, create_service};

const HOSTNAMES: usize = 5;

/// One call per ten seconds after the first: a push waits there long enough for the routes
/// created right after its tunnel to be in the table when its turn comes.
fn slow_pace(options: &mut cftunnel::term::ControllerOptions) {
    options.cloudflare_budget = cftunnel_cloudflare::Budget {
        requests: 5,
        window: Duration::from_secs(40),
    };
}

/// One call per thirty seconds after the first: the five routes a test creates one by one, a
/// second and a half apart, are all in the table well before the push that waits for the next
/// call, even when the machine is busy and each create takes a while.
fn slower_pace(options: &mut cftunnel::term::ControllerOptions) {
    options.cloudflare_budget = cftunnel_cloudflare::Budget {
        requests: 3,
        window: Duration::from_secs(60),
    };
}

async fn create_remote_edge(h: &Harness) {
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
}

async fn bind(h: &Harness, i: usize) {
    create_binding(
        h,
        &format!("app{i}"),
        json!([{"name": "web", "spec": {"fqdn": format!("app{i}.{ZONE}")}}]),
    )
    .await;
}

/// The rules of the `HOSTNAMES` routes, sorted, then the catch-all.
fn wanted_rules(h: &Harness) -> Vec<(String, String)> {
    let service = format!("http://web.{}.svc:80", h.ns);
    let mut wanted: Vec<(String, String)> = (0..HOSTNAMES)
        .map(|i| (format!("app{i}.{ZONE}"), service.clone()))
        .collect();
    wanted.sort();
    wanted.push(("*".to_string(), "http_status:404".to_string()));
    wanted
}

/// Waits until the rule of `app0` (the first route [`bind`] makes) is in the tunnel's pushed
/// configuration.
async fn wait_first_route_pushed(h: &Harness, id: &str) {
    let route = (
        format!("app0.{ZONE}"),
        format!("http://web.{}.svc:80", h.ns),
    );
    poll_until("the route pushed", WAIT, POLL, || async {
        pushed_rules(h, id).contains(&route).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}; Cloudflare holds {:?}", pushed_rules(h, id)));
}

/// The id recorded in the tunnel's status (recorded before its first push).
async fn recorded_id(h: &Harness) -> String {
    poll_until("the tunnel id in status", WAIT, POLL, || async {
        let tunnel = h.tunnels().get("edge").await.ok()?;
        tunnel.status?.tunnel_id
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"))
}

#[tokio::test]
async fn routes_that_arrive_while_the_first_push_waits_go_in_it_with_no_read_before_it() {
    let h = Harness::start_with("tr-coalesce", slow_pace).await;
    create_remote_edge(&h).await;
    for i in 0..HOSTNAMES {
        bind(&h, i).await;
    }
    let id = recorded_id(&h).await;
    let wanted = wanted_rules(&h);
    let tunnel = h.wait_reason(&h.tunnels(), "edge", "Ready").await;
    let mut held = pushed_rules(&h, &id);
    held[..HOSTNAMES].sort();
    assert_eq!(held, wanted, "every route in the configuration");
    assert_eq!(
        h.sim.calls(Operation::PutConfiguration),
        1,
        "one push for the tunnel and its {HOSTNAMES} routes"
    );
    assert_eq!(
        h.sim.calls(Operation::GetConfiguration),
        0,
        "nothing read before the first push of a tunnel cftunnel created"
    );
    let status = tunnel.status.expect("status");
    assert_eq!(
        status.config_version,
        Some(sim_tunnel(&h, &id).config_version as i64),
        "status shows the version pushed"
    );
}

#[tokio::test]
async fn routes_added_while_a_push_waits_for_its_turn_all_go_in_that_push() {
    let h = Harness::start_with("tr-coalesce-wait", slower_pace).await;
    create_remote_edge(&h).await;
    let tunnel = h.wait_reason(&h.tunnels(), "edge", "Ready").await;
    let id = tunnel.status.and_then(|s| s.tunnel_id).expect("tunnel id");
    let puts = h.sim.calls(Operation::PutConfiguration);
    // The first route starts a reconcile whose push waits at the pacer (a call every thirty
    // seconds); the others arrive one by one while it waits, each its own route table.
    for i in 0..HOSTNAMES {
        bind(&h, i).await;
        tokio::time::sleep(Duration::from_millis(1500)).await;
    }
    assert_eq!(
        h.sim.calls(Operation::PutConfiguration),
        puts,
        "the test's premise: the push still waited at the pacer when the last route was made"
    );
    let wanted = wanted_rules(&h);
    poll_until("every route pushed", WAIT, POLL, || async {
        let mut held = pushed_rules(&h, &id);
        let hosts = held.len().saturating_sub(1);
        held[..hosts].sort();
        (held == wanted).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}; Cloudflare holds {:?}", pushed_rules(&h, &id)));
    assert_eq!(
        h.sim.calls(Operation::PutConfiguration) - puts,
        1,
        "the {HOSTNAMES} routes added during the wait went in one push"
    );
    assert_eq!(
        h.sim.calls(Operation::GetConfiguration),
        0,
        "a later push to a tunnel cftunnel created merges onto what it pushed, with no read"
    );
}

#[tokio::test]
async fn a_rule_a_drift_check_found_in_a_created_tunnel_stays_through_a_push_that_reads_nothing() {
    let h = Harness::start_with("tr-coalesce-seen", |options| {
        // Long enough that the route's create and push, on a busy machine, come well within
        // the drift check's read (it serves for a drift interval) and before the next check.
        options.drift_interval = Duration::from_secs(60);
    })
    .await;
    create_remote_edge(&h).await;
    let tunnel = h.wait_reason(&h.tunnels(), "edge", "Ready").await;
    let id = tunnel.status.and_then(|s| s.tunnel_id).expect("tunnel id");
    let dashboard = (
        "dashboard.example.com".to_string(),
        "http://elsewhere:80".to_string(),
    );
    h.cloudflare()
        .put_tunnel_configuration(
            &h.sim.account_id(),
            &id,
            &json!({"ingress": [{"hostname": dashboard.0, "service": dashboard.1}, {"service": "http_status:404"}]}),
        )
        .await
        .expect("a rule written in the dashboard");
    poll_until("a drift check's read", WAIT, POLL, || async {
        (h.sim.calls(Operation::GetConfiguration) > 0).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let reads = h.sim.calls(Operation::GetConfiguration);
    // Within the drift interval of that read (the next is 54 s or more away), the route's push
    // merges onto what it read, and reads nothing.
    bind(&h, 0).await;
    wait_first_route_pushed(&h, &id).await;
    assert_eq!(
        h.sim.calls(Operation::GetConfiguration),
        reads,
        "the push read nothing"
    );
    assert!(
        pushed_rules(&h, &id).contains(&dashboard),
        "the dashboard's rule was kept: {:?}",
        pushed_rules(&h, &id)
    );
}

#[tokio::test]
async fn a_tunnel_deleted_while_its_push_waits_makes_no_push() {
    let h = Harness::start_with("tr-coalesce-gone", slow_pace).await;
    create_remote_edge(&h).await;
    let id = recorded_id(&h).await;
    h.tunnels()
        .delete("edge", &DeleteParams::default())
        .await
        .expect("delete the tunnel");
    assert_eq!(
        h.sim.calls(Operation::PutConfiguration),
        0,
        "the test's premise: the push still waited at the pacer when the tunnel was deleted"
    );
    poll_until("the tunnel deleted at Cloudflare", WAIT, POLL, || async {
        sim_tunnel(&h, &id).deleted_at.map(|_| ())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    poll_until("the Tunnel object gone", WAIT, POLL, || async {
        h.tunnels()
            .get_opt("edge")
            .await
            .ok()
            .flatten()
            .is_none()
            .then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        h.sim.calls(Operation::PutConfiguration),
        0,
        "no push for a tunnel deleted while its push waited"
    );
}

#[tokio::test]
async fn a_new_tunnel_with_no_route_yet_is_pushed_once_its_route_arrives_while_a_backlog_waits() {
    let h = Harness::start_with("tr-coalesce-first", slow_pace).await;
    create_remote_edge(&h).await;
    let id = recorded_id(&h).await;
    // Other tunnels' creates keep changes waiting at the pacer (a call every ten seconds).
    for i in 0..4 {
        h.create_tunnel(
            &format!("other{i}"),
            h.spec(
                API_SECRET,
                json!({"newTunnel": {"name": format!("other{i}")}, "configSource": "Cloudflare"}),
            ),
        )
        .await;
    }
    poll_until("two tunnels created after edge", WAIT, POLL, || async {
        (h.sim.tunnels().len() >= 3).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        sim_tunnel(&h, &id).config_version,
        0,
        "edge, with no route, was not pushed while changes waited"
    );
    bind(&h, 0).await;
    wait_first_route_pushed(&h, &id).await;
    assert_eq!(
        sim_tunnel(&h, &id).config_version,
        1,
        "one push: the route with the catch-all"
    );
}
