//! One cluster's tunnels sharing a zone through different credentials, routes removed while
//! cftunnel is stopped, and Ingresses leaving cftunnel's class: what users are told is what
//! DNS and traffic do.
use std::time::Duration;

use cftunnel_testenv::poll_until;
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::json;

use crate::harness::{Harness, POLL, TOKEN, TOKEN_B, WAIT};
use crate::routes::{
    ZONE, bindings, create_binding, create_service, wait_binding_reason, wait_records,
};

async fn tunnel_id(h: &Harness, name: &str) -> String {
    let t = h.wait_reason(&h.tunnels(), name, "Ready").await;
    t.status.and_then(|s| s.tunnel_id).expect("tunnel id")
}

#[tokio::test]
async fn a_hostname_moved_between_tunnels_with_different_tokens_keeps_its_record_throughout() {
    let h = Harness::start("tr-shared-move").await;
    h.create_api_secret("api-a", &[("CLOUDFLARE_API_TOKEN", TOKEN)])
        .await;
    h.create_api_secret("api-b", &[("CLOUDFLARE_API_TOKEN", TOKEN_B)])
        .await;
    create_service(&h, "web", 80, json!({}), json!({})).await;
    h.create_tunnel(
        "edge",
        h.spec("api-a", json!({"newTunnel": {"name": "edge"}})),
    )
    .await;
    h.create_tunnel(
        "other",
        h.spec("api-b", json!({"newTunnel": {"name": "other"}})),
    )
    .await;
    let edge = tunnel_id(&h, "edge").await;
    let other = tunnel_id(&h, "other").await;
    create_binding(
        &h,
        "app",
        json!([{"name": "web", "spec": {"fqdn": "app.example.com"}}]),
    )
    .await;
    let before = wait_records(&h, "app.example.com", 1).await;
    assert_eq!(before[0].content, format!("{edge}.cfargotunnel.com"));

    bindings(&h)
        .patch(
            "app",
            &PatchParams::default(),
            &Patch::Merge(json!({"tunnelRef": {"kind": "Tunnel", "name": "other"}})),
        )
        .await
        .expect("move the binding");
    // Sampled often while it moves: the hostname never goes without its CNAME.
    let moved = poll_until(
        "the CNAME re-pointed",
        WAIT,
        Duration::from_millis(20),
        || async {
            let cnames: Vec<_> = h
                .sim
                .dns_records(ZONE)
                .into_iter()
                .filter(|r| r.record_type == "CNAME" && r.name == "app.example.com")
                .collect();
            assert_eq!(cnames.len(), 1, "the hostname lost its CNAME: {cnames:?}");
            (cnames[0].content == format!("{other}.cfargotunnel.com")).then(|| cnames[0].clone())
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}: {:?}", h.sim.dns_records(ZONE)));
    assert_eq!(
        moved.id, before[0].id,
        "taken over in place, never deleted and created again"
    );
    assert!(
        moved
            .comment
            .as_deref()
            .is_some_and(|c| c.contains("Tunnel") && c.contains("/other ")),
        "{:?}",
        moved.comment
    );
    let txts: Vec<_> = h
        .sim
        .dns_records(ZONE)
        .into_iter()
        .filter(|r| r.record_type == "TXT")
        .collect();
    assert_eq!(txts.len(), 1, "{txts:?}");
    poll_until("the TXT names the new tunnel", WAIT, POLL, || async {
        h.sim
            .dns_records(ZONE)
            .iter()
            .any(|r| r.record_type == "TXT" && r.content.contains(&other))
            .then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    wait_binding_reason(&h, "app", "Routed").await;
}

#[tokio::test]
async fn the_last_route_of_a_tunnel_deleted_while_cftunnel_is_stopped_loses_its_records_at_the_next_start()
 {
    let mut h = Harness::start_with("tr-shared-last", |o| {
        // No drift sync before the test ends: only the start-up sync can remove the records.
        o.drift_interval = Duration::from_secs(3600);
    })
    .await;
    h.create_api_secret("api", &[("CLOUDFLARE_API_TOKEN", TOKEN)])
        .await;
    create_service(&h, "web", 80, json!({}), json!({})).await;
    h.create_tunnel(
        "edge",
        h.spec("api", json!({"newTunnel": {"name": "edge"}})),
    )
    .await;
    tunnel_id(&h, "edge").await;
    create_binding(
        &h,
        "app",
        json!([{"name": "web", "spec": {"fqdn": "app.example.com"}}]),
    )
    .await;
    wait_records(&h, "app.example.com", 1).await;
    h.stop_operator();
    // The binding goes while nobody runs: its finalizer is dropped by hand, as a user would.
    bindings(&h)
        .patch(
            "app",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .expect("drop the finalizer");
    bindings(&h)
        .delete("app", &DeleteParams::default())
        .await
        .expect("delete the binding");
    h.start_operator();
    poll_until("the records gone after the start", WAIT, POLL, || async {
        h.sim.dns_records(ZONE).is_empty().then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}: {:?}", h.sim.dns_records(ZONE)));
}
