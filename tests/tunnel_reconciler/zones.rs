//! Hostnames in any zone of the account (docs/design.md §3.3): each goes to the zone that is its
//! longest suffix, its records leave that zone with its route or its tunnel, and a hostname in
//! no zone is reported on its route with the zones it could have been in.
use std::collections::BTreeSet;

use cftunnel_sim::Operation;
use cftunnel_testenv::poll_until;
use kube::api::DeleteParams;
use serde_json::json;

use crate::binding_deletion::create_quiet_binding;
use crate::harness::{Harness, POLL, TOKEN, WAIT};
use crate::routes::{
    API_SECRET, bindings, create_binding, create_service, wait_binding_reason, wait_ingress,
};

const ZONES: [&str; 3] = ["example.com", "dev.example.com", "example.net"];

/// `(type, name)` of every CNAME and `_managed` TXT in `zone`.
fn ours(h: &Harness, zone: &str) -> BTreeSet<(String, String)> {
    h.sim
        .dns_records(zone)
        .into_iter()
        .filter(|r| r.record_type == "CNAME" || r.name.starts_with("_managed."))
        .map(|r| (r.record_type, r.name))
        .collect()
}

fn pair(name: &str) -> [(String, String); 2] {
    [
        ("CNAME".to_string(), name.to_string()),
        ("TXT".to_string(), format!("_managed.{name}")),
    ]
}

/// Waits until the three zones hold exactly these records (CNAME + TXT of each name).
async fn wait_zones(h: &Harness, wanted: [&[&str]; 3]) {
    let expected: Vec<BTreeSet<(String, String)>> = wanted
        .iter()
        .map(|names| names.iter().flat_map(|n| pair(n)).collect())
        .collect();
    let result = poll_until("records in their zones", WAIT, POLL, || async {
        let now: Vec<BTreeSet<(String, String)>> = ZONES.iter().map(|z| ours(h, z)).collect();
        (now == expected).then_some(())
    })
    .await;
    if let Err(e) = result {
        let now: Vec<_> = ZONES.iter().map(|z| (z, ours(h, z))).collect();
        panic!("{e}; expected {expected:?}, zones hold {now:?}");
    }
}

/// A harness whose account holds [`ZONES`], with the API Secret, a Service `web` on port 80 and
/// the Tunnel `edge` (in example.com) created.
async fn edge_in_zones(prefix: &str) -> Harness {
    let h = Harness::start_in_zones(prefix, &ZONES).await;
    h.create_api_secret(API_SECRET, &[("CLOUDFLARE_API_TOKEN", TOKEN)])
        .await;
    create_service(&h, "web", 80, json!({}), json!({})).await;
    h.create_tunnel(
        "edge",
        h.spec(API_SECRET, json!({"newTunnel": {"name": "edge"}})),
    )
    .await;
    h
}

#[tokio::test]
async fn hostnames_in_two_zones_on_one_tunnel_land_in_their_zones_and_leave_with_their_routes() {
    let h = edge_in_zones("tr-zones").await;
    let t = h.wait_reason(&h.tunnels(), "edge", "Ready").await;
    let id = t.status.and_then(|s| s.tunnel_id).expect("tunnel id");
    for (name, fqdn) in [
        ("own", "a.example.com"),
        ("other", "b.example.net"),
        ("nested", "a.dev.example.com"),
    ] {
        create_binding(&h, name, json!([{"name": "web", "spec": {"fqdn": fqdn}}])).await;
    }
    // a.dev.example.com goes to dev.example.com (the longest suffix), not to example.com.
    wait_zones(
        &h,
        [
            &["a.example.com"],
            &["a.dev.example.com"],
            &["b.example.net"],
        ],
    )
    .await;
    for zone in ZONES {
        for r in h.sim.dns_records(zone) {
            if r.record_type == "CNAME" {
                assert_eq!(r.content, format!("{id}.cfargotunnel.com"), "{r:?}");
            } else {
                assert!(r.content.contains(&id), "{r:?}");
            }
        }
    }
    for name in ["own", "other", "nested"] {
        let (status, _, _) = wait_binding_reason(&h, name, "Routed").await;
        assert_eq!(status, "True");
    }
    // The account's zones were listed once for the credential (the other list call is the
    // tunnel's own zone looked up by name).
    let account_lists = h
        .sim
        .request_log()
        .into_iter()
        .filter(|r| r.operation == Some(Operation::ListZones) && !r.query.contains("name="))
        .count();
    assert_eq!(account_lists, 1, "zone lists of the whole account");

    // Removing the route in example.net removes its records there and releases the binding.
    bindings(&h)
        .delete("other", &DeleteParams::default())
        .await
        .expect("delete binding");
    h.wait_gone(&bindings(&h), "other").await;
    wait_zones(&h, [&["a.example.com"], &["a.dev.example.com"], &[]]).await;

    // The tunnel's deletion cleans every zone it has records in.
    create_binding(
        &h,
        "again",
        json!([{"name": "web", "spec": {"fqdn": "c.example.net"}}]),
    )
    .await;
    wait_zones(
        &h,
        [
            &["a.example.com"],
            &["a.dev.example.com"],
            &["c.example.net"],
        ],
    )
    .await;
    h.tunnels()
        .delete("edge", &DeleteParams::default())
        .await
        .expect("delete tunnel");
    h.wait_gone(&h.tunnels(), "edge").await;
    for zone in ZONES {
        assert_eq!(ours(&h, zone), BTreeSet::new(), "records left in {zone}");
    }
    assert_eq!(h.live_tunnels().len(), 0);
}

#[tokio::test]
async fn an_fqdn_in_no_zone_is_reported_with_the_zones_it_could_be_in() {
    let h = edge_in_zones("tr-nozone").await;
    create_binding(
        &h,
        "lost",
        json!([{"name": "web", "spec": {"fqdn": "app.nowhere.org"}}]),
    )
    .await;
    create_binding(
        &h,
        "fine",
        json!([{"name": "web", "spec": {"fqdn": "fine.example.net"}}]),
    )
    .await;
    let (status, _, message) = wait_binding_reason(&h, "lost", "DNSZoneNotFound").await;
    assert_eq!(status, "False");
    assert_eq!(
        message,
        "app.nowhere.org|app.nowhere.org is in no zone of the tunnel's Cloudflare account; its \
         zones are dev.example.com, example.com, example.net: use a hostname in one of them, or \
         set disableDNSUpdates and manage its record yourself"
    );
    // The other hostname of the tunnel is not held up by it.
    wait_binding_reason(&h, "fine", "Routed").await;
    wait_zones(&h, [&[], &[], &["fine.example.net"]]).await;
    for zone in ZONES {
        assert!(
            !h.sim
                .dns_records(zone)
                .iter()
                .any(|r| r.name.contains("nowhere")),
            "a record for app.nowhere.org in {zone}"
        );
    }
}

/// The Go operator's manifests routed hostnames outside the tunnel's domain with
/// `disableDNSUpdates` (the user manages the record): admitted, routed, and no DNS written.
#[tokio::test]
async fn a_disable_dns_updates_binding_outside_every_zone_is_routed_with_no_dns_write() {
    let h = edge_in_zones("tr-quiet").await;
    h.wait_reason(&h.tunnels(), "edge", "Ready").await;
    create_quiet_binding(&h, "go-era", "app.nowhere.org").await;
    let (status, _, message) = wait_binding_reason(&h, "go-era", "Routed").await;
    assert_eq!(status, "True", "{message}");
    wait_ingress(&h, "the route outside every zone rendered", |rules| {
        rules.contains_key("app.nowhere.org")
    })
    .await;
    let writes: u64 = [
        Operation::CreateDnsRecord,
        Operation::UpdateDnsRecord,
        Operation::PatchDnsRecord,
        Operation::DeleteDnsRecord,
        Operation::BatchDnsRecords,
    ]
    .into_iter()
    .map(|op| h.sim.calls(op))
    .sum();
    assert_eq!(writes, 0, "a DNS write for a disableDNSUpdates binding");
    wait_zones(&h, [&[], &[], &[]]).await;
}
