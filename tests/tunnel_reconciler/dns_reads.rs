//! A zone is read once while routes keep coming (docs/design.md §3.12): a DNS sync that wrote
//! hands the records it knows to the group's next sync, and the `DnsId` patches a sync leaves to
//! a next one already on its way all land.
use std::time::Duration;

use cftunnel_policy::dns::ManagedTxt;
use cftunnel_sim::{Operation, SimDnsRecord};
use cftunnel_testenv::poll_until;
use serde_json::json;

use crate::harness::{Harness, POLL, TOKEN, WAIT};
use crate::routes::{API_SECRET, ZONE, create_binding, create_service, records, wait_records};

async fn ready_edge(h: &Harness) {
    h.create_api_secret(API_SECRET, &[("CLOUDFLARE_API_TOKEN", TOKEN)])
        .await;
    create_service(h, "web", 80, json!({}), json!({})).await;
    h.create_tunnel(
        "edge",
        h.spec(API_SECRET, json!({"newTunnel": {"name": "edge"}})),
    )
    .await;
    h.wait_reason(&h.tunnels(), "edge", "Ready").await;
}

async fn bind(h: &Harness, i: usize) {
    create_binding(
        h,
        &format!("app{i}"),
        json!([{"name": "web", "spec": {"fqdn": format!("app{i}.{ZONE}")}}]),
    )
    .await;
}

/// The `DnsId` of the `_managed` TXT of `hostname`, and the id of its CNAME.
fn dns_id_and_cname(h: &Harness, hostname: &str) -> (Option<String>, Option<String>) {
    let cname = records(h, hostname)
        .into_iter()
        .find(|r| r.record_type == "CNAME")
        .map(|r| r.id);
    let txt: Option<SimDnsRecord> = records(h, &format!("_managed.{hostname}"))
        .into_iter()
        .find(|r| r.record_type == "TXT");
    let dns_id = txt
        .and_then(|t| ManagedTxt::parse(&t.content))
        .map(|t| t.dns_id);
    (dns_id, cname)
}

/// Waits until the `_managed` TXT of `hostname` names its CNAME's id: the sync that created
/// them is done, its `DnsId` patch too (it may ride with a later batch, `dns_sync/batched.rs`).
pub(crate) async fn wait_dns_id(h: &Harness, hostname: &str) {
    poll_until("the TXT naming its CNAME", WAIT, POLL, || async {
        let (dns_id, cname) = dns_id_and_cname(h, hostname);
        (cname.is_some() && dns_id == cname).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}: {hostname}; zone holds {:?}", h.sim.dns_records(ZONE)));
}

/// Every hostname's TXT names its CNAME's id.
async fn wait_dns_ids(h: &Harness, count: usize) {
    for i in 0..count {
        wait_dns_id(h, &format!("app{i}.{ZONE}")).await;
    }
}

#[tokio::test]
async fn routes_added_one_by_one_read_the_zone_once_and_every_txt_names_its_cname() {
    let h = Harness::start("tr-dns-reads").await;
    ready_edge(&h).await;
    const ROUTES: usize = 4;
    for i in 0..ROUTES {
        bind(&h, i).await;
        wait_records(&h, &format!("app{i}.{ZONE}"), 1).await;
    }
    wait_dns_ids(&h, ROUTES).await;
    // The first sync reads the zone's candidates (a page of CNAMEs, a page of TXTs); each later
    // one starts from what the one before it wrote.
    assert_eq!(
        h.sim.calls(Operation::ListDnsRecords),
        2,
        "{ROUTES} routes, each its own sync, read the zone once"
    );
}

#[tokio::test]
async fn routes_arriving_while_syncs_wait_at_the_pacer_all_land_with_their_dns_ids() {
    let h = Harness::start_with("tr-dns-coalesce", |o| {
        // A call every two seconds: syncs overlap the routes' arrival.
        o.cloudflare_budget = cftunnel_cloudflare::Budget {
            requests: 30,
            window: Duration::from_secs(60),
        };
    })
    .await;
    ready_edge(&h).await;
    const ROUTES: usize = 12;
    for i in 0..ROUTES {
        bind(&h, i).await;
        tokio::time::sleep(Duration::from_millis(700)).await;
    }
    wait_dns_ids(&h, ROUTES).await;
    for i in 0..ROUTES {
        let found = records(&h, &format!("app{i}.{ZONE}"));
        assert_eq!(found.len(), 1, "app{i}: {found:?}");
    }
    let batches = h.sim.calls(Operation::BatchDnsRecords);
    eprintln!("{batches} batches for {ROUTES} routes");
    assert!(
        batches < 2 * ROUTES as u64,
        "{batches} batches for {ROUTES} routes arriving one by one"
    );
}

#[tokio::test]
async fn a_route_added_at_rest_after_a_restart_reads_no_page() {
    let mut h = Harness::start("tr-dns-rest").await;
    ready_edge(&h).await;
    bind(&h, 0).await;
    wait_dns_ids(&h, 1).await;
    let before = h.sim.calls(Operation::ListDnsRecords);
    // A new term syncs the zone from a read (a page of CNAMEs, a page of TXTs) and writes
    // nothing: the copy it keeps serves the next route's sync.
    h.start_operator();
    let at_rest = poll_until(
        "the restart's sync to read the zone",
        WAIT,
        POLL,
        || async {
            let reads = h.sim.calls(Operation::ListDnsRecords);
            (reads >= before + 2).then_some(reads)
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    bind(&h, 1).await;
    wait_dns_ids(&h, 2).await;
    assert_eq!(
        h.sim.calls(Operation::ListDnsRecords),
        at_rest,
        "the route's sync started from the restart's copy, with no read"
    );
    for i in 0..2 {
        let found = records(&h, &format!("app{i}.{ZONE}"));
        assert_eq!(found.len(), 1, "app{i}: {found:?}");
    }
}
