//! A zone at its record quota, end to end (docs/design.md §3.3): a Free zone holding others'
//! records leaves room for five hostnames; seven are routed. The five oldest routes publish,
//! the two youngest get `QuotaExceeded` (a binding's Ready, a labelled Service's Event) naming
//! the zone, its quota, what it holds and the fixes; nothing is retried while nothing changes;
//! a route removed makes room for the oldest one waiting. Beside it, the same zone with four
//! hostnames routed, which stays below its quota; and with drift checks on, a hostname waiting
//! for room costs one refused write per check, nothing in between.
use std::time::Duration;

use cftunnel_sim::Operation;
use cftunnel_testenv::poll_until;
use kube::api::DeleteParams;
use serde_json::json;

use crate::dns_reads::wait_dns_id;
use crate::harness::{Harness, POLL, TOKEN, WAIT};
use crate::routes::{
    API_SECRET, ZONE, binding_ready, bindings, create_binding, create_service, records,
    wait_binding_reason, wait_records,
};

/// Records of others in the zone: 10 of its 200 are left, room for five hostnames.
const OTHERS: usize = 190;

/// A Free zone with the quota Cloudflare's documentation reports for it, holding `others`
/// records nobody routes.
fn free_zone_holding(h: &Harness, others: usize) {
    assert!(h.sim.set_zone_plan(ZONE, "free"));
    assert!(h.sim.set_zone_record_quota(ZONE, Some(200)));
    for i in 0..others {
        h.sim
            .insert_dns_record(
                ZONE,
                json!({"type": "A", "name": format!("other-{i}.{ZONE}"), "content": "192.0.2.1"}),
            )
            .expect("record of others");
    }
}

/// The API Secret, the Service every binding routes, and the tunnel.
async fn tunnel_and_service(h: &Harness) {
    h.create_api_secret(API_SECRET, &[("CLOUDFLARE_API_TOKEN", TOKEN)])
        .await;
    create_service(h, "web", 80, json!({}), json!({})).await;
    h.create_tunnel(
        "edge",
        h.spec(API_SECRET, json!({"newTunnel": {"name": "edge"}})),
    )
    .await;
}

/// Binding `web-<letter>` routing `<letter>.example.com`.
async fn route(h: &Harness, letter: &str) {
    create_binding(
        h,
        &format!("web-{letter}"),
        json!([{"name": "web", "spec": {"fqdn": format!("{letter}.{ZONE}")}}]),
    )
    .await;
}

fn write_calls(h: &Harness) -> u64 {
    [
        Operation::CreateDnsRecord,
        Operation::BatchDnsRecords,
        Operation::UpdateDnsRecord,
        Operation::PatchDnsRecord,
        Operation::DeleteDnsRecord,
    ]
    .iter()
    .map(|op| h.sim.calls(*op))
    .sum()
}

fn has_cname(h: &Harness, letter: &str) -> bool {
    records(h, &format!("{letter}.{ZONE}"))
        .iter()
        .any(|r| r.record_type == "CNAME")
}

#[tokio::test]
async fn a_full_zone_publishes_the_oldest_routes_and_tells_the_others_quota_exceeded() {
    let mut h = Harness::start_stopped("tr-quota", &[ZONE]).await;
    free_zone_holding(&h, OTHERS);
    tunnel_and_service(&h).await;
    // Created one second apart, g first: the older a route, the later its letter.
    for letter in ["g", "f", "e", "d", "c", "b"] {
        route(&h, letter).await;
        tokio::time::sleep(Duration::from_millis(1_100)).await;
    }
    create_service(
        &h,
        "api",
        8080,
        json!({"cfargotunnel.com/expose-tunnel": "edge"}),
        json!({"cfargotunnel.com/hostname": format!("a.{ZONE}")}),
    )
    .await;
    // Every route is there when the operator starts: the first sync sees all seven at once.
    h.start_operator();
    h.wait_reason(&h.tunnels(), "edge", "Ready").await;

    for letter in ["g", "f", "e", "d", "c"] {
        wait_binding_reason(&h, &format!("web-{letter}"), "Routed").await;
        wait_records(&h, &format!("_managed.{letter}.{ZONE}"), 1).await;
        // Its TXT's `DnsId` patch may ride with a later batch: not in the quiet window below.
        wait_dns_id(&h, &format!("{letter}.{ZONE}")).await;
    }
    let (status, _, message) = wait_binding_reason(&h, "web-b", "QuotaExceeded").await;
    assert_eq!(status, "False");
    for part in [
        "no DNS record for b.example.com: zone example.com is at its Cloudflare record quota",
        "it holds 200 records; 200 records is the quota reported for its plan, Free Website",
        "needs 2 records, its CNAME and its _managed TXT",
        "oldest routes first",
        "move the zone to a paid plan",
        "route fewer hostnames",
        "--no-dns-txt-records",
    ] {
        assert!(message.contains(part), "{part:?} not in {message}");
    }
    h.wait_event("api", "QuotaExceeded").await;
    assert!(!has_cname(&h, "b") && !has_cname(&h, "a"));
    assert_eq!(h.sim.dns_records(ZONE).len(), 200);

    // Converged: over 20 s nothing is written again and the zone is not even read.
    h.sim.reset_counters();
    tokio::time::sleep(Duration::from_secs(20)).await;
    let (writes, reads) = (write_calls(&h), h.sim.calls(Operation::ListDnsRecords));
    assert_eq!(
        (writes, reads),
        (0, 0),
        "calls after convergence: {:?}",
        h.sim.request_log()
    );
    assert_eq!(binding_ready(&h, "web-b").await.1, "QuotaExceeded");

    // The oldest route goes: its two records make room for the oldest one waiting (b), not
    // for the Service (a), which is younger.
    bindings(&h)
        .delete("web-g", &DeleteParams::default())
        .await
        .expect("delete binding");
    h.wait_gone(&bindings(&h), "web-g").await;
    wait_binding_reason(&h, "web-b", "Routed").await;
    wait_records(&h, &format!("_managed.b.{ZONE}"), 1).await;
    assert!(!has_cname(&h, "g") && !has_cname(&h, "a"));
    bindings(&h)
        .delete("web-f", &DeleteParams::default())
        .await
        .expect("delete binding");
    wait_records(&h, &format!("_managed.a.{ZONE}"), 1).await;
    h.wait_event("api", "Routed").await;
    assert_eq!(h.sim.dns_records(ZONE).len(), 200);
}

#[tokio::test]
async fn a_zone_with_room_publishes_every_route_without_a_refusal() {
    let h = Harness::start("tr-quota-room").await;
    free_zone_holding(&h, OTHERS);
    tunnel_and_service(&h).await;
    h.wait_reason(&h.tunnels(), "edge", "Ready").await;
    for letter in ["d", "c", "b", "a"] {
        route(&h, letter).await;
    }
    for letter in ["d", "c", "b", "a"] {
        wait_binding_reason(&h, &format!("web-{letter}"), "Routed").await;
        wait_records(&h, &format!("_managed.{letter}.{ZONE}"), 1).await;
    }
    poll_until("every record written", WAIT, POLL, || async {
        (h.sim.dns_records(ZONE).len() == OTHERS + 8).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let refused: Vec<_> = h
        .sim
        .request_log()
        .into_iter()
        .filter(|e| e.status == 400)
        .collect();
    assert!(refused.is_empty(), "{refused:?}");
}

#[tokio::test]
async fn a_full_zone_is_tried_again_at_the_drift_interval_only() {
    let h = Harness::start_with("tr-quota-drift", |o| {
        o.drift_interval = Duration::from_secs(8);
    })
    .await;
    // Room for two hostnames; three routed.
    free_zone_holding(&h, OTHERS + 6);
    tunnel_and_service(&h).await;
    h.wait_reason(&h.tunnels(), "edge", "Ready").await;
    for letter in ["c", "b", "a"] {
        route(&h, letter).await;
    }
    let waiting = poll_until(
        "two routes published, one over quota",
        WAIT,
        POLL,
        || async {
            let mut over = Vec::new();
            let mut routed = 0;
            for letter in ["c", "b", "a"] {
                match binding_ready(&h, &format!("web-{letter}")).await.1.as_str() {
                    "Routed" => routed += 1,
                    "QuotaExceeded" => over.push(letter),
                    _ => {}
                }
            }
            (routed == 2 && over.len() == 1).then(|| over[0])
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    poll_until("the zone full", WAIT, POLL, || async {
        (h.sim.dns_records(ZONE).len() == 200).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    // The published routes' `DnsId` patches are writes too: done before the count below.
    for letter in ["c", "b", "a"].into_iter().filter(|l| *l != waiting) {
        wait_dns_id(&h, &format!("{letter}.{ZONE}")).await;
    }

    // 8 s ± 10 % between checks: at most four in 24 s, each one refused write of the hostname
    // waiting (the zone's facts are forgotten at a drift check and its quota tried again).
    h.sim.reset_counters();
    tokio::time::sleep(Duration::from_secs(24)).await;
    let writes = h.sim.calls(Operation::BatchDnsRecords) + h.sim.calls(Operation::CreateDnsRecord);
    println!("full zone with drift checks every 8 s: {writes} DNS write(s) in 24 s");
    assert!(
        (1..=4).contains(&writes),
        "{writes} writes in 24 s: {:?}",
        h.sim.request_log()
    );
    let refused = h
        .sim
        .request_log()
        .iter()
        .filter(|e| e.status == 400)
        .count() as u64;
    assert_eq!(
        refused, writes,
        "every write tried is the waiting hostname's"
    );
    assert_eq!(
        binding_ready(&h, &format!("web-{waiting}")).await.1,
        "QuotaExceeded"
    );
    assert!(!has_cname(&h, waiting));
}
