//! The ownership rule of docs/design.md §3.3 with a cluster id: only this cluster's records are
//! deleted when no route wants them; Go-written and older records are adopted for a wanted
//! hostname and left alone otherwise; another cluster's records are never touched.
use super::fixtures::*;
use super::*;

/// This cluster is `eu`.
fn eu() -> DnsOptions {
    DnsOptions {
        cluster_id: Some(ClusterId::new("eu").unwrap()),
        ..DnsOptions::default()
    }
}

fn marker_of(cluster: &str) -> String {
    ownership_marker(&identity("edge"), Some(&ClusterId::new(cluster).unwrap()))
}

/// The record of `cluster` at `name`: its CNAME `c1` and `_managed` TXT `t1`, both marked.
fn cluster_records(cluster: &str, name: &str) -> Vec<cftunnel_cloudflare::DnsRecord> {
    let owner = ManagedTxt {
        dns_id: "c1".into(),
        tunnel_name: "edge-cf".into(),
        tunnel_id: ID_A.into(),
        owner: Some(cluster.into()),
    };
    vec![
        cname("c1", name, ID_A, Some(&marker_of(cluster))),
        record(
            "t1",
            "TXT",
            &managed_txt_name(name),
            &serde_json::to_string(&owner).unwrap(),
            Some(&marker_of(cluster)),
        ),
    ]
}

#[test]
fn this_clusters_records_no_route_wants_are_deleted() {
    let zone = zone(vec![tunnel("edge", ID_A, &[])]);
    let plan = plan_zone(&zone, &cluster_records("eu", "app.example.com"), &eu());
    assert_eq!(
        summary(&plan),
        vec![
            s("delete", "CNAME", "app.example.com"),
            s("delete", "TXT", "_managed.app.example.com")
        ]
    );
}

#[test]
fn another_clusters_records_for_our_tunnel_are_never_deleted() {
    let zone = zone(vec![tunnel("edge", ID_A, &[])]);
    let plan = plan_zone(&zone, &cluster_records("us", "app.example.com"), &eu());
    assert!(
        plan.changes.is_empty() && plan.conflicts.is_empty(),
        "{plan:?}"
    );
    assert_eq!(
        plan.shared.len(),
        1,
        "reported as the other cluster's, on this tunnel"
    );
}

#[test]
fn a_hostname_another_cluster_holds_stays_with_it_and_says_so() {
    let zone = zone(vec![tunnel("edge", ID_A, &["app.example.com"])]);
    let plan = plan_zone(&zone, &cluster_records("us", "app.example.com"), &eu());
    assert!(plan.changes.is_empty(), "{:?}", plan.changes);
    assert_eq!(plan.conflicts.len(), 1, "{plan:?}");
    let conflict = &plan.conflicts[0];
    assert!(conflict.reason.is_other_cluster(), "{conflict:?}");
    assert_eq!(
        conflict.to_string(),
        format!(
            "DNS record CNAME app.example.com -> {ID_A}.cfargotunnel.com for app.example.com is held by \
             another cluster (its comment says it belongs to \"cftunnel Tunnel shop/edge cluster=us\"); \
             it stays with that cluster, and Tunnel shop/edge takes it over at its next DNS check once \
             the other cluster lets go of the hostname"
        )
    );
}

#[test]
fn go_records_no_route_wants_are_left_alone_and_adopted_once_wanted() {
    let actual = go_records("app.example.com", "edge-cf", ID_A);
    let unwanted = plan_zone(&zone(vec![tunnel("edge", ID_A, &[])]), &actual, &eu());
    assert_eq!(unwanted, DnsPlan::default(), "another cluster may serve it");
    let wanted = zone(vec![tunnel("edge", ID_A, &["app.example.com"])]);
    let plan = plan_zone(&wanted, &actual, &eu());
    assert_eq!(
        summary(&plan),
        vec![
            s("update", "CNAME", "app.example.com"),
            s("update", "TXT", "_managed.app.example.com")
        ]
    );
    let after = apply(&actual, &plan);
    assert!(
        after
            .iter()
            .all(|r| r.comment.as_deref() == Some(marker_of("eu").as_str())),
        "both now carry this cluster's marker: {after:?}"
    );
    // Adopted: from now on this cluster deletes them when it no longer routes the hostname.
    let released = plan_zone(&zone(vec![tunnel("edge", ID_A, &[])]), &after, &eu());
    assert_eq!(
        summary(&released),
        vec![
            s("delete", "CNAME", "app.example.com"),
            s("delete", "TXT", "_managed.app.example.com")
        ]
    );
}

#[test]
fn records_written_before_cluster_ids_are_adopted_only_for_a_wanted_hostname() {
    let legacy = marker("edge");
    let actual = vec![cname("c1", "app.example.com", ID_A, Some(&legacy))];
    let unwanted = plan_zone(&zone(vec![tunnel("edge", ID_A, &[])]), &actual, &eu());
    assert_eq!(unwanted, DnsPlan::default());
    let wanted = zone(vec![tunnel("edge", ID_A, &["app.example.com"])]);
    let plan = plan_zone(&wanted, &actual, &eu());
    assert_eq!(
        summary(&plan),
        vec![
            s("update", "CNAME", "app.example.com"),
            s("create", "TXT", "_managed.app.example.com")
        ]
    );
}

#[test]
fn a_tunnel_cftunnel_deletes_takes_every_cname_pointing_at_it() {
    let mut edge = tunnel("edge", ID_A, &[]);
    edge.sweep = true;
    let mut actual = cluster_records("us", "app.example.com");
    actual.extend(go_records("go.example.com", "edge-cf", ID_A).map(|mut r| {
        r.id = format!("go-{}", r.id);
        r
    }));
    actual.push(cname_record(
        "x1",
        "other.example.com",
        "elsewhere.example.net",
        None,
    ));
    let plan = plan_zone(&zone(vec![edge]), &actual, &eu());
    let mut deleted: Vec<String> = summary(&plan)
        .into_iter()
        .map(|(kind, _, name)| format!("{kind} {name}"))
        .collect();
    deleted.sort();
    assert_eq!(
        deleted,
        [
            "delete _managed.app.example.com",
            "delete _managed.go.example.com",
            "delete app.example.com",
            "delete go.example.com",
        ],
        "every record naming the tunnel goes, another cluster's too; the CNAME elsewhere stays: {plan:?}"
    );
}
