//! A zone at its record quota: the hostnames that fit land (oldest route first), the others are
//! reported over quota, and what Cloudflare answered keeps the next syncs from writing what
//! must fail.
use std::collections::BTreeMap;

use cftunnel::dns_sync::ZoneDnsReport;
use cftunnel_policy::dns::{QuotaBasis, TunnelDns, ZoneDns};
use cftunnel_policy::routes::{Age, SourceKind, SourceRef};
use cftunnel_sim::Operation;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::json;

use crate::harness::{Env, ID_A, ZONE, tunnel, zone};

/// `h000`…: `n` hostnames, routed by bindings created in reverse order (the last is the oldest).
fn routed(n: usize) -> (TunnelDns, BTreeMap<String, Age>) {
    let hosts: Vec<String> = (0..n).map(|i| format!("h{i:03}.{ZONE}")).collect();
    let mut edge = tunnel("edge", ID_A, &[]);
    edge.hostnames = hosts.iter().cloned().collect();
    let since = hosts
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let source = SourceRef {
                kind: SourceKind::TunnelBinding,
                namespace: "shop".into(),
                name: format!("b{i:03}"),
                uid: format!("uid-{i}"),
            };
            let created = jiff::Timestamp::from_second(1_000_000 - i as i64)
                .unwrap_or(jiff::Timestamp::UNIX_EPOCH);
            (h.clone(), Age::new(Some(Time(created)), &source))
        })
        .collect();
    (edge, since)
}

fn aged(tunnels: Vec<TunnelDns>, since: &BTreeMap<String, Age>) -> ZoneDns {
    ZoneDns {
        since: since.clone(),
        ..zone(tunnels)
    }
}

/// Hostnames with a CNAME in the zone, sorted.
fn published(env: &Env) -> Vec<String> {
    let mut names: Vec<String> = env
        .records()
        .into_iter()
        .filter(|r| r.record_type == "CNAME")
        .map(|r| r.name)
        .collect();
    names.sort();
    names
}

fn over(report: &ZoneDnsReport) -> Vec<String> {
    let mut names: Vec<String> = report.tunnels[0]
        .over_quota
        .iter()
        .map(|o| o.hostname.clone())
        .collect();
    names.sort();
    names
}

fn names(range: std::ops::Range<usize>) -> Vec<String> {
    range.map(|i| format!("h{i:03}.{ZONE}")).collect()
}

#[tokio::test]
async fn a_full_free_zone_publishes_the_oldest_hostnames_that_fit_then_writes_nothing_that_must_fail()
 {
    let env = Env::batched();
    // A Free zone (its plan says so) holding 180 records of others, 20 left of its 200.
    assert!(env.sim.set_zone_plan(ZONE, "free"));
    assert!(env.sim.set_zone_record_quota(ZONE, Some(200)));
    for i in 0..180 {
        env.seed(json!({"type": "A", "name": format!("a{i}.{ZONE}"), "content": "192.0.2.1"}));
    }
    let (edge, since) = routed(15);
    let desired = aged(vec![edge.clone()], &since);
    let report = env.sync(&desired).await;

    // The candidates cannot see the A records: the 30 records go out, Cloudflare refuses
    // (81045), the halves that fit land. Oldest first: h014 … h005.
    assert_eq!(published(&env), names(5..15));
    assert_eq!(over(&report), names(0..5));
    assert!(
        report.tunnels[0].errors.is_empty(),
        "{:?}",
        report.tunnels[0].errors
    );
    assert_eq!(env.records().len(), 200);
    let refused = env
        .sim
        .request_log()
        .iter()
        .filter(|e| e.operation == Some(Operation::BatchDnsRecords) && e.status == 400)
        .count();
    // Refused: all 15, h007…h000, h007…h004, h005 + h004, h004; then h003…h000 are not sent.
    assert_eq!(refused, 5, "refused batches");
    let message = report.tunnels[0].over_quota[0].to_string();
    assert!(
        message.contains("zone example.com is at its Cloudflare record quota (it holds 200 records; 200 records is the quota reported for its plan, Free Website)"),
        "{message}"
    );
    assert!(message.contains("--no-dns-txt-records"), "{message}");
    assert!(
        matches!(
            report.tunnels[0].over_quota[0].quota,
            Some((200, QuotaBasis::Confirmed { .. }))
        ),
        "the refusal at 200 confirms the plan's figure"
    );

    // Nothing changed: the zone is counted (one more read), nothing is written.
    env.reset();
    let again = env.sync(&desired).await;
    assert_eq!(over(&again), names(0..5));
    assert_eq!(
        (env.writes(), env.reads()),
        (0, 3),
        "{:?}",
        env.sim.request_log()
    );

    // Three published hostnames go: their six records make room for the three oldest waiting.
    env.reset();
    let mut fewer = edge.clone();
    for gone in names(12..15) {
        fewer.hostnames.remove(&gone);
    }
    let report = env.sync(&aged(vec![fewer], &since)).await;
    assert_eq!(published(&env), names(2..12));
    assert_eq!(over(&report), names(0..2));
    assert_eq!(
        env.sim.calls(Operation::BatchDnsRecords),
        2,
        "one batch and its DnsId patches"
    );
    env.assert_contract();
}

#[tokio::test]
async fn hostnames_beyond_the_reported_quota_are_tried_once_then_held_back() {
    let env = Env::batched();
    assert!(env.sim.set_zone_plan(ZONE, "free"));
    assert!(env.sim.set_zone_record_quota(ZONE, Some(200)));
    let (edge, since) = routed(104);
    let report = env.sync(&aged(vec![edge], &since)).await;
    // 208 records for a Free zone: counted (empty), the 100 oldest fill its 200, the 4 others
    // go in one batch of their own, refused: the reported figure is confirmed.
    assert_eq!(published(&env), names(4..104));
    assert_eq!(over(&report), names(0..4));
    let sizes: Vec<(u16, usize)> = env
        .sim
        .request_log()
        .iter()
        .filter(|e| e.operation == Some(Operation::BatchDnsRecords))
        .map(|e| {
            let body = e.request_body.clone().unwrap_or_default();
            let posts = body["posts"].as_array().map_or(0, Vec::len);
            let patches = body["patches"].as_array().map_or(0, Vec::len);
            (e.status, posts + patches)
        })
        .collect();
    assert_eq!(sizes, vec![(200, 200), (400, 8), (200, 100)]);
    assert_eq!(env.sim.calls(Operation::GetZone), 1);
}

#[tokio::test]
async fn a_zone_holding_more_than_its_reported_quota_gets_every_record() {
    // An older Free zone with a larger quota: the figure is tried once and proved wrong.
    let env = Env::batched();
    assert!(env.sim.set_zone_plan(ZONE, "free"));
    let (edge, since) = routed(110);
    let report = env.sync(&aged(vec![edge.clone()], &since)).await;
    assert!(
        report.tunnels[0].is_clean(),
        "{:?}",
        report.tunnels[0].over_quota
    );
    assert_eq!(env.records().len(), 220);

    env.reset();
    let (more, since) = routed(120);
    let report = env.sync(&aged(vec![more], &since)).await;
    assert!(report.tunnels[0].is_clean());
    assert_eq!(env.records().len(), 240);
    assert_eq!(
        env.reads(),
        2,
        "a figure proved wrong costs no count any more"
    );
}

#[tokio::test]
async fn one_record_at_a_time_a_full_zone_costs_one_refused_create() {
    let env = Env::new();
    assert!(env.sim.set_zone_plan(ZONE, "free"));
    assert!(env.sim.set_zone_record_quota(ZONE, Some(7)));
    let (edge, since) = routed(5);
    let desired = aged(vec![edge], &since);
    let report = env.sync(&desired).await;
    // h004, h003, h002 land (6 records); h001's CNAME is the 7th, its TXT is refused and the CNAME
    // taken back; h000 is not tried.
    assert_eq!(published(&env), names(2..5));
    assert_eq!(over(&report), names(0..2));
    assert_eq!(env.sim.calls(Operation::CreateDnsRecord), 8);
    assert_eq!(env.sim.calls(Operation::DeleteDnsRecord), 1);
    let message = report.tunnels[0].over_quota[0].to_string();
    assert!(
        message.contains("(it holds 6 records and Cloudflare refuses more, code 81045)"),
        "{message}"
    );

    env.reset();
    let again = env.sync(&desired).await;
    assert_eq!(over(&again), names(0..2));
    assert_eq!(env.writes(), 0, "{:?}", env.sim.request_log());
}

#[tokio::test]
async fn without_txt_records_a_free_zone_holds_twice_the_hostnames() {
    let env = Env::batched();
    assert!(env.sim.set_zone_plan(ZONE, "free"));
    assert!(env.sim.set_zone_record_quota(ZONE, Some(200)));
    let (mut edge, since) = routed(150);
    edge.txt_records = false;
    let report = env.sync(&aged(vec![edge], &since)).await;
    assert!(
        report.tunnels[0].is_clean(),
        "{:?}",
        report.tunnels[0].over_quota
    );
    assert_eq!(published(&env).len(), 150);
}
