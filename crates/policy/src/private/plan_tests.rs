//! The plan against what Cloudflare lists: what is made, changed and deleted, and what is
//! left alone.
use cftunnel_types::network::VirtualNetworkRef;

use super::super::desired::desired_routes;
use super::super::fixtures::*;
use super::super::marker::ownership_comment;
use super::super::normalize::Cidr;
use super::*;

#[test]
fn missing_routes_are_created_and_equal_ones_left_as_they_are() {
    let desired = desired_routes(
        &cluster(),
        &[source(
            "db",
            1,
            &["10.0.0.0/24", "10.1.0.0/24"],
            &["*.db.local", "x.local"],
        )],
    );
    let account = listed(
        vec![ip("r1", "10.0.0.0/24", TUNNEL, &comment("db"))],
        vec![host("h1", "db.local", TUNNEL, &comment("db"))],
    );
    let plan = plan_private(&cluster(), &desired, &account);
    assert_eq!(
        plan.ip,
        [Change::Create {
            key: key("10.1.0.0/24"),
            tunnel_id: TUNNEL.into(),
            comment: comment("db"),
        }]
    );
    assert_eq!(
        plan.hostnames,
        [Change::Create {
            key: "x.local".into(),
            tunnel_id: TUNNEL.into(),
            comment: comment("db"),
        }]
    );
    assert_eq!(plan.routes_after, 4);
    assert!(plan.conflicts.is_empty() && plan.unknown_owners.is_empty());
}

#[test]
fn our_routes_are_patched_with_only_what_differs() {
    let desired = desired_routes(
        &cluster(),
        &[source("db", 1, &["10.0.0.0/24"], &["a.local"])],
    );
    let account = listed(
        vec![ip("r1", "10.0.0.0/24", OTHER_TUNNEL, &comment("db"))],
        // Another owner of this installation held it before: the comment names the new one.
        vec![host("h1", "A.local", TUNNEL, &comment("old"))],
    );
    let plan = plan_private(&cluster(), &desired, &account);
    assert_eq!(
        plan.ip,
        [Change::Update {
            id: "r1".into(),
            key: key("10.0.0.0/24"),
            tunnel_id: Some(TUNNEL.into()),
            comment: None,
        }]
    );
    assert_eq!(
        plan.hostnames,
        [Change::Update {
            id: "h1".into(),
            key: "a.local".into(),
            tunnel_id: None,
            comment: Some(comment("db")),
        }]
    );
    assert_eq!(plan.routes_after, 2);
}

#[test]
fn only_routes_of_known_owners_of_this_installation_are_deleted() {
    let desired =
        desired_routes(&cluster(), &[source("db", 1, &[], &[])]).with_departed([&owner("gone")]);
    let other_cluster = ownership_comment(
        &ClusterId::new("prod-us").expect("cluster id"),
        &owner("db"),
        None,
    );
    let account = listed(
        vec![
            ip("mine", "10.0.0.0/24", TUNNEL, &comment("db")),
            ip("departed", "10.1.0.0/24", TUNNEL, &comment("gone")),
            ip("stranger", "10.2.0.0/24", TUNNEL, &comment("never-seen")),
            ip("theirs", "10.3.0.0/24", TUNNEL, &other_cluster),
            ip("by-hand", "10.4.0.0/24", TUNNEL, "office LAN"),
        ],
        vec![host("h1", "db.local", TUNNEL, &comment("db"))],
    );
    let plan = plan_private(&cluster(), &desired, &account);
    assert_eq!(
        plan.ip,
        [
            Change::Delete {
                id: "mine".into(),
                route: "10.0.0.0/24".into(),
            },
            Change::Delete {
                id: "departed".into(),
                route: "10.1.0.0/24".into(),
            },
        ]
    );
    assert_eq!(
        plan.hostnames,
        [Change::Delete {
            id: "h1".into(),
            route: "db.local".into(),
        }]
    );
    assert_eq!(plan.unknown_owners, ["stranger"]);
    assert!(plan.conflicts.is_empty());
    assert_eq!(plan.routes_after, 3);
}

#[test]
fn a_desired_route_held_by_someone_else_is_a_conflict_and_left_alone() {
    let desired = desired_routes(
        &cluster(),
        &[source(
            "db",
            1,
            &["10.0.0.0/24", "10.1.0.0/24"],
            &["*.db.local"],
        )],
    );
    let other_cluster = ownership_comment(
        &ClusterId::new("prod-us").expect("cluster id"),
        &owner("db"),
        None,
    );
    let account = listed(
        vec![
            ip("by-hand", "10.0.0.0/24", OTHER_TUNNEL, "office LAN"),
            ip("theirs", "10.1.0.0/24", OTHER_TUNNEL, &other_cluster),
        ],
        vec![host("h1", "DB.local.", OTHER_TUNNEL, "")],
    );
    let plan = plan_private(&cluster(), &desired, &account);
    assert!(plan.is_empty(), "{plan:?}");
    let conflicts: Vec<String> = plan.conflicts.iter().map(ToString::to_string).collect();
    assert_eq!(
        conflicts,
        [
            "10.0.0.0/24 is routed at Cloudflare by route by-hand (\"office LAN\"): not made by this cftunnel".to_string(),
            format!("10.1.0.0/24 is routed at Cloudflare by route theirs ({other_cluster:?}): not made by this cftunnel"),
            "db.local is routed at Cloudflare by route h1, without a comment: not made by this cftunnel".to_string(),
        ]
    );
    assert_eq!(plan.conflicts[0].owner, owner("db"));
    assert_eq!(plan.routes_after, 3);
}

#[test]
fn the_default_network_is_matched_by_its_id_and_others_kept_apart() {
    let mut staged = source("staged", 1, &["10.0.0.0/24"], &[]);
    staged.spec.virtual_network_ref = Some(VirtualNetworkRef {
        name: "staging".into(),
    });
    staged.virtual_network_id = Some(NETWORK.into());
    let desired = desired_routes(
        &cluster(),
        &[source("db", 1, &["10.0.0.0/24"], &[]), staged],
    );
    let mut legacy = ip("legacy", "10.0.0.0/24", TUNNEL, &comment("db"));
    legacy.virtual_network_id = None;
    let plan = plan_private(&cluster(), &desired, &listed(vec![legacy], vec![]));
    assert_eq!(
        plan.ip,
        [Change::Create {
            key: IpKey {
                virtual_network_id: Some(NETWORK.into()),
                cidr: Cidr::parse("10.0.0.0/24").expect("cidr"),
            },
            tunnel_id: TUNNEL.into(),
            comment: comment("staged"),
        }],
        "a route listed without a network is in the default one"
    );
}

#[test]
fn the_routes_of_a_held_owner_stay_as_they_are() {
    let mut waiting = source("db", 1, &["10.0.0.0/24"], &["a.local"]);
    waiting.tunnel_id = None;
    let desired = desired_routes(&cluster(), &[waiting]);
    let account = listed(
        vec![
            ip("r1", "10.0.0.0/24", OTHER_TUNNEL, &comment("db")),
            ip("r2", "10.9.0.0/24", OTHER_TUNNEL, &comment("db")),
        ],
        vec![host("h2", "b.local", OTHER_TUNNEL, &comment("db"))],
    );
    let plan = plan_private(&cluster(), &desired, &account);
    assert!(plan.is_empty(), "{plan:?}");
    assert_eq!(plan.routes_after, 3);
}

#[test]
fn more_routes_than_the_account_holds_are_warned_of() {
    let cidrs: Vec<String> = (0..=ACCOUNT_ROUTE_LIMIT)
        .map(|i| format!("10.{}.{}.0/24", i / 256, i % 256))
        .collect();
    let cidrs: Vec<&str> = cidrs.iter().map(String::as_str).collect();
    let desired = desired_routes(&cluster(), &[source("many", 1, &cidrs, &[])]);
    let plan = plan_private(&cluster(), &desired, &listed(vec![], vec![]));
    assert_eq!(plan.routes_after, ACCOUNT_ROUTE_LIMIT + 1);
    assert_eq!(
        plan.over_limit().as_deref(),
        Some("the account would hold 1001 private routes, more than Cloudflare's limit of 1000")
    );
    let fits = desired_routes(&cluster(), &[source("many", 1, &cidrs[1..], &[])]);
    assert_eq!(
        plan_private(&cluster(), &fits, &listed(vec![], vec![])).over_limit(),
        None
    );
}
