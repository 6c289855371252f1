//! Planner cases of SPEC §3.3, one behaviour per test, with exact outcomes.
use std::collections::{BTreeSet, HashMap};

use super::*;
use crate::admission::{TunnelIdentity, TunnelKind};
use crate::cloudflare::client::{DnsRecord, NewDnsRecord};

pub(super) const ID_A: &str = "aaaaaaaa-0000-4000-8000-000000000001";
pub(super) const ID_B: &str = "bbbbbbbb-0000-4000-8000-000000000002";
pub(super) const ID_OLD: &str = "0dd0dd00-0000-4000-8000-000000000003";
pub(super) const ZONE: &str = "example.com";

pub(super) fn identity(name: &str) -> TunnelIdentity {
    TunnelIdentity {
        kind: TunnelKind::Tunnel,
        namespace: "shop".into(),
        name: name.into(),
    }
}

pub(super) fn tunnel(name: &str, id: &str, hostnames: &[&str]) -> TunnelDns {
    TunnelDns {
        identity: identity(name),
        tunnel_id: id.into(),
        previous_tunnel_ids: Vec::new(),
        tunnel_name: format!("{name}-cf"),
        hostnames: hostnames.iter().map(|h| h.to_string()).collect(),
        txt_records: true,
    }
}

pub(super) fn zone(tunnels: Vec<TunnelDns>) -> ZoneDns {
    ZoneDns {
        zone_name: ZONE.into(),
        tunnels,
    }
}

pub(super) fn record(
    id: &str,
    record_type: &str,
    name: &str,
    content: &str,
    comment: Option<&str>,
) -> DnsRecord {
    DnsRecord {
        id: id.into(),
        record_type: record_type.into(),
        name: name.into(),
        content: content.into(),
        ttl: Some(1),
        proxied: Some(record_type == "CNAME"),
        proxiable: None,
        comment: comment.map(str::to_string),
        tags: None,
        created_on: None,
        modified_on: None,
        zone_id: None,
        zone_name: None,
    }
}

fn marker(name: &str) -> String {
    ownership_marker(&identity(name), None)
}

fn go_txt(dns_id: &str, tunnel_name: &str, tunnel_id: &str) -> String {
    format!(r#"{{"DnsId":"{dns_id}","TunnelName":"{tunnel_name}","TunnelId":"{tunnel_id}"}}"#)
}

fn from_body(id: String, body: &NewDnsRecord) -> DnsRecord {
    DnsRecord {
        ttl: Some(body.ttl),
        proxied: body.proxied(),
        comment: body.comment.clone(),
        ..record(
            &id,
            body.record_type.as_str(),
            &body.name,
            &body.content,
            None,
        )
    }
}

/// Applies a plan the way Cloudflare would (new ids `new0`, `new1`, …).
pub(super) fn apply(records: &[DnsRecord], plan: &DnsPlan) -> Vec<DnsRecord> {
    let mut out = records.to_vec();
    let mut created: HashMap<String, String> = HashMap::new();
    for (n, change) in plan.changes.iter().enumerate() {
        let cname = created.get(&change.hostname).cloned();
        match &change.action {
            DnsAction::Create(desired) => {
                let id = format!("new{n}");
                let body = desired.body(cname.as_deref()).expect("body");
                if matches!(desired, DesiredRecord::Cname { .. }) {
                    created.insert(change.hostname.clone(), id.clone());
                }
                out.push(from_body(id, &body));
            }
            DnsAction::Update {
                current, desired, ..
            } => {
                let id = current.id.clone().expect("id");
                let body = desired.body(cname.as_deref()).expect("body");
                out.retain(|r| r.id != id);
                out.push(from_body(id, &body));
            }
            DnsAction::Delete { current, .. } => out.retain(|r| Some(&r.id) != current.id.as_ref()),
        }
    }
    out
}

fn plan(zone: &ZoneDns, actual: &[DnsRecord]) -> DnsPlan {
    plan_zone(zone, actual, &DnsOptions::default())
}

fn overwrite() -> DnsOptions {
    DnsOptions {
        overwrite_unmanaged: true,
        ..DnsOptions::default()
    }
}

/// `(kind, type, name)` of every change, for compact assertions.
fn summary(plan: &DnsPlan) -> Vec<(String, String, String)> {
    plan.changes
        .iter()
        .map(|c| {
            let (kind, r) = match &c.action {
                DnsAction::Create(d) => ("create", d.to_ref()),
                DnsAction::Update {
                    current,
                    take_over: true,
                    ..
                } => ("take over", current.clone()),
                DnsAction::Update { current, .. } => ("update", current.clone()),
                DnsAction::Delete { current, .. } => ("delete", current.clone()),
            };
            (kind.to_string(), r.record_type, r.name)
        })
        .collect()
}

fn s(kind: &str, t: &str, name: &str) -> (String, String, String) {
    (kind.into(), t.into(), name.into())
}

#[test]
fn a_new_hostname_gets_a_cname_then_its_txt() {
    let zone = zone(vec![tunnel("edge", ID_A, &["App.Example.com"])]);
    let plan = plan(&zone, &[]);
    assert_eq!(
        summary(&plan),
        vec![
            s("create", "CNAME", "app.example.com"),
            s("create", "TXT", "_managed.app.example.com")
        ]
    );
    let DnsAction::Create(cname) = &plan.changes[0].action else {
        panic!("create expected")
    };
    assert_eq!(
        serde_json::to_value(cname.body(None).unwrap()).unwrap(),
        serde_json::json!({"type": "CNAME", "name": "app.example.com",
            "content": format!("{ID_A}.cfargotunnel.com"), "ttl": 1, "proxied": true,
            "comment": "cftunnel Tunnel shop/edge"})
    );
    let DnsAction::Create(txt) = &plan.changes[1].action else {
        panic!("create expected")
    };
    assert_eq!(txt.body(None), None, "the TXT waits for the CNAME's id");
    assert_eq!(
        txt.body(Some("cname-id")).unwrap().content,
        ManagedTxt {
            dns_id: "cname-id".into(),
            tunnel_name: "edge-cf".into(),
            tunnel_id: ID_A.into(),
            owner: None,
        }
        .to_content()
    );
    let after = apply(&[], &plan);
    assert_eq!(
        plan_zone(&zone, &after, &DnsOptions::default()),
        DnsPlan::default()
    );
}

#[test]
fn go_operator_records_are_adopted_with_one_patch() {
    let zone = zone(vec![tunnel("edge", ID_A, &["app.example.com"])]);
    let actual = [
        record(
            "c1",
            "CNAME",
            "app.example.com",
            &format!("{ID_A}.cfargotunnel.com"),
            None,
        ),
        record(
            "t1",
            "TXT",
            "_managed.app.example.com",
            &go_txt("c1", "edge-cf", ID_A),
            None,
        ),
    ];
    let plan = plan(&zone, &actual);
    assert_eq!(
        summary(&plan),
        vec![s("update", "CNAME", "app.example.com")]
    );
    assert!(plan.conflicts.is_empty());
}

#[test]
fn a_foreign_cname_is_reported_and_left_alone() {
    let zone = zone(vec![tunnel("edge", ID_A, &["app.example.com"])]);
    let actual = [record(
        "c1",
        "CNAME",
        "app.example.com",
        "legacy.example.net",
        None,
    )];
    let plan = plan(&zone, &actual);
    assert!(plan.changes.is_empty());
    assert_eq!(plan.conflicts.len(), 1);
    assert_eq!(
        plan.conflicts[0].to_string(),
        "DNS record CNAME app.example.com -> legacy.example.net is not managed by Tunnel shop/edge: \
         it was not created by cftunnel; delete or rename it, or run cftunnel with \
         --overwrite-unmanaged-dns"
    );
}

#[test]
fn overwrite_takes_a_foreign_cname_over_and_adds_the_txt() {
    let zone = zone(vec![tunnel("edge", ID_A, &["app.example.com"])]);
    let actual = [record(
        "c1",
        "CNAME",
        "app.example.com",
        "legacy.example.net",
        None,
    )];
    let plan = plan_zone(&zone, &actual, &overwrite());
    assert_eq!(
        summary(&plan),
        vec![
            s("take over", "CNAME", "app.example.com"),
            s("create", "TXT", "_managed.app.example.com")
        ]
    );
    let DnsAction::Create(txt) = &plan.changes[1].action else {
        panic!("create expected")
    };
    assert!(
        txt.body(None)
            .unwrap()
            .content
            .contains(r#"\"DnsId\":\"c1\""#)
    );
}

#[test]
fn overwrite_deletes_an_a_record_before_creating_the_cname() {
    let zone = zone(vec![tunnel("edge", ID_A, &["app.example.com"])]);
    let actual = [record("a1", "A", "app.example.com", "192.0.2.1", None)];
    assert_eq!(plan(&zone, &actual).conflicts.len(), 1);
    let plan = plan_zone(&zone, &actual, &overwrite());
    assert_eq!(
        summary(&plan),
        vec![
            s("delete", "A", "app.example.com"),
            s("create", "CNAME", "app.example.com"),
            s("create", "TXT", "_managed.app.example.com")
        ]
    );
}

#[test]
fn a_cname_whose_txt_was_lost_gets_the_txt_back() {
    let zone = zone(vec![tunnel("edge", ID_A, &["app.example.com"])]);
    let target = format!("{ID_A}.cfargotunnel.com");
    let actual = [record(
        "c1",
        "CNAME",
        "app.example.com",
        &target,
        Some(&marker("edge")),
    )];
    let plan = plan(&zone, &actual);
    assert_eq!(
        summary(&plan),
        vec![s("create", "TXT", "_managed.app.example.com")]
    );
}

#[test]
fn records_of_a_previous_tunnel_id_are_repointed() {
    let mut edge = tunnel("edge", ID_A, &["app.example.com"]);
    edge.previous_tunnel_ids = vec![ID_OLD.into()];
    let zone = zone(vec![edge]);
    let old_target = format!("{ID_OLD}.cfargotunnel.com");
    let actual = [
        record(
            "c1",
            "CNAME",
            "app.example.com",
            &old_target,
            Some(&marker("edge")),
        ),
        record(
            "t1",
            "TXT",
            "_managed.app.example.com",
            &go_txt("c1", "edge-cf", ID_OLD),
            None,
        ),
    ];
    let plan = plan(&zone, &actual);
    assert_eq!(
        summary(&plan),
        vec![
            s("update", "CNAME", "app.example.com"),
            s("update", "TXT", "_managed.app.example.com")
        ]
    );
    let after = apply(&actual, &plan);
    let cname = after.iter().find(|r| r.id == "c1").unwrap();
    assert_eq!(cname.content, format!("{ID_A}.cfargotunnel.com"));
}

#[test]
fn a_hostname_no_longer_routed_loses_its_cname_then_its_txt() {
    let zone = zone(vec![tunnel("edge", ID_A, &[])]);
    let target = format!("{ID_A}.cfargotunnel.com");
    let actual = [
        record(
            "t1",
            "TXT",
            "_managed.old.example.com",
            &go_txt("c1", "edge-cf", ID_A),
            None,
        ),
        record("c1", "CNAME", "old.example.com", &target, None),
    ];
    let plan = plan(&zone, &actual);
    assert_eq!(
        summary(&plan),
        vec![
            s("delete", "CNAME", "old.example.com"),
            s("delete", "TXT", "_managed.old.example.com")
        ]
    );
    assert!(plan.changes.iter().all(|c| c.hostname == "old.example.com"));
}

#[test]
fn a_record_another_tunnel_still_wants_is_repointed_not_deleted() {
    let zone = zone(vec![
        tunnel("edge", ID_A, &[]),
        tunnel("backup", ID_B, &["app.example.com"]),
    ]);
    let target = format!("{ID_A}.cfargotunnel.com");
    let actual = [record(
        "c1",
        "CNAME",
        "app.example.com",
        &target,
        Some(&marker("edge")),
    )];
    let plan = plan(&zone, &actual);
    assert_eq!(
        summary(&plan),
        vec![
            s("update", "CNAME", "app.example.com"),
            s("create", "TXT", "_managed.app.example.com")
        ]
    );
    assert_eq!(plan.changes[0].tunnel, identity("backup"));
}

#[test]
fn two_tunnels_routing_one_hostname_the_owner_keeps_it() {
    let target = format!("{ID_B}.cfargotunnel.com");
    let zone = zone(vec![
        tunnel("edge", ID_A, &["app.example.com"]),
        tunnel("backup", ID_B, &["app.example.com"]),
    ]);
    let actual = [record(
        "c1",
        "CNAME",
        "app.example.com",
        &target,
        Some(&marker("backup")),
    )];
    let plan = plan(&zone, &actual);
    assert_eq!(
        summary(&plan),
        vec![s("create", "TXT", "_managed.app.example.com")]
    );
    assert_eq!(plan.conflicts.len(), 1);
    assert_eq!(plan.conflicts[0].tunnel, identity("edge"));
    assert_eq!(
        plan.conflicts[0].to_string(),
        format!(
            "DNS record CNAME app.example.com -> {target} for app.example.com: the hostname is \
             also routed by Tunnel shop/backup, which keeps the record; route the hostname \
             through one tunnel only"
        )
    );
}

#[test]
fn wildcard_txt_names_and_the_exact_hostname_wins_a_shared_txt_name() {
    let zone = zone(vec![tunnel("edge", ID_A, &["*.apps.example.com"])]);
    assert_eq!(
        summary(&plan(&zone, &[])),
        vec![
            s("create", "CNAME", "*.apps.example.com"),
            s("create", "TXT", "_managed.wildcard.apps.example.com")
        ]
    );
    let both = self::zone(vec![tunnel(
        "edge",
        ID_A,
        &["*.apps.example.com", "wildcard.apps.example.com"],
    )]);
    let plan = plan(&both, &[]);
    assert_eq!(
        summary(&plan),
        vec![
            s("create", "CNAME", "*.apps.example.com"),
            s("create", "CNAME", "wildcard.apps.example.com"),
            s("create", "TXT", "_managed.wildcard.apps.example.com")
        ]
    );
    assert_eq!(plan.changes[2].hostname, "wildcard.apps.example.com");
}

#[test]
fn a_txt_claiming_the_hostname_for_another_tunnel_blocks_it() {
    let zone = zone(vec![tunnel("edge", ID_A, &["app.example.com"])]);
    let claim = go_txt("c9", "other", ID_B);
    let actual = [record(
        "t1",
        "TXT",
        "_managed.app.example.com",
        &claim,
        None,
    )];
    let plan = plan(&zone, &actual);
    assert!(plan.changes.is_empty());
    assert_eq!(
        plan.conflicts[0].reason,
        ConflictReason::TxtNamesOtherTunnel {
            tunnel_id: ID_B.into(),
            tunnel_name: "other".into()
        }
    );
}

#[test]
fn txt_off_marks_the_go_cname_before_deleting_the_txt() {
    let mut edge = tunnel("edge", ID_A, &["app.example.com"]);
    edge.txt_records = false;
    let zone = zone(vec![edge]);
    let actual = [
        record(
            "c1",
            "CNAME",
            "app.example.com",
            &format!("{ID_A}.cfargotunnel.com"),
            None,
        ),
        record(
            "t1",
            "TXT",
            "_managed.app.example.com",
            &go_txt("c1", "x", ID_A),
            None,
        ),
    ];
    let plan = plan(&zone, &actual);
    assert_eq!(
        summary(&plan),
        vec![
            s("update", "CNAME", "app.example.com"),
            s("delete", "TXT", "_managed.app.example.com")
        ]
    );
    let after = apply(&actual, &plan);
    assert_eq!(
        plan_zone(&zone, &after, &DnsOptions::default()),
        DnsPlan::default()
    );
}

#[test]
fn foreign_markers_and_unproven_cnames_are_not_ours() {
    let zone = zone(vec![tunnel(
        "edge",
        ID_A,
        &["a.example.com", "b.example.com"],
    )]);
    let target = format!("{ID_A}.cfargotunnel.com");
    let other_cluster = "cftunnel Tunnel shop/edge cluster=eu";
    let actual = [
        record("c1", "CNAME", "a.example.com", &target, Some(other_cluster)),
        record("c2", "CNAME", "b.example.com", &target, None),
    ];
    let plan = plan(&zone, &actual);
    assert!(plan.changes.is_empty());
    let reasons: Vec<&ConflictReason> = plan.conflicts.iter().map(|c| &c.reason).collect();
    assert_eq!(
        reasons,
        vec![
            &ConflictReason::OtherOwner {
                marker: other_cluster.into()
            },
            &ConflictReason::NoOwnershipProof
        ]
    );
}

#[test]
fn a_cluster_id_goes_into_marker_and_txt_owner() {
    let zone = zone(vec![tunnel("edge", ID_A, &["app.example.com"])]);
    let options = DnsOptions {
        cluster_id: Some(ClusterId::new("eu").unwrap()),
        ..DnsOptions::default()
    };
    let plan = plan_zone(&zone, &[], &options);
    let bodies: Vec<NewDnsRecord> = plan
        .changes
        .iter()
        .map(|c| match &c.action {
            DnsAction::Create(d) => d.body(Some("c1")).unwrap(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        bodies[0].comment.as_deref(),
        Some("cftunnel Tunnel shop/edge cluster=eu")
    );
    assert_eq!(
        ManagedTxt::parse(&bodies[1].content)
            .unwrap()
            .owner
            .as_deref(),
        Some("eu")
    );
}

#[test]
fn hostnames_outside_the_zone_are_refused() {
    let zone = zone(vec![tunnel("edge", ID_A, &["app.example.org"])]);
    let plan = plan(&zone, &[]);
    assert!(plan.changes.is_empty());
    assert_eq!(
        plan.invalid[0].to_string(),
        "no DNS record for \"app.example.org\": the hostname is outside the zone example.com"
    );
}

#[test]
fn order_of_the_records_does_not_matter() {
    let zone = zone(vec![tunnel("edge", ID_A, &["a.example.com"])]);
    let target = format!("{ID_A}.cfargotunnel.com");
    let mut actual = vec![
        record("c1", "CNAME", "a.example.com", &target, None),
        record(
            "c2",
            "CNAME",
            "gone.example.com",
            &target,
            Some(&marker("edge")),
        ),
        record(
            "t1",
            "TXT",
            "_managed.a.example.com",
            &go_txt("c1", "x", ID_A),
            None,
        ),
    ];
    let first = plan(&zone, &actual);
    actual.reverse();
    assert_eq!(plan(&zone, &actual), first);
    let hostnames: BTreeSet<&str> = first.changes.iter().map(|c| c.hostname.as_str()).collect();
    assert_eq!(
        hostnames,
        BTreeSet::from(["a.example.com", "gone.example.com"])
    );
}

#[test]
fn the_txt_of_a_wildcard_never_vouches_for_a_strangers_wildcard_label() {
    let zone = zone(vec![tunnel("edge", ID_A, &["*.example.com"])]);
    let target = format!("{ID_A}.cfargotunnel.com");
    let stranger = record(
        "c1",
        "CNAME",
        "wildcard.example.com",
        &target,
        Some("hand made"),
    );
    let first = plan(&zone, std::slice::from_ref(&stranger));
    let after = apply(&[stranger], &first);
    assert!(after.iter().any(|r| r.id == "c1"));
    assert_eq!(plan(&zone, &after), DnsPlan::default());
}
