//! Cloudflare's edge on a tunnel: `status.edge`, `status.connectors`, the `Connected`
//! condition, an Event per transition and the metric, as the simulator switches the status
//! its tunnel list answers; and what that costs in calls while nothing changes.
use std::time::Duration;

use cftunnel_sim::Operation;
use cftunnel_testenv::poll_until;
use cftunnel_types::{Tunnel, TunnelStatus};
use serde_json::json;

use crate::harness::{Harness, POLL, TOKEN, WAIT};
use crate::metrics::{scrape, serve_metrics, total};
use crate::routes::{API_SECRET, bindings, create_binding, create_service, wait_records};

/// The interval of these tests: every check here is a few of them.
const EDGE_INTERVAL: Duration = Duration::from_secs(3);

fn fast_edge(options: &mut cftunnel::term::ControllerOptions) {
    options.edge_interval = EDGE_INTERVAL;
}

fn connected(status: &TunnelStatus) -> Option<(String, String)> {
    status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "Connected")
        .map(|c| (c.status.clone(), c.reason.clone()))
}

/// Waits until `status.edge` says `word` and `Connected` is `(status, reason)`.
async fn wait_edge(h: &Harness, word: &str, condition: (&str, &str)) -> TunnelStatus {
    let wanted = (condition.0.to_string(), condition.1.to_string());
    let seen = poll_until(&format!("status.edge {word}"), WAIT, POLL, || async {
        let status = h.tunnels().get("edge").await.ok()?.status?;
        let edge = status.edge.as_ref()?;
        (edge.status == word && connected(&status).as_ref() == Some(&wanted)).then_some(status)
    })
    .await;
    match seen {
        Ok(status) => status,
        Err(e) => {
            let now = h.tunnels().get("edge").await.ok().and_then(|t| t.status);
            panic!("{e}; the tunnel's status: {now:#?}")
        }
    }
}

async fn ready_tunnel(h: &Harness) -> String {
    h.create_api_secret(API_SECRET, &[("CLOUDFLARE_API_TOKEN", TOKEN)])
        .await;
    h.create_tunnel(
        "edge",
        h.spec(API_SECRET, json!({"newTunnel": {"name": "edge"}})),
    )
    .await;
    let tunnel: Tunnel = h.wait_reason(&h.tunnels(), "edge", "Ready").await;
    tunnel
        .status
        .and_then(|s| s.tunnel_id)
        .expect("the tunnel id in status")
}

/// The edge status series of this test's tunnel.
async fn edge_metric(url: &str, ns: &str, word: &str) -> f64 {
    let namespace = format!("namespace=\"{ns}\"");
    let status = format!("status=\"{word}\"");
    total(
        &scrape(url).await,
        "cftunnel_tunnel_edge_status",
        &["name=\"edge\"", &namespace, &status],
    )
}

async fn wait_metric(url: &str, ns: &str, word: &str) {
    poll_until(&format!("the {word} series"), WAIT, POLL, || async {
        (edge_metric(url, ns, word).await == 1.0).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
}

#[tokio::test]
async fn a_tunnel_down_at_the_edge_is_told_in_status_condition_event_and_metric_and_cleared_when_healthy()
 {
    let url = serve_metrics().await;
    let h = Harness::start_with("tr-edge", fast_edge).await;
    let id = ready_tunnel(&h).await;

    // No cloudflared connected yet: never connected, no Event.
    wait_edge(&h, "inactive", ("False", "Inactive")).await;
    // The connectors' count comes from the Deployment's watch and may land after the edge's word.
    let connectors = poll_until("status.connectors", WAIT, POLL, || async {
        h.tunnels().get("edge").await.ok()?.status?.connectors
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    // No node runs the pods here: none is ready.
    assert_eq!(connectors.ready, 0, "{connectors:?}");
    assert!(connectors.desired >= 1, "{connectors:?}");
    // Never connected: nothing to list.
    let listed = h
        .sim
        .request_log()
        .iter()
        .filter(|r| r.operation == Some(Operation::ListConnections))
        .count();
    assert_eq!(listed, 0, "no connector list for an inactive tunnel");

    assert!(h.sim.connect_tunnel(&id));
    let healthy = wait_edge(&h, "healthy", ("True", "Healthy")).await;
    let summary = healthy
        .edge
        .and_then(|e| e.connectors)
        .expect("the connectors listed when the word changed");
    assert_eq!(
        (summary.count, summary.colos.as_slice()),
        (1, &["SIM".to_string()][..])
    );
    h.wait_event("edge", "TunnelConnected").await;
    wait_metric(&url, &h.ns, "healthy").await;

    assert!(h.sim.set_tunnel_status(&id, Some("down")));
    let down = wait_edge(&h, "down", ("False", "Down")).await;
    let message = down
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "Connected")
        .map(|c| c.message.clone())
        .unwrap_or_default();
    assert!(message.contains("port 7844"), "{message}");
    let gone = down.edge.as_ref().and_then(|e| e.connectors.as_ref());
    assert_eq!(gone.map(|c| c.count), Some(0), "down: no connector");
    // Ready says the workload and the routes are applied; the edge is told apart.
    assert_eq!(
        crate::harness::ready(Some(&down)).map(|c| c.reason.as_str()),
        Some("Ready")
    );
    h.wait_event("edge", "TunnelDown").await;
    wait_metric(&url, &h.ns, "down").await;
    assert_eq!(edge_metric(&url, &h.ns, "healthy").await, 0.0);

    assert!(h.sim.set_tunnel_status(&id, None));
    wait_edge(&h, "healthy", ("True", "Healthy")).await;
    wait_metric(&url, &h.ns, "healthy").await;
    assert_eq!(edge_metric(&url, &h.ns, "down").await, 0.0);
    let told: Vec<String> = h
        .event_reasons("edge")
        .await
        .into_iter()
        .filter(|r| r.starts_with("Tunnel") && r != "TunnelCreated")
        .collect();
    assert!(
        told.iter().filter(|r| *r == "TunnelDown").count() == 1,
        "one Event per transition: {told:?}"
    );
}

#[tokio::test]
async fn while_nothing_changes_the_edge_costs_one_tunnel_list_per_interval_and_no_connector_list() {
    let h = Harness::start_with("tr-edge-calls", fast_edge).await;
    let id = ready_tunnel(&h).await;
    assert!(h.sim.connect_tunnel(&id));
    wait_edge(&h, "healthy", ("True", "Healthy")).await;
    // Settled: every write of the first look is done.
    tokio::time::sleep(EDGE_INTERVAL * 2).await;
    let count = |op: Operation| {
        h.sim
            .request_log()
            .iter()
            .filter(|r| r.operation == Some(op))
            .count()
    };
    let (lists, connectors) = (
        count(Operation::ListTunnels),
        count(Operation::ListConnections),
    );
    let window = EDGE_INTERVAL * 10;
    tokio::time::sleep(window).await;
    let lists = count(Operation::ListTunnels) - lists;
    let connectors = count(Operation::ListConnections) - connectors;
    // One walk per pass (each pass sleeps the interval after its walk), none more.
    let most = (window.as_secs() / EDGE_INTERVAL.as_secs()) as usize + 1;
    assert!(
        (1..=most).contains(&lists),
        "{lists} tunnel lists in {window:?}, at most {most}"
    );
    assert_eq!(connectors, 0, "connectors are listed only on a change");
}

/// The `Ready` (status, reason, message) of a binding.
async fn binding_ready(h: &Harness, name: &str) -> Option<(String, String, String)> {
    let binding = bindings(h).get(name).await.ok()?;
    let ready = binding
        .status?
        .conditions?
        .into_iter()
        .find(|c| c.type_ == "Ready")?;
    Some((ready.status, ready.reason, ready.message))
}

async fn wait_binding(h: &Harness, name: &str, reason: &str) -> (String, String, String) {
    let seen = poll_until(&format!("binding {name} {reason}"), WAIT, POLL, || async {
        binding_ready(h, name).await.filter(|(_, r, _)| r == reason)
    })
    .await;
    match seen {
        Ok(ready) => ready,
        Err(e) => panic!("{e}; Ready is {:?}", binding_ready(h, name).await),
    }
}

#[tokio::test]
async fn a_two_level_hostname_without_an_edge_certificate_is_told_and_an_advanced_pack_clears_it() {
    // Packs are read again at the drift interval: short, so the new pack is seen soon.
    let h = Harness::start_with("tr-edge-cert", |o| {
        o.edge_interval = EDGE_INTERVAL;
        o.drift_interval = Duration::from_secs(6);
    })
    .await;
    create_service(&h, "deep", 80, json!({}), json!({})).await;
    create_service(&h, "flat", 80, json!({}), json!({})).await;
    create_binding(
        &h,
        "deep",
        json!([{"name": "deep", "spec": {"fqdn": "a.b.example.com"}}]),
    )
    .await;
    create_binding(
        &h,
        "flat",
        json!([{"name": "flat", "spec": {"fqdn": "c.example.com"}}]),
    )
    .await;
    ready_tunnel(&h).await;

    // Only the Universal pack (example.com, *.example.com): the two-level name is not covered.
    let (status, _, message) = wait_binding(&h, "deep", "EdgeCertificateMissing").await;
    assert_eq!(status, "False");
    for part in [
        "a.b.example.com is not covered by any edge certificate of zone example.com",
        "*.b.example.com",
        "a-b.example.com",
    ] {
        assert!(message.contains(part), "{part:?} not in {message}");
    }
    h.wait_event("edge", "EdgeCertificateMissing").await;
    // The record is published all the same, and the first-level name is not told anything.
    wait_records(&h, "a.b.example.com", 1).await;
    wait_binding(&h, "flat", "Routed").await;

    assert!(
        h.sim
            .add_certificate_pack(
                "example.com",
                "advanced",
                &["example.com", "*.b.example.com"],
                "active"
            )
            .is_some()
    );
    let (status, _, _) = wait_binding(&h, "deep", "Routed").await;
    assert_eq!(status, "True");
}
