//! Planner cases of docs/design.md §3.3 where a record is not ours: conflicts, overwrite, shared hostnames.
use super::fixtures::*;
use super::*;

/// A CNAME of someone else's at `name` (id `c1`).
fn foreign(name: &str) -> cftunnel_cloudflare::DnsRecord {
    cname_record("c1", name, "legacy.example.net", None)
}

#[test]
fn a_foreign_cname_is_reported_and_left_alone() {
    let zone = zone(vec![tunnel("edge", ID_A, &["app.example.com"])]);
    let actual = [foreign("app.example.com")];
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
    let actual = [foreign("app.example.com")];
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
    assert!(txt.body(None).unwrap().content.contains(r#""DnsId":"c1""#));
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
fn two_tunnels_routing_one_hostname_the_owner_keeps_it() {
    let target = format!("{ID_B}.cfargotunnel.com");
    let zone = zone(vec![
        tunnel("edge", ID_A, &["app.example.com"]),
        tunnel("backup", ID_B, &["app.example.com"]),
    ]);
    let actual = [cname_record(
        "c1",
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
fn foreign_markers_and_unproven_cnames_are_not_ours() {
    let zone = zone(vec![tunnel(
        "edge",
        ID_A,
        &["a.example.com", "b.example.com"],
    )]);
    let target = format!("{ID_A}.cfargotunnel.com");
    let other_cluster = "cftunnel Tunnel shop/edge cluster=eu";
    let actual = [
        cname_record("c1", "a.example.com", &target, Some(other_cluster)),
        cname_record("c2", "b.example.com", &target, None),
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
fn the_txt_of_a_wildcard_never_vouches_for_a_strangers_wildcard_label() {
    let zone = zone(vec![tunnel("edge", ID_A, &["*.example.com"])]);
    let target = format!("{ID_A}.cfargotunnel.com");
    let stranger = cname_record("c1", "wildcard.example.com", &target, Some("hand made"));
    let first = plan(&zone, std::slice::from_ref(&stranger));
    let after = apply(&[stranger], &first);
    assert!(after.iter().any(|r| r.id == "c1"));
    assert_eq!(plan(&zone, &after), DnsPlan::default());
}

#[test]
fn a_go_txt_vouches_only_for_the_cname_it_names_by_id() {
    let zone = zone(vec![tunnel("edge", ID_A, &["app.example.com"])]);
    let target = format!("{ID_A}.cfargotunnel.com");
    let actual = [
        cname_record("c2", "app.example.com", &target, None),
        record(
            "t1",
            "TXT",
            "_managed.app.example.com",
            &go_txt("c1", "edge-cf", ID_A),
            None,
        ),
    ];
    let plan = plan(&zone, &actual);
    assert!(plan.changes.is_empty());
    let reasons: Vec<&ConflictReason> = plan.conflicts.iter().map(|c| &c.reason).collect();
    assert_eq!(reasons, vec![&ConflictReason::NoOwnershipProof]);
}
