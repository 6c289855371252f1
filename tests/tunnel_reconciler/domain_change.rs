//! Changing `spec.cloudflare.domain` moves a tunnel's DNS records: those of the old zone go
//! (only records proven ours), the new zone gets them, and the old zone stays in
//! `status.previousZones` until it is clean, across a restart of cftunnel too.
use cftunnel_sim::{Fault, Operation};
use cftunnel_testenv::poll_until;
use cftunnel_types::{Tunnel, TunnelStatus, ZoneRef};
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::json;

use crate::harness::{Harness, POLL, TOKEN, WAIT};
use crate::routes::{create_binding, create_service, insert_foreign_cname, wait_records};

const API_SECRET: &str = "cloudflare-api";
const OLD: &str = "example.com";
const NEW: &str = "example.org";

async fn start(prefix: &str) -> Harness {
    Harness::start_in_zones(prefix, &[OLD, NEW]).await
}

/// Names of the records at `name` in `zone`, with their type.
fn names_in(h: &Harness, zone: &str) -> Vec<(String, String)> {
    let mut found: Vec<(String, String)> = h
        .sim
        .dns_records(zone)
        .into_iter()
        .map(|r| (r.record_type.clone(), r.name.clone()))
        .collect();
    found.sort();
    found
}

fn ours(zone: &str) -> Vec<(String, String)> {
    vec![
        ("CNAME".to_string(), format!("web.{zone}")),
        ("TXT".to_string(), format!("_managed.web.{zone}")),
    ]
}

/// A Ready Tunnel `edge` in [`OLD`] with a binding of the Service `web` (default hostname
/// `web.<domain>`, so it follows the domain) and its records; a foreign CNAME in the same zone.
async fn routed_tunnel_in_old_zone(h: &Harness) -> String {
    h.create_api_secret(API_SECRET, &[("CLOUDFLARE_API_TOKEN", TOKEN)])
        .await;
    let foreign = insert_foreign_cname(h, "foreign.example.com");
    create_service(h, "web", 80, json!({}), json!({})).await;
    create_binding(h, "web", json!([{"kind": "Service", "name": "web"}])).await;
    h.create_tunnel(
        "edge",
        h.spec(API_SECRET, json!({"newTunnel": {"name": "edge"}})),
    )
    .await;
    h.wait_reason(&h.tunnels(), "edge", "Ready").await;
    wait_records(h, "web.example.com", 1).await;
    wait_records(h, "_managed.web.example.com", 1).await;
    foreign
}

async fn set_domain(h: &Harness, domain: &str) {
    h.tunnels()
        .patch(
            "edge",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"cloudflare": {"domain": domain}}})),
        )
        .await
        .expect("change the domain");
}

async fn wait_zone_records(h: &Harness, zone: &str, wanted: Vec<(String, String)>) {
    let waited = poll_until(&format!("records in {zone}"), WAIT, POLL, || async {
        (names_in(h, zone) == wanted).then_some(())
    })
    .await;
    if let Err(e) = waited {
        panic!("{e}; {zone} holds {:?}", names_in(h, zone));
    }
}

async fn wait_previous_zones(h: &Harness, wanted: Option<Vec<ZoneRef>>) -> Tunnel {
    poll_until("status.previousZones", WAIT, POLL, || async {
        let t = h.tunnels().get("edge").await.ok()?;
        let previous = t.status.as_ref().and_then(|s| s.previous_zones.clone());
        (previous == wanted).then_some(t)
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"))
}

/// Status naming `zone` with no previous zone left. The records can move before the status
/// write that records the new zone lands, and previousZones is empty before that write too, so
/// both are waited for.
async fn wait_moved_to(h: &Harness, zone: &str) -> TunnelStatus {
    poll_until(
        "status: the new zone, no previous zone",
        WAIT,
        POLL,
        || async {
            let status = h.tunnels().get("edge").await.ok()?.status?;
            (status.zone_domain.as_deref() == Some(zone) && status.previous_zones.is_none())
                .then_some(status)
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"))
}

fn old_zone(h: &Harness) -> ZoneRef {
    ZoneRef {
        zone_id: h.sim.zone_id(OLD).expect("old zone"),
        zone_domain: OLD.to_string(),
    }
}

#[tokio::test]
async fn a_domain_change_moves_the_records_to_the_new_zone_and_leaves_foreign_ones() {
    let h = start("tr-dom-move").await;
    let foreign = routed_tunnel_in_old_zone(&h).await;
    set_domain(&h, NEW).await;
    wait_zone_records(&h, NEW, ours(NEW)).await;
    let foreign_only = vec![("CNAME".to_string(), "foreign.example.com".to_string())];
    wait_zone_records(&h, OLD, foreign_only).await;
    let kept = h.sim.dns_records(OLD);
    assert_eq!(kept[0].id, foreign, "the foreign record is untouched");
    assert_eq!(kept[0].content, "elsewhere.example.net");
    let status = wait_moved_to(&h, NEW).await;
    assert_eq!(status.zone_id, h.sim.zone_id(NEW));
}

#[tokio::test]
async fn an_old_zone_not_cleaned_yet_is_cleaned_after_a_restart_or_by_the_deletion() {
    let mut h = start("tr-dom-restart").await;
    routed_tunnel_in_old_zone(&h).await;
    // Cloudflare refuses every DNS read: the old zone cannot be cleaned for now.
    h.sim
        .inject(Operation::ListDnsRecords, Fault::fail_next(1_000_000, 500));
    set_domain(&h, NEW).await;
    wait_previous_zones(&h, Some(vec![old_zone(&h)])).await;
    assert_eq!(names_in(&h, OLD).len(), 3, "nothing removed yet");
    // cftunnel stops between the two steps; the zone to clean is in status, not in memory.
    h.stop_operator();
    h.sim.clear_faults();
    h.start_operator();
    wait_zone_records(&h, NEW, ours(NEW)).await;
    wait_zone_records(
        &h,
        OLD,
        vec![("CNAME".to_string(), "foreign.example.com".to_string())],
    )
    .await;
    wait_previous_zones(&h, None).await;

    // Moved back while the DNS task cannot clean: the deletion removes the records everywhere.
    h.sim
        .inject(Operation::ListDnsRecords, Fault::fail_next(1_000_000, 500));
    set_domain(&h, OLD).await;
    let new_zone = ZoneRef {
        zone_id: h.sim.zone_id(NEW).expect("new zone"),
        zone_domain: NEW.to_string(),
    };
    wait_previous_zones(&h, Some(vec![new_zone])).await;
    h.stop_operator();
    h.sim.clear_faults();
    h.tunnels()
        .delete("edge", &DeleteParams::default())
        .await
        .expect("delete");
    h.start_operator();
    h.wait_gone(&h.tunnels(), "edge").await;
    assert_eq!(names_in(&h, NEW), Vec::<(String, String)>::new());
    assert_eq!(
        names_in(&h, OLD),
        vec![("CNAME".to_string(), "foreign.example.com".to_string())]
    );
}

#[tokio::test]
async fn a_domain_change_leaves_a_hostname_of_a_third_zone_in_place_and_deletion_cleans_every_zone()
{
    const THIRD: &str = "example.net";
    let h = Harness::start_in_zones("tr-dom-third", &[OLD, NEW, THIRD]).await;
    routed_tunnel_in_old_zone(&h).await;
    create_binding(
        &h,
        "third",
        json!([{"name": "web", "spec": {"fqdn": "b.example.net"}}]),
    )
    .await;
    let third = vec![
        ("CNAME".to_string(), "b.example.net".to_string()),
        ("TXT".to_string(), "_managed.b.example.net".to_string()),
    ];
    wait_zone_records(&h, THIRD, third.clone()).await;
    set_domain(&h, NEW).await;
    wait_zone_records(&h, NEW, ours(NEW)).await;
    wait_zone_records(
        &h,
        OLD,
        vec![("CNAME".to_string(), "foreign.example.com".to_string())],
    )
    .await;
    // The old zone is released although the tunnel still has records in a zone not its own;
    // that zone stays listed, as every zone holding records of the tunnel is.
    let third_zone = ZoneRef {
        zone_id: h.sim.zone_id(THIRD).expect("third zone"),
        zone_domain: THIRD.to_string(),
    };
    poll_until(
        "status: the new zone, the third zone listed",
        WAIT,
        POLL,
        || async {
            let status = h.tunnels().get("edge").await.ok()?.status?;
            (status.zone_domain.as_deref() == Some(NEW)
                && status.previous_zones.as_deref() == Some(std::slice::from_ref(&third_zone)))
            .then_some(())
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(names_in(&h, THIRD), third, "the third zone's route is kept");

    h.tunnels()
        .delete("edge", &DeleteParams::default())
        .await
        .expect("delete");
    h.wait_gone(&h.tunnels(), "edge").await;
    assert_eq!(names_in(&h, NEW), Vec::<(String, String)>::new());
    assert_eq!(names_in(&h, THIRD), Vec::<(String, String)>::new());
    assert_eq!(
        names_in(&h, OLD),
        vec![("CNAME".to_string(), "foreign.example.com".to_string())]
    );
}
