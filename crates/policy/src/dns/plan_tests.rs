//! Planner cases of docs/design.md §3.3 that write: creation, adoption, repairs, re-pointing, deletion.
use std::collections::BTreeSet;

use cftunnel_cloudflare::NewDnsRecord;

use super::fixtures::*;
use super::*;

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
    let actual = go_records("app.example.com", "edge-cf", ID_A);
    let plan = plan(&zone, &actual);
    assert_eq!(
        summary(&plan),
        vec![s("update", "CNAME", "app.example.com")]
    );
    assert!(plan.conflicts.is_empty());
}

#[test]
fn a_cname_whose_txt_was_lost_gets_the_txt_back() {
    let zone = zone(vec![tunnel("edge", ID_A, &["app.example.com"])]);
    let actual = [ours("c1", "app.example.com", ID_A, "edge")];
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
        cname_record("c1", "app.example.com", &old_target, Some(&marker("edge"))),
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
    let actual = [
        record(
            "t1",
            "TXT",
            "_managed.old.example.com",
            &go_txt("c1", "edge-cf", ID_A),
            Some(&marker("edge")),
        ),
        ours("c1", "old.example.com", ID_A, "edge"),
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
    let actual = [ours("c1", "app.example.com", ID_A, "edge")];
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
fn txt_off_marks_the_go_cname_before_deleting_the_txt() {
    let mut edge = tunnel("edge", ID_A, &["app.example.com"]);
    edge.txt_records = false;
    let zone = zone(vec![edge]);
    let actual = go_records("app.example.com", "x", ID_A);
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
fn order_of_the_records_does_not_matter() {
    let zone = zone(vec![tunnel("edge", ID_A, &["a.example.com"])]);
    let target = format!("{ID_A}.cfargotunnel.com");
    let mut actual = vec![
        cname_record("c1", "a.example.com", &target, None),
        cname_record("c2", "gone.example.com", &target, Some(&marker("edge"))),
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

/// The records `name` holds for `tunnel` (id `id`) written by cluster `cluster`.
fn cluster_records(tunnel: &str, id: &str, cluster: &str) -> Vec<cftunnel_cloudflare::DnsRecord> {
    let cluster = ClusterId::new(cluster).unwrap();
    let marker = ownership_marker(&identity(tunnel), Some(&cluster));
    let txt = ManagedTxt {
        dns_id: "c1".into(),
        tunnel_name: format!("{tunnel}-cf"),
        tunnel_id: id.into(),
        owner: Some(cluster.as_str().into()),
    };
    vec![
        cname_record(
            "c1",
            "app.example.com",
            &format!("{id}.cfargotunnel.com"),
            Some(&marker),
        ),
        record(
            "t1",
            "TXT",
            "_managed.app.example.com",
            &txt.to_content(),
            Some(&marker),
        ),
    ]
}

fn in_cluster(cluster: &str) -> DnsOptions {
    DnsOptions {
        cluster_id: Some(ClusterId::new(cluster).unwrap()),
        ..DnsOptions::default()
    }
}

#[test]
fn a_record_this_cluster_wrote_for_a_tunnel_synced_elsewhere_is_taken_over_when_wanted() {
    // `edge` (another API token, another group) routed app.example.com; now `web` does.
    let actual = cluster_records("edge", ID_A, "eu");
    let zone = zone(vec![tunnel("web", ID_B, &["app.example.com"])]);
    let plan = plan_zone(&zone, &actual, &in_cluster("eu"));
    assert!(plan.conflicts.is_empty(), "{:?}", plan.conflicts);
    assert_eq!(
        summary(&plan),
        vec![
            s("update", "CNAME", "app.example.com"),
            s("update", "TXT", "_managed.app.example.com")
        ]
    );
    let after = apply(&actual, &plan);
    let cname = after.iter().find(|r| r.record_type == "CNAME").unwrap();
    assert_eq!(cname.id, "c1", "the same record, re-pointed");
    assert_eq!(cname.content, format!("{ID_B}.cfargotunnel.com"));
    assert_eq!(
        cname.comment.as_deref(),
        Some("cftunnel Tunnel shop/web cluster=eu")
    );
    assert_eq!(
        plan_zone(&zone, &after, &in_cluster("eu")),
        DnsPlan::default()
    );
}

#[test]
fn a_hostname_routed_by_another_group_of_this_cluster_is_handed_over_not_deleted() {
    let actual = cluster_records("edge", ID_A, "eu");
    let mut zone = zone(vec![tunnel("edge", ID_A, &[])]);
    let deleted = plan_zone(&zone, &actual, &in_cluster("eu"));
    assert_eq!(
        summary(&deleted),
        vec![
            s("delete", "CNAME", "app.example.com"),
            s("delete", "TXT", "_managed.app.example.com")
        ],
        "no tunnel of the cluster wants it: deleted"
    );
    zone.routed_elsewhere = BTreeSet::from(["app.example.com".to_string()]);
    assert_eq!(
        plan_zone(&zone, &actual, &in_cluster("eu")),
        DnsPlan::default()
    );
    // Once the other group took it over, it is a sibling's here: never deleted.
    zone.routed_elsewhere.clear();
    let taken = cluster_records("web", ID_B, "eu");
    assert_eq!(
        plan_zone(&zone, &taken, &in_cluster("eu")),
        DnsPlan::default()
    );
}

#[test]
fn another_clusters_record_stays_a_conflict_that_waits_for_that_cluster() {
    let actual = cluster_records("edge", ID_A, "us");
    let zone = zone(vec![tunnel("web", ID_B, &["app.example.com"])]);
    let plan = plan_zone(&zone, &actual, &in_cluster("eu"));
    assert!(plan.changes.is_empty(), "{:?}", plan.changes);
    assert_eq!(plan.conflicts.len(), 1);
    assert!(
        plan.conflicts[0].reason.is_other_cluster(),
        "{:?}",
        plan.conflicts[0].reason
    );
}

#[test]
fn another_clusters_hostname_on_this_tunnel_is_reported_as_shared_only_when_not_routed_here() {
    // Cluster `us` routes app.example.com through edge's tunnel; cluster `eu` runs edge too.
    let theirs = cluster_records("edge", ID_A, "us");
    let other_hostnames = zone(vec![tunnel("edge", ID_A, &["shop.example.com"])]);
    let plan = plan_zone(&other_hostnames, &theirs, &in_cluster("eu"));
    assert_eq!(
        plan.shared,
        vec![SharedHostname {
            tunnel: identity("edge"),
            hostname: "app.example.com".into(),
            cluster: "us".into(),
        }]
    );
    assert!(
        plan.changes.iter().all(|c| c.hostname != "app.example.com"),
        "never touched"
    );
    // Both clusters route the same hostname (replicas of one another): nothing shared.
    let same_hostnames = zone(vec![tunnel("edge", ID_A, &["app.example.com"])]);
    assert!(
        plan_zone(&same_hostnames, &theirs, &in_cluster("eu"))
            .shared
            .is_empty()
    );
    // This cluster's own records are never "shared".
    let ours = cluster_records("edge", ID_A, "eu");
    assert!(
        plan_zone(&other_hostnames, &ours, &in_cluster("eu"))
            .shared
            .is_empty()
    );
}

#[test]
fn a_held_hostname_keeps_the_records_it_has_and_gets_no_new_one() {
    let mut zone = zone(vec![tunnel(
        "edge",
        ID_A,
        &["new.example.com", "old.example.com"],
    )]);
    zone.held = BTreeSet::from(["new.example.com".to_string(), "old.example.com".to_string()]);
    let existing = ours("c1", "old.example.com", ID_A, "edge");
    let plan = plan(&zone, std::slice::from_ref(&existing));
    assert_eq!(
        summary(&plan),
        Vec::<(String, String, String)>::new(),
        "nothing created for the new hostname, and the old one's CNAME is not deleted"
    );
    assert!(plan.conflicts.is_empty(), "the old CNAME is ours");
    zone.held.clear();
    let plan = super::fixtures::plan(&zone, &[existing]);
    let written = summary(&plan);
    assert!(
        written.contains(&s("create", "CNAME", "new.example.com"))
            && written.contains(&s("create", "TXT", "_managed.old.example.com")),
        "{written:?}"
    );
}
