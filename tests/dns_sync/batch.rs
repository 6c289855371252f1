//! Batched DNS writes: as few requests as the zone plan's limit allows, a hostname's CNAME and
//! TXT always in one transaction, refusals narrowed down to the hostname refused, and the
//! fallback to single-record writes where the batch call is unavailable.
use std::sync::{Arc, Mutex};

use cftunnel::dns_sync::WriteKind;
use cftunnel_policy::dns::{BatchMode, ConflictReason, ManagedTxt};
use cftunnel_sim::{Fault, Operation, Simulator};
use serde_json::{Value, json};

use crate::harness::{Env, ID_A, ZONE, client_on, hostnames, target, tunnel, zone};

/// Records in each batch request sent, in order (`None` for other requests).
fn batch_sizes(env: &Env) -> Vec<usize> {
    env.sim
        .request_log()
        .iter()
        .filter(|e| e.operation == Some(Operation::BatchDnsRecords))
        .map(|e| {
            let body = e.request_body.clone().unwrap_or(Value::Null);
            ["deletes", "patches", "puts", "posts"]
                .iter()
                .map(|k| body[k].as_array().map_or(0, Vec::len))
                .sum()
        })
        .collect()
}

/// Every routed hostname has its CNAME to the tunnel and a TXT naming that CNAME's id.
pub(crate) fn assert_routed(env: &Env, names: impl IntoIterator<Item = String>) {
    for name in names {
        let cname = env
            .record("CNAME", &name)
            .unwrap_or_else(|| panic!("CNAME {name}"));
        assert_eq!(cname.content, target(ID_A));
        let txt = env
            .record("TXT", &format!("_managed.{name}"))
            .unwrap_or_else(|| panic!("TXT of {name}"));
        assert_eq!(
            ManagedTxt::parse(&txt.content).map(|t| t.dns_id),
            Some(cname.id.clone()),
            "the TXT of {name} names its CNAME"
        );
    }
}

#[tokio::test]
async fn new_routes_cost_one_batch_per_200_records_on_free_plus_the_dns_id_patches() {
    let env = Env::batched();
    let mut edge = tunnel("edge", ID_A, &[]);
    edge.hostnames = hostnames("app", 300);
    let report = env.sync(&zone(vec![edge.clone()])).await;
    assert!(
        report.tunnels[0].is_clean(),
        "{:?}",
        report.tunnels[0].errors
    );
    // 600 records in batches of 200 (100 hostnames each), then 300 TXT patches.
    assert_eq!(batch_sizes(&env), vec![200, 200, 200, 200, 100]);
    assert_eq!(env.writes(), 5);
    assert_eq!(report.writes, 5);
    assert_eq!(env.sim.calls(Operation::CreateDnsRecord), 0);
    assert_eq!(
        env.sim.calls(Operation::GetZone),
        1,
        "the plan is read once"
    );
    assert_routed(&env, edge.hostnames.iter().cloned());
    assert_eq!(report.tunnels[0].records_left, 600);
    let kinds = report.tunnels[0]
        .written
        .iter()
        .filter(|w| w.kind == WriteKind::Create)
        .count();
    assert_eq!(kinds, 600);

    // Nothing changed: the candidate reads only, the plan is remembered.
    env.reset();
    env.sync(&zone(vec![edge.clone()])).await;
    assert_eq!((env.writes(), env.sim.total_calls()), (0, 2));

    // Removing 150 hostnames deletes 300 records in two batches (150 + 150 would not fit one).
    env.reset();
    let kept: Vec<String> = edge.hostnames.iter().take(150).cloned().collect();
    edge.hostnames = kept.iter().cloned().collect();
    let report = env.sync(&zone(vec![edge])).await;
    assert!(report.tunnels[0].is_clean());
    assert_eq!(batch_sizes(&env), vec![200, 100]);
    assert_eq!(env.records().len(), 300);
    assert_routed(&env, kept);
    env.assert_contract();
}

#[tokio::test]
async fn paid_plans_batch_up_to_3500_records() {
    let env = Env::batched();
    assert!(env.sim.set_zone_plan(ZONE, "pro"));
    let mut edge = tunnel("edge", ID_A, &[]);
    edge.hostnames = hostnames("app", 2_000);
    let report = env.sync(&zone(vec![edge.clone()])).await;
    assert!(
        report.tunnels[0].is_clean(),
        "{:?}",
        report.tunnels[0].errors
    );
    assert_eq!(batch_sizes(&env), vec![3_500, 500, 2_000]);
    assert_eq!(env.records().len(), 4_000);
    assert_routed(&env, edge.hostnames.iter().take(5).cloned());
}

#[tokio::test]
async fn one_refused_record_changes_nothing_and_the_other_hostnames_land_after_the_split() {
    let env = Env::batched();
    // An A record the candidate reads cannot see: the CNAME planned there is refused (81053).
    let a = env.seed(json!({"type": "A", "name": "app-5.example.com", "content": "192.0.2.1"}));
    let mut edge = tunnel("edge", ID_A, &[]);
    edge.hostnames = hostnames("app", 8);
    let report = env.sync(&zone(vec![edge.clone()])).await;

    let statuses: Vec<u16> = env
        .sim
        .request_log()
        .iter()
        .filter(|e| e.operation == Some(Operation::BatchDnsRecords))
        .map(|e| e.status)
        .collect();
    // 8 hostnames refused; the candidates are read again (the A record stays invisible) and
    // the same 8 refused again; halves of 4: app-0..3 land, app-4..7 refused; app-4,5 refused;
    // app-4 lands, app-5 refused (re-read and reported); app-6,7 land; then the DnsId patches.
    assert_eq!(batch_sizes(&env), vec![16, 16, 8, 8, 4, 2, 2, 4, 7]);
    assert_eq!(statuses, vec![400, 400, 200, 400, 400, 200, 400, 200, 200]);
    let conflicts = &report.tunnels[0].conflicts;
    assert_eq!(conflicts.len(), 1, "{conflicts:?}");
    assert_eq!(conflicts[0].hostname, "app-5.example.com");
    assert_eq!(conflicts[0].reason, ConflictReason::Unmanaged);
    assert_eq!(conflicts[0].record.id.as_deref(), Some(a.as_str()));
    assert!(
        report.tunnels[0].errors.is_empty(),
        "{:?}",
        report.tunnels[0].errors
    );
    let landed: Vec<String> = edge
        .hostnames
        .iter()
        .filter(|h| h.as_str() != "app-5.example.com")
        .cloned()
        .collect();
    assert_routed(&env, landed);
    assert!(env.record("CNAME", "app-5.example.com").is_none());
    assert!(env.record("TXT", "_managed.app-5.example.com").is_none());
    assert_eq!(env.records().len(), 1 + 7 * 2);
    env.assert_contract();
}

#[tokio::test]
async fn a_batch_applied_whose_answer_was_lost_costs_one_reread_not_a_split() {
    let env = Env::batched();
    let mut edge = tunnel("edge", ID_A, &[]);
    edge.hostnames = hostnames("app", 8);
    // Applied, then answered 500: the client's retry finds its own records and is refused.
    env.sim
        .inject(Operation::BatchDnsRecords, Fault::fail_after_apply(1, 500));
    let report = env.sync(&zone(vec![edge.clone()])).await;
    assert!(
        report.tunnels[0].is_clean(),
        "{:?}",
        report.tunnels[0].errors
    );
    let statuses: Vec<u16> = env
        .sim
        .request_log()
        .iter()
        .filter(|e| e.operation == Some(Operation::BatchDnsRecords))
        .map(|e| e.status)
        .collect();
    // The lost batch, its refused retry, then (after one read of the candidates) only the
    // DnsId patches of the TXTs the lost batch posted.
    assert_eq!(statuses, vec![500, 400, 200]);
    assert_eq!(batch_sizes(&env), vec![16, 16, 8]);
    assert_routed(&env, edge.hostnames.iter().cloned());
    assert_eq!(env.records().len(), 16);
    env.assert_contract();
}

/// A router that, after every request, checks that each CNAME carrying our comment has its
/// `_managed` TXT, and records each sample where one does not.
fn sampled(sim: &Simulator, gaps: Arc<Mutex<Vec<String>>>) -> axum::Router {
    let sim_after = sim.clone();
    sim.router().layer(axum::middleware::map_response(
        move |response: axum::response::Response| {
            let records = sim_after.dns_records(ZONE);
            let missing: Vec<String> = records
                .iter()
                .filter(|r| r.record_type == "CNAME")
                .filter(|r| {
                    r.comment
                        .as_deref()
                        .is_some_and(|c| c.starts_with("cftunnel "))
                })
                .filter(|c| {
                    let txt = format!("_managed.{}", c.name);
                    !records
                        .iter()
                        .any(|r| r.record_type == "TXT" && r.name == txt)
                })
                .map(|c| c.name.clone())
                .collect();
            if !missing.is_empty() {
                gaps.lock().expect("gaps").push(missing.join(","));
            }
            std::future::ready(response)
        },
    ))
}

/// Creates 40 routes, removes 20, re-points the rest to another tunnel; returns the samples
/// that found a CNAME of ours without its TXT.
async fn gaps_while_routing(batch: BatchMode) -> Vec<String> {
    let mut env = Env::with_mode(batch);
    let gaps = Arc::new(Mutex::new(Vec::new()));
    env.client = client_on(sampled(&env.sim, gaps.clone()));
    let mut edge = tunnel("edge", ID_A, &[]);
    edge.hostnames = hostnames("app", 40);
    assert!(env.sync(&zone(vec![edge.clone()])).await.tunnels[0].is_clean());
    edge.hostnames = hostnames("app", 20);
    assert!(env.sync(&zone(vec![edge.clone()])).await.tunnels[0].is_clean());
    edge.previous_tunnel_ids = vec![ID_A.into()];
    edge.tunnel_id = crate::harness::ID_B.into();
    assert!(env.sync(&zone(vec![edge])).await.tunnels[0].is_clean());
    assert_eq!(env.records().len(), 40);
    gaps.lock().expect("gaps").clone()
}

#[tokio::test]
async fn in_batches_no_cname_of_ours_ever_exists_without_its_txt() {
    assert_eq!(
        gaps_while_routing(BatchMode::Always).await,
        Vec::<String>::new()
    );
    // The same samples do see the gap single-record writes leave after each CNAME create.
    assert!(!gaps_while_routing(BatchMode::Never).await.is_empty());
}

#[tokio::test]
async fn an_unavailable_batch_call_falls_back_to_single_records_once() {
    for status in [404, 405, 403] {
        let env = Env::with_mode(BatchMode::Auto);
        env.sim
            .inject(Operation::BatchDnsRecords, Fault::fail_next(100, status));
        let first = env
            .sync(&zone(vec![tunnel("edge", ID_A, &["app.example.com"])]))
            .await;
        assert!(
            first.tunnels[0].is_clean(),
            "{status}: {:?}",
            first.tunnels[0].errors
        );
        assert_eq!(env.sim.calls(Operation::BatchDnsRecords), 1, "{status}");
        assert_eq!(env.sim.calls(Operation::CreateDnsRecord), 2, "{status}");
        assert_routed(&env, ["app.example.com".to_string()]);

        // Remembered: the next sync writes single records without trying the batch again.
        env.reset();
        let two = zone(vec![tunnel(
            "edge",
            ID_A,
            &["app.example.com", "api.example.com"],
        )]);
        assert!(env.sync(&two).await.tunnels[0].is_clean());
        assert_eq!(env.sim.calls(Operation::BatchDnsRecords), 0, "{status}");
        assert_eq!(env.sim.calls(Operation::CreateDnsRecord), 2, "{status}");
    }
}

#[tokio::test]
async fn forced_batches_report_an_unavailable_batch_call_on_the_route() {
    let env = Env::batched();
    env.sim
        .inject(Operation::BatchDnsRecords, Fault::fail_next(100, 405));
    let report = env
        .sync(&zone(vec![tunnel("edge", ID_A, &["app.example.com"])]))
        .await;
    let errors = &report.tunnels[0].errors;
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].hostname, "app.example.com");
    assert_eq!(errors[0].error.status(), Some(405));
    assert_eq!(errors[0].skipped, 1, "the TXT travelled with the CNAME");
    assert_eq!(env.sim.calls(Operation::CreateDnsRecord), 0);
    assert!(env.records().is_empty());
}

#[tokio::test]
async fn an_apex_route_gets_a_proxied_cname_at_the_apex_and_its_txt_at_managed_apex() {
    for mode in [BatchMode::Never, BatchMode::Always] {
        let env = Env::with_mode(mode);
        let apex = zone(vec![tunnel(
            "edge",
            ID_A,
            &["example.com", "www.example.com"],
        )]);
        let report = env.sync(&apex).await;
        assert!(
            report.tunnels[0].is_clean(),
            "{mode}: {:?}",
            report.tunnels[0]
        );
        let cname = env.record("CNAME", "example.com").expect("apex CNAME");
        assert!(cname.proxied, "Cloudflare flattens a proxied apex CNAME");
        assert_eq!(cname.content, target(ID_A));
        assert_routed(
            &env,
            ["example.com".to_string(), "www.example.com".to_string()],
        );
        // Nothing to do the second time; removing the apex route removes both records.
        env.reset();
        env.sync(&apex).await;
        assert_eq!(env.writes(), 0, "{mode}");
        let www = zone(vec![tunnel("edge", ID_A, &["www.example.com"])]);
        assert!(env.sync(&www).await.tunnels[0].is_clean());
        assert!(env.record("CNAME", "example.com").is_none(), "{mode}");
        assert!(
            env.record("TXT", "_managed.example.com").is_none(),
            "{mode}"
        );
        env.assert_contract();
    }
}

/// The CNAME create passes, the TXT create after it is refused (400: not retried).
fn refuse_the_txt(env: &Env) {
    env.sim
        .inject(Operation::CreateDnsRecord, Fault::fail_after(1, 400));
}

#[tokio::test]
async fn one_record_at_a_time_a_refused_txt_takes_back_the_cname_created_before_it() {
    let env = Env::new();
    refuse_the_txt(&env);
    let zone = zone(vec![tunnel("edge", ID_A, &["app.example.com"])]);
    let report = env.sync(&zone).await;
    assert_eq!(report.tunnels[0].errors.len(), 1, "{:?}", report.tunnels[0]);
    assert_eq!(env.sim.calls(Operation::CreateDnsRecord), 2);
    assert_eq!(env.sim.calls(Operation::DeleteDnsRecord), 1);
    assert!(
        env.records().is_empty(),
        "no CNAME left without its TXT: {:?}",
        env.records()
    );
    env.sim.clear_faults();
    let again = env.sync(&zone).await;
    assert!(again.tunnels[0].is_clean(), "{:?}", again.tunnels[0]);
    assert!(env.record("CNAME", "app.example.com").is_some());
    assert!(env.record("TXT", "_managed.app.example.com").is_some());
}

#[tokio::test]
async fn after_the_batch_call_falls_back_a_refused_txt_takes_back_its_cname_too() {
    let env = Env::with_mode(BatchMode::Auto);
    env.sim
        .inject(Operation::BatchDnsRecords, Fault::fail_next(100, 405));
    refuse_the_txt(&env);
    let zone = zone(vec![tunnel("edge", ID_A, &["app.example.com"])]);
    let report = env.sync(&zone).await;
    assert!(
        !report.tunnels[0].errors.is_empty(),
        "{:?}",
        report.tunnels[0]
    );
    assert!(
        env.records().is_empty(),
        "no CNAME left without its TXT: {:?}",
        env.records()
    );
}
