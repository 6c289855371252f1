//! Ownership against the simulator: foreign records, take-over, repairs, re-pointing,
//! deletions, wildcards, and "record exists" on create.
use cftunnel::dns_sync::WriteKind;
use cftunnel_policy::dns::{ConflictReason, DnsOptions, ManagedTxt, ownership_marker};
use cftunnel_sim::{Fault, Operation};
use serde_json::json;

use crate::harness::{Env, ID_A, ID_B, ID_OLD, identity, target, tunnel, zone};

fn overwrite() -> DnsOptions {
    DnsOptions {
        overwrite_unmanaged: true,
        ..DnsOptions::default()
    }
}

#[tokio::test]
async fn a_foreign_cname_is_never_touched_and_is_reported() {
    let env = Env::new();
    env.seed(json!({"type": "CNAME", "name": "app.example.com", "content": "lb.example.net"}));
    let desired = zone(vec![tunnel("edge", ID_A, &["app.example.com"])]);
    let before = env.records();
    let report = env.sync(&desired).await;
    assert_eq!(env.records(), before);
    assert_eq!(
        env.writes(),
        0,
        "seen in the CNAME walk: no create is even tried"
    );
    let problems = report.tunnels[0].problems();
    assert_eq!(
        problems,
        vec![
            "DNS record CNAME app.example.com -> lb.example.net is not managed by Tunnel \
             shop/edge: it was not created by cftunnel; delete or rename it, or run cftunnel \
             with --overwrite-unmanaged-dns"
                .to_string()
        ]
    );
}

#[tokio::test]
async fn with_overwrite_a_foreign_cname_is_replaced() {
    let env = Env::new();
    let id = env.seed(json!({"type": "CNAME", "name": "app.example.com",
        "content": "lb.example.net", "tags": ["team:web"]}));
    let desired = zone(vec![tunnel("edge", ID_A, &["app.example.com"])]);
    let report = env.sync_with(&desired, &overwrite()).await;
    assert!(report.tunnels[0].is_clean(), "{:?}", report.tunnels[0]);
    assert_eq!(env.sim.calls(Operation::UpdateDnsRecord), 1, "a PUT");
    let cname = env.record("CNAME", "app.example.com").expect("CNAME");
    assert_eq!(
        (cname.id.as_str(), cname.content.as_str()),
        (id.as_str(), target(ID_A).as_str())
    );
    assert!(
        cname.tags.is_empty(),
        "nothing of the former owner survives"
    );
    assert!(cname.proxied);
    let kinds: Vec<WriteKind> = report.tunnels[0].written.iter().map(|w| w.kind).collect();
    assert_eq!(kinds, vec![WriteKind::TakeOver, WriteKind::Create]);
}

#[tokio::test]
async fn record_exists_on_create_rereads_the_name_then_reports_or_replaces() {
    let env = Env::new();
    env.seed(json!({"type": "A", "name": "app.example.com", "content": "192.0.2.1"}));
    let desired = zone(vec![tunnel("edge", ID_A, &["app.example.com"])]);
    let report = env.sync(&desired).await;
    assert_eq!(
        env.sim.calls(Operation::CreateDnsRecord),
        1,
        "refused with 81053"
    );
    assert_eq!(
        env.reads(),
        3,
        "two candidate reads and one re-read of the name"
    );
    let tunnel = &report.tunnels[0];
    assert!(tunnel.errors.is_empty(), "{:?}", tunnel.errors);
    assert_eq!(tunnel.conflicts.len(), 1);
    assert_eq!(tunnel.conflicts[0].record.record_type, "A");
    assert_eq!(tunnel.conflicts[0].reason, ConflictReason::Unmanaged);
    assert!(env.record("A", "app.example.com").is_some());
    env.assert_contract();

    env.reset();
    let report = env.sync_with(&desired, &overwrite()).await;
    assert!(report.tunnels[0].is_clean(), "{:?}", report.tunnels[0]);
    assert!(env.record("A", "app.example.com").is_none());
    assert!(env.record("CNAME", "app.example.com").is_some());
    assert!(env.record("TXT", "_managed.app.example.com").is_some());
    env.assert_contract();
}

#[tokio::test]
async fn a_create_whose_answer_was_lost_adopts_the_record_it_made() {
    let env = Env::new();
    env.sim
        .inject(Operation::CreateDnsRecord, Fault::fail_after_apply(1, 502));
    let desired = zone(vec![tunnel("edge", ID_A, &["app.example.com"])]);
    let report = env.sync(&desired).await;
    assert!(report.tunnels[0].is_clean(), "{:?}", report.tunnels[0]);
    // CNAME: applied but answered 502, retried by the client: 81058 (identical record exists);
    // the name is re-read, the CNAME found ours, and only the TXT is left to create.
    assert_eq!(env.sim.calls(Operation::CreateDnsRecord), 3);
    assert_eq!((report.reads, env.reads()), (3, 3));
    let cnames: Vec<_> = env
        .records()
        .into_iter()
        .filter(|r| r.record_type == "CNAME")
        .collect();
    assert_eq!(cnames.len(), 1);
    let txt = env.record("TXT", "_managed.app.example.com").expect("TXT");
    assert_eq!(
        ManagedTxt::parse(&txt.content).map(|t| t.dns_id),
        Some(cnames[0].id.clone())
    );
}

#[tokio::test]
async fn a_cname_whose_txt_was_lost_is_repaired() {
    let env = Env::new();
    let desired = zone(vec![tunnel("edge", ID_A, &["app.example.com"])]);
    env.sync(&desired).await;
    let txt = env.record("TXT", "_managed.app.example.com").expect("TXT");
    env.client
        .delete_dns_record(&env.zone_id, &txt.id)
        .await
        .expect("delete");
    env.reset();
    env.sync(&desired).await;
    assert_eq!(env.writes(), 1);
    assert_eq!(env.sim.calls(Operation::CreateDnsRecord), 1);
    let cname = env.record("CNAME", "app.example.com").expect("CNAME");
    let txt = env.record("TXT", "_managed.app.example.com").expect("TXT");
    assert_eq!(
        ManagedTxt::parse(&txt.content).map(|t| t.dns_id),
        Some(cname.id)
    );
}

#[tokio::test]
async fn records_of_a_previous_tunnel_id_are_repointed() {
    let env = Env::new();
    env.sync(&zone(vec![tunnel("edge", ID_OLD, &["app.example.com"])]))
        .await;
    let mut recreated = tunnel("edge", ID_A, &["app.example.com"]);
    recreated.previous_tunnel_ids = vec![ID_OLD.into()];
    env.reset();
    let report = env.sync(&zone(vec![recreated])).await;
    assert!(report.tunnels[0].is_clean(), "{:?}", report.tunnels[0]);
    assert_eq!(env.sim.calls(Operation::PatchDnsRecord), 2, "CNAME and TXT");
    assert_eq!(env.writes(), 2);
    let cname = env.record("CNAME", "app.example.com").expect("CNAME");
    assert_eq!(cname.content, target(ID_A));
    let txt = env.record("TXT", "_managed.app.example.com").expect("TXT");
    assert_eq!(
        ManagedTxt::parse(&txt.content).map(|t| t.tunnel_id),
        Some(ID_A.to_string())
    );
}

#[tokio::test]
async fn a_removed_hostname_is_deleted_unless_another_tunnel_still_wants_it() {
    let env = Env::new();
    let before = zone(vec![
        tunnel("edge", ID_A, &["app.example.com", "shared.example.com"]),
        tunnel("backup", ID_B, &["shared.example.com"]),
    ]);
    let report = env.sync(&before).await;
    let backup = &report.tunnels[1];
    assert_eq!(backup.conflicts.len(), 1, "edge is first and keeps it");
    assert_eq!(
        backup.conflicts[0].reason,
        ConflictReason::RoutedByOtherTunnel {
            winner: identity("edge")
        }
    );

    env.reset();
    let after = zone(vec![
        tunnel("edge", ID_A, &[]),
        tunnel("backup", ID_B, &["shared.example.com"]),
    ]);
    let report = env.sync(&after).await;
    assert!(env.record("CNAME", "app.example.com").is_none());
    assert!(env.record("TXT", "_managed.app.example.com").is_none());
    let shared = env.record("CNAME", "shared.example.com").expect("kept");
    assert_eq!(shared.content, target(ID_B));
    assert_eq!(
        shared.comment,
        Some(ownership_marker(&identity("backup"), None))
    );
    assert_eq!(env.sim.calls(Operation::DeleteDnsRecord), 2);
    assert_eq!(env.sim.calls(Operation::PatchDnsRecord), 2, "re-pointed");
    assert_eq!(report.tunnels[0].records_left, 0, "edge may now be deleted");
    assert_eq!(report.tunnels[1].records_left, 2);
    assert!(report.tunnels.iter().all(|t| t.is_clean()));
}

#[tokio::test]
async fn wildcards_get_the_wildcard_txt_name() {
    let env = Env::new();
    let desired = zone(vec![tunnel("edge", ID_A, &["*.apps.example.com"])]);
    let report = env.sync(&desired).await;
    assert!(report.tunnels[0].is_clean(), "{:?}", report.tunnels[0]);
    assert!(env.record("CNAME", "*.apps.example.com").is_some());
    assert!(
        env.record("TXT", "_managed.wildcard.apps.example.com")
            .is_some()
    );
    env.reset();
    env.sync(&desired).await;
    assert_eq!(env.writes(), 0);
}

#[tokio::test]
async fn write_errors_keep_cloudflares_status_and_stop_the_hostname() {
    let env = Env::new();
    env.sim
        .inject(Operation::CreateDnsRecord, Fault::fail_next(1, 403));
    let desired = zone(vec![tunnel("edge", ID_A, &["app.example.com"])]);
    let report = env.sync(&desired).await;
    let errors = &report.tunnels[0].errors;
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].error.status(), Some(403));
    assert_eq!(errors[0].skipped, 1, "no TXT for a CNAME that failed");
    assert!(
        errors[0].to_string().starts_with(&format!(
            "DNS create of CNAME app.example.com -> {} for app.example.com failed: cloudflare \
             dns.create: HTTP 403",
            target(ID_A)
        )),
        "{}",
        errors[0]
    );
    assert!(env.records().is_empty());
}
