//! A deleting TunnelBinding waits for its own hostnames' DNS only.
use cftunnel_types::TunnelBinding;
use kube::api::{DeleteParams, PostParams};
use serde_json::json;

use crate::harness::{Harness, TOKEN};
use crate::routes::{
    bindings, create_binding, create_service, insert_foreign_cname, records, wait_binding_reason,
    wait_records,
};

const API_SECRET: &str = "cloudflare-api";

/// A binding of `web` at `fqdn` with `tunnelRef.disableDNSUpdates` (no DNS is written for it).
pub(crate) async fn create_quiet_binding(h: &Harness, name: &str, fqdn: &str) {
    let binding: TunnelBinding = serde_json::from_value(json!({
        "apiVersion": "networking.cfargotunnel.com/v1alpha1",
        "kind": "TunnelBinding",
        "metadata": {"name": name, "labels": {"cftunnel-test/run": h.ns}},
        "subjects": [{"name": "web", "spec": {"fqdn": fqdn}}],
        "tunnelRef": {"kind": "Tunnel", "name": "edge", "disableDNSUpdates": true},
    }))
    .expect("binding json");
    bindings(h)
        .create(&PostParams::default(), &binding)
        .await
        .expect("create binding");
}

#[tokio::test]
async fn a_deleting_binding_waits_for_its_own_records_not_for_a_conflict_elsewhere_in_its_zone() {
    let h = Harness::start("tr-bind-del").await;
    h.create_api_secret(API_SECRET, &[("CLOUDFLARE_API_TOKEN", TOKEN)])
        .await;
    let foreign = insert_foreign_cname(&h, "taken.example.com");
    create_service(&h, "web", 80, json!({}), json!({})).await;
    create_binding(
        &h,
        "blocked",
        json!([{"name": "web", "spec": {"fqdn": "taken.example.com"}}]),
    )
    .await;
    create_binding(
        &h,
        "mine",
        json!([{"name": "web", "spec": {"fqdn": "mine.example.com"}}]),
    )
    .await;
    create_quiet_binding(&h, "quiet", "quiet.example.com").await;
    h.create_tunnel(
        "edge",
        h.spec(API_SECRET, json!({"newTunnel": {"name": "edge"}})),
    )
    .await;
    wait_binding_reason(&h, "blocked", "DNSConflict").await;
    wait_binding_reason(&h, "mine", "Routed").await;
    wait_binding_reason(&h, "quiet", "Routed").await;
    wait_records(&h, "mine.example.com", 1).await;
    assert!(records(&h, "quiet.example.com").is_empty());

    for name in ["mine", "quiet"] {
        bindings(&h)
            .delete(name, &DeleteParams::default())
            .await
            .expect("delete binding");
    }
    h.wait_gone(&bindings(&h), "quiet").await;
    h.wait_gone(&bindings(&h), "mine").await;
    // Released only once its own records were removed.
    assert!(records(&h, "mine.example.com").is_empty());
    assert!(records(&h, "_managed.mine.example.com").is_empty());
    // The conflict is still there and still reported.
    let kept = records(&h, "taken.example.com");
    assert_eq!(kept.len(), 1);
    assert_eq!(kept[0].id, foreign);
    wait_binding_reason(&h, "blocked", "DNSConflict").await;
}
