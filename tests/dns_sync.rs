//! The DNS sync of docs/design.md §3.3 against the in-process Cloudflare simulator: what each sync
//! writes and what it costs in calls (§8 Cloudflare economy).
#[path = "dns_sync/batch.rs"]
mod batch;
#[path = "dns_sync/harness.rs"]
mod harness;
#[allow(dead_code)] // the contract test uses the rest of it
mod openapi;
#[path = "dns_sync/ownership.rs"]
mod ownership;
#[path = "dns_sync/quota.rs"]
mod quota;
#[path = "dns_sync/turns.rs"]
mod turns;

use cftunnel::dns_sync::WriteKind;
use cftunnel_policy::dns::{DnsOptions, ManagedTxt, managed_txt_name, ownership_marker, quote_txt};
use cftunnel_sim::Operation;
use harness::{Env, ID_A, ID_B, hostnames, identity, target, tunnel, zone};

#[tokio::test]
async fn a_new_route_costs_two_writes_plus_the_candidate_reads() {
    let env = Env::new();
    let report = env
        .sync(&zone(vec![tunnel("edge", ID_A, &["app.example.com"])]))
        .await;
    assert!(report.tunnels[0].is_clean(), "{:?}", report.tunnels[0]);
    assert_eq!(env.sim.calls(Operation::CreateDnsRecord), 2);
    assert_eq!(env.writes(), 2);
    assert_eq!(env.reads(), 2, "one CNAME page, one TXT page");
    let cname = env.record("CNAME", "app.example.com").expect("CNAME");
    assert_eq!(cname.content, target(ID_A));
    assert!(cname.proxied);
    assert_eq!(cname.ttl, 1);
    assert_eq!(cname.comment.as_deref(), Some("cftunnel Tunnel shop/edge"));
    let txt = env.record("TXT", "_managed.app.example.com").expect("TXT");
    assert!(
        txt.content.starts_with("{\"DnsId\":"),
        "the bare JSON object the Go operator decodes: {}",
        txt.content
    );
    assert_eq!(
        ManagedTxt::parse(&txt.content),
        Some(ManagedTxt {
            dns_id: cname.id.clone(),
            tunnel_name: "edge-cf".into(),
            tunnel_id: ID_A.into(),
            owner: None,
        })
    );
    let kinds: Vec<WriteKind> = report.tunnels[0].written.iter().map(|w| w.kind).collect();
    assert_eq!(kinds, vec![WriteKind::Create, WriteKind::Create]);

    env.reset();
    let two = zone(vec![tunnel(
        "edge",
        ID_A,
        &["app.example.com", "api.example.com"],
    )]);
    env.sync(&two).await;
    assert_eq!(
        (env.writes(), env.reads()),
        (2, 2),
        "one more route: 2 writes"
    );
    env.assert_contract();
}

#[tokio::test]
async fn a_sync_with_nothing_changed_costs_only_the_candidate_reads() {
    let env = Env::new();
    let desired = zone(vec![
        tunnel("edge", ID_A, &["app.example.com", "*.apps.example.com"]),
        tunnel("backup", ID_B, &["api.example.com"]),
    ]);
    env.sync(&desired).await;
    env.reset();
    let report = env.sync(&desired).await;
    assert_eq!(env.writes(), 0);
    assert_eq!(env.reads(), 2);
    assert_eq!(
        env.sim.total_calls(),
        2,
        "nothing but the two candidate reads"
    );
    assert!(report.tunnels.iter().all(|t| t.written.is_empty()));
    assert_eq!(report.tunnels[0].records_left, 4);
    assert_eq!(report.tunnels[1].records_left, 2);
    env.assert_contract();
}

#[tokio::test]
async fn a_restart_with_250_routes_costs_pages_of_reads_and_no_write() {
    let mut env = Env::new();
    let mut edge = tunnel("edge", ID_A, &[]);
    edge.hostnames = hostnames("app", 250);
    let desired = zone(vec![edge]);
    let first = env.sync(&desired).await;
    assert_eq!(env.writes(), 500);
    assert_eq!(first.tunnels[0].records_left, 500);

    env.restart();
    env.reset();
    let report = env.sync(&desired).await;
    assert_eq!(env.writes(), 0);
    assert_eq!(report.reads, 2, "250 CNAMEs and 250 TXTs fit one page each");
    assert_eq!(env.sim.total_calls(), 2);

    env.reset();
    let small_pages = DnsOptions {
        page_size: 100,
        ..DnsOptions::default()
    };
    env.sync_with(&desired, &small_pages).await;
    assert_eq!(env.writes(), 0);
    // CNAMEs: page 1 of every CNAME says 3 pages, more than the one target, so the 3 pages of
    // `content=<target>` follow; TXTs: 3 pages.
    assert_eq!(env.reads(), 1 + 3 + 3);
    env.assert_contract();
}

#[tokio::test]
async fn many_tunnels_in_one_zone_share_one_walk_over_the_cnames() {
    let env = Env::new();
    let tunnels = ["a", "b", "c", "d"]
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let id = format!("0000000{i}-0000-4000-8000-000000000000");
            let mut t = tunnel(name, &id, &[]);
            t.hostnames = hostnames(name, 10);
            t
        })
        .collect();
    let desired = zone(tunnels);
    let options = DnsOptions {
        page_size: 10,
        ..DnsOptions::default()
    };
    env.sync_with(&desired, &options).await;
    env.reset();
    env.sync_with(&desired, &options).await;
    assert_eq!(env.writes(), 0);
    // 40 CNAMEs in 4 pages (3 after the first, fewer than the 4 targets), 40 TXTs in 4 pages.
    assert_eq!(env.reads(), 4 + 4);
    let queries: Vec<String> = env.sim.request_log().into_iter().map(|r| r.query).collect();
    assert!(
        queries.iter().all(|q| !q.contains("content=")),
        "{queries:?}"
    );
}

#[tokio::test]
async fn go_operator_records_are_adopted_with_one_patch() {
    let env = Env::new();
    let cname_id = env.seed(serde_json::json!({
        "type": "CNAME", "name": "app.example.com", "content": target(ID_A), "proxied": true, "ttl": 1
    }));
    let go_json = format!(r#"{{"DnsId":"{cname_id}","TunnelName":"edge-cf","TunnelId":"{ID_A}"}}"#);
    env.seed(serde_json::json!({
        "type": "TXT", "name": "_managed.app.example.com", "content": go_json, "ttl": 1
    }));
    let desired = zone(vec![tunnel("edge", ID_A, &["app.example.com"])]);
    let report = env.sync(&desired).await;
    assert!(report.tunnels[0].is_clean(), "{:?}", report.tunnels[0]);
    assert_eq!(env.sim.calls(Operation::PatchDnsRecord), 1);
    assert_eq!(env.writes(), 1, "only the marker is added");
    let cname = env.record("CNAME", "app.example.com").expect("CNAME");
    assert_eq!(cname.id, cname_id);
    assert_eq!(
        cname.comment,
        Some(ownership_marker(&identity("edge"), None))
    );
    let txt = env
        .record("TXT", &managed_txt_name("app.example.com"))
        .expect("TXT");
    assert_eq!(txt.content, go_json, "the Go TXT matches as it is");

    env.reset();
    env.sync(&desired).await;
    assert_eq!(env.writes(), 0);
}

#[tokio::test]
async fn a_quoted_txt_of_an_earlier_version_is_rewritten_once_in_the_go_readable_form() {
    let env = Env::new();
    let cname_id = env.seed(serde_json::json!({
        "type": "CNAME", "name": "app.example.com", "content": target(ID_A), "proxied": true,
        "ttl": 1, "comment": ownership_marker(&identity("edge"), None)
    }));
    let bare = format!(r#"{{"DnsId":"{cname_id}","TunnelName":"edge-cf","TunnelId":"{ID_A}"}}"#);
    env.seed(serde_json::json!({
        "type": "TXT", "name": "_managed.app.example.com", "content": quote_txt(&bare), "ttl": 1
    }));
    let desired = zone(vec![tunnel("edge", ID_A, &["app.example.com"])]);
    let report = env.sync(&desired).await;
    assert!(report.tunnels[0].is_clean(), "{:?}", report.tunnels[0]);
    assert_eq!(env.writes(), 1, "only the TXT is rewritten");
    let txt = env.record("TXT", "_managed.app.example.com").expect("TXT");
    assert_eq!(txt.content, bare);
    env.reset();
    env.sync(&desired).await;
    assert_eq!(env.writes(), 0);
}

#[tokio::test]
async fn a_zone_without_tunnels_costs_nothing() {
    let env = Env::new();
    let report = env.sync(&zone(Vec::new())).await;
    assert!(report.tunnels.is_empty());
    assert_eq!(env.sim.total_calls(), 0);
}
