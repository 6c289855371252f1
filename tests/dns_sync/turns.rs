//! A DNS batch of creates goes when the pacer lets it go: a sync whose input was overtaken by a
//! newer one sends its oldest and newest batches, then leaves the rest of its creates to the
//! next sync, which starts from its records and plans them with what arrived since.
use cftunnel_policy::dns::ZoneBatching;
use cftunnel_sim::Operation;

use crate::harness::{Env, ID_A, hostnames, tunnel, zone};

const ROUTED: usize = 30;
/// Records per batch: ten hostnames (a CNAME and a TXT each), so thirty make three batches.
const LIMIT: usize = 20;

fn small_batches() -> Env {
    let env = Env::batched();
    env.options
        .batch_memory
        .set(&env.zone_id, ZoneBatching::Limit(LIMIT));
    env.sim.set_batch_limit(Some(LIMIT));
    env
}

#[tokio::test]
async fn a_sync_overtaken_by_a_newer_input_leaves_its_creates_to_the_next_and_all_land() {
    let env = small_batches();
    let mut edge = tunnel("edge", ID_A, &[]);
    edge.hostnames = hostnames("app", ROUTED);
    // Plan order: by name (no route ages given).
    let sorted: Vec<String> = edge.hostnames.iter().cloned().collect();
    let (report, known) = env
        .sync_from(&zone(vec![edge.clone()]), None, &|| true)
        .await;
    assert_eq!(
        env.sim.calls(Operation::BatchDnsRecords),
        2,
        "the oldest and the newest batch, then the rest left"
    );
    assert_eq!(report.left_to_next, 10);
    assert!(report.tunnels[0].is_clean(), "{:?}", report.tunnels[0]);
    let has_cname = |name: &String| env.record("CNAME", name).is_some();
    assert!(sorted[..10].iter().all(has_cname), "the oldest batch");
    assert!(sorted[20..].iter().all(has_cname), "the newest batch");
    assert!(!sorted[10..20].iter().any(has_cname), "the rest waits");
    let known = known.expect("a sync that wrote hands on its records");

    // The next sync, with one route more, plans the rest with it and reads nothing: the 20
    // `DnsId` patches the first left it, then 11 hostnames' creates, then their 11 patches.
    env.reset();
    edge.hostnames.insert("late.example.com".to_string());
    let (report, _) = env
        .sync_from(&zone(vec![edge.clone()]), Some(known), &|| false)
        .await;
    assert_eq!(report.left_to_next, 0);
    assert!(report.tunnels[0].is_clean(), "{:?}", report.tunnels[0]);
    assert_eq!(env.reads(), 0, "the zone was not read again");
    assert_eq!(env.sim.calls(Operation::BatchDnsRecords), 1 + 2 + 1);
    crate::batch::assert_routed(&env, edge.hostnames.iter().cloned());
    env.assert_contract();
}

#[tokio::test]
async fn a_sync_nobody_overtakes_sends_every_batch_it_planned() {
    let env = small_batches();
    let mut edge = tunnel("edge", ID_A, &[]);
    edge.hostnames = hostnames("app", ROUTED);
    let (report, _) = env
        .sync_from(&zone(vec![edge.clone()]), None, &|| false)
        .await;
    assert_eq!(report.left_to_next, 0);
    // 60 creates in three batches, then 30 `DnsId` patches in two.
    assert_eq!(env.sim.calls(Operation::BatchDnsRecords), 3 + 2);
    crate::batch::assert_routed(&env, edge.hostnames.iter().cloned());
}

#[tokio::test]
async fn an_overtaken_sync_still_sends_half_of_its_batches_of_creates_its_oldest_and_newest() {
    let env = small_batches();
    let mut edge = tunnel("edge", ID_A, &[]);
    // Eighty hostnames: eight batches of ten; half of them go, two from each end in turn.
    edge.hostnames = hostnames("app", 80);
    let sorted: Vec<String> = edge.hostnames.iter().cloned().collect();
    let (report, _) = env
        .sync_from(&zone(vec![edge.clone()]), None, &|| true)
        .await;
    assert_eq!(env.sim.calls(Operation::BatchDnsRecords), 4);
    assert_eq!(report.left_to_next, 40);
    let has_cname = |name: &String| env.record("CNAME", name).is_some();
    assert!(sorted[..20].iter().all(has_cname), "the oldest quarter");
    assert!(sorted[60..].iter().all(has_cname), "the newest quarter");
    assert!(!sorted[20..60].iter().any(has_cname), "the middle waits");
}
