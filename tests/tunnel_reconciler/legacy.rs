//! Objects the Go operator stored and ran, in shapes admission refuses today (stored here
//! without the webhook, as they were before cftunnel): they keep working the Go operator's way,
//! and their `Ready` condition says what would be refused if they were applied today.

use cftunnel_types::TunnelBinding;
use kube::api::PostParams;
use serde_json::json;

use crate::harness::{self, Harness, TOKEN};
use crate::routes::{
    API_SECRET, bindings, create_service, wait_binding_reason, wait_ingress, wait_records,
};

#[tokio::test]
async fn a_stored_binding_with_go_era_oddities_is_routed_and_says_why_it_would_be_refused() {
    let h = Harness::start("tr-legacy").await;
    h.create_api_secret(API_SECRET, &[("CLOUDFLARE_API_TOKEN", TOKEN)])
        .await;
    create_service(&h, "web", 8080, json!({}), json!({})).await;
    let binding: TunnelBinding = serde_json::from_value(json!({
        "apiVersion": "networking.cfargotunnel.com/v1alpha1",
        "kind": "TunnelBinding",
        "metadata": {"name": "go-era", "labels": {"cftunnel-test/run": h.ns}},
        "subjects": [{"kind": "service", "name": "web", "spec": {"fqdn": "legacy.example.com", "protocol": "quic"}}],
        "tunnelRef": {"kind": "Tunnel", "name": "edge"},
    }))
    .expect("binding json");
    bindings(&h)
        .create(&PostParams::default(), &binding)
        .await
        .expect("stored without admission");
    h.create_tunnel(
        "edge",
        h.spec(API_SECRET, json!({"newTunnel": {"name": "edge"}})),
    )
    .await;
    let (status, _, message) = wait_binding_reason(&h, "go-era", "LegacyRoute").await;
    assert_eq!(status, "True");
    let ns = h.ns.clone();
    assert_eq!(
        message,
        format!(
            "legacy.example.com|routes legacy.example.com through Tunnel {ns}/edge; subjects[0].kind: \"service\" is not supported; only Service can be bound (refused if applied today; routed to the Service, as the Go operator did); subjects[0].spec.protocol: \"quic\" is not supported; use http, https, tcp, udp, ssh, rdp or smb (refused if applied today; routed with the protocol inferred from the Service port, as the Go operator did)"
        )
    );
    let wanted = format!("http://web.{ns}.svc:8080");
    wait_ingress(&h, "the legacy route rendered", |rules| {
        rules.get("legacy.example.com") == Some(&wanted)
    })
    .await;
    wait_records(&h, "legacy.example.com", 1).await;
    let t = h.wait_reason(&h.tunnels(), "edge", "Ready").await;
    let routes = t.status.and_then(|s| s.routes).unwrap_or_default();
    assert_eq!(routes.len(), 1);
    assert_eq!(routes[0].state, "Active");
}

#[tokio::test]
async fn a_stored_existing_tunnel_whose_id_is_not_a_uuid_runs_the_tunnel_of_its_name() {
    let h = Harness::start("tr-legacy-id").await;
    let id = h
        .precreate_with_credential_file(API_SECRET, [7u8; 32])
        .await;
    h.create_tunnel(
        "old",
        h.spec(
            API_SECRET,
            json!({"existingTunnel": {"id": "my-tunnel", "name": "pre"}}),
        ),
    )
    .await;
    let t = h.wait_reason(&h.tunnels(), "old", "Ready").await;
    let status = t.status.clone().expect("status");
    assert_eq!(status.tunnel_id.as_deref(), Some(id.as_str()));
    assert_eq!(
        harness::ready_message(Some(&status)),
        format!(
            "tunnel pre ({id}) is configured; spec.existingTunnel.id: \"my-tunnel\" is not a tunnel id (a UUID such as 6ff42ae2-765d-4adf-8112-31c55c1551ef); copy it from `cloudflared tunnel list` or the dashboard, or give existingTunnel.name instead (refused if applied today; the tunnel was found by spec.existingTunnel.name \"pre\", as the Go operator did)"
        )
    );
    assert_eq!(h.live_tunnels().len(), 1, "no tunnel created");
}
