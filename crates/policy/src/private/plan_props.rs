//! Plan properties over random NetworkRoutes and accounts: a plan carried out leaves nothing
//! to do, routes without this installation's marker are never touched, and every desired
//! route with a tunnel ends up in place or in conflict.
use std::collections::BTreeMap;

use cftunnel_types::network::VirtualNetworkRef;
use proptest::prelude::*;
use proptest::sample::{select, subsequence};

use super::desired::{DesiredRoute, NetworkRouteSource, desired_routes};
use super::fixtures::*;
use super::listed::{Listed, ListedHostnameRoute, ListedIpRoute, hostname_key};
use super::marker::{Owner, Ownership, ownership, ownership_comment};
use super::plan::{Change, PrivatePlan, plan_private};
use crate::dns::ClusterId;

/// The account after `plan` is carried out as Cloudflare would: a create at a key that is
/// already held fails the test.
fn apply(before: &Listed, plan: &PrivatePlan) -> Listed {
    let mut after = before.clone();
    let mut next = 0;
    let mut new_id = |kind: &str| {
        next += 1;
        format!("new-{kind}-{next}")
    };
    for change in &plan.ip {
        match change {
            Change::Delete { id, .. } => after.ip_routes.retain(|r| r.id != *id),
            Change::Update {
                id,
                tunnel_id,
                comment,
                ..
            } => {
                let route = after.ip_routes.iter_mut().find(|r| r.id == *id);
                let route = route.expect("an update names a listed route");
                route.tunnel_id = tunnel_id.clone().unwrap_or(route.tunnel_id.clone());
                route.comment = comment.clone().unwrap_or(route.comment.clone());
            }
            Change::Create {
                key,
                tunnel_id,
                comment,
            } => {
                let taken = after
                    .ip_routes
                    .iter()
                    .any(|r| after.ip_key(r).as_ref() == Some(key));
                assert!(!taken, "{key:?} is already routed");
                let network = key.virtual_network_id.as_deref().unwrap_or(DEFAULT_NETWORK);
                after.ip_routes.push(ListedIpRoute {
                    id: new_id("ip"),
                    network: key.cidr.to_string(),
                    tunnel_id: tunnel_id.clone(),
                    virtual_network_id: Some(network.into()),
                    comment: comment.clone(),
                });
            }
        }
    }
    for change in &plan.hostnames {
        match change {
            Change::Delete { id, .. } => after.hostname_routes.retain(|r| r.id != *id),
            Change::Update {
                id,
                tunnel_id,
                comment,
                ..
            } => {
                let route = after.hostname_routes.iter_mut().find(|r| r.id == *id);
                let route = route.expect("an update names a listed route");
                route.tunnel_id = tunnel_id.clone().unwrap_or(route.tunnel_id.clone());
                route.comment = comment.clone().unwrap_or(route.comment.clone());
            }
            Change::Create {
                key,
                tunnel_id,
                comment,
            } => {
                let taken = after
                    .hostname_routes
                    .iter()
                    .any(|r| hostname_key(r) == *key);
                assert!(!taken, "{key} is already routed");
                after.hostname_routes.push(ListedHostnameRoute {
                    id: new_id("host"),
                    hostname: key.clone(),
                    tunnel_id: tunnel_id.clone(),
                    comment: comment.clone(),
                });
            }
        }
    }
    after
}

const CIDRS: &[&str] = &[
    "10.0.0.0/16",
    "10.0.1.0/24",
    "10.0.2.0/24",
    "10.1.0.0/24",
    "fd00::/64",
];
const HOSTNAMES: &[&str] = &["a.local", "*.a.local", "b.local", "c.local"];
const NAMES: &[&str] = &["db", "cache", "web"];
const TUNNELS: &[&str] = &[TUNNEL, OTHER_TUNNEL];

fn any_source(name: &'static str) -> impl Strategy<Value = NetworkRouteSource> {
    (
        0i64..3,
        subsequence(CIDRS, 0..=3),
        subsequence(HOSTNAMES, 0..=2),
        proptest::option::weighted(0.85, select(TUNNELS)),
        any::<bool>(),
    )
        .prop_map(move |(created, cidrs, hostnames, tunnel, staged)| {
            let mut s = source(name, created, &cidrs, &hostnames);
            s.tunnel_id = tunnel.map(str::to_string);
            if staged {
                s.spec.virtual_network_ref = Some(VirtualNetworkRef {
                    name: "staging".into(),
                });
                s.virtual_network_id = Some(NETWORK.into());
            }
            s
        })
}

/// A comment a listed route may carry: ours for a known or unknown owner, another
/// installation's, or one made by hand.
fn any_comment() -> impl Strategy<Value = String> {
    prop_oneof![
        select(NAMES).prop_map(comment),
        Just(comment("stranger")),
        Just(ownership_comment(
            &ClusterId::new("prod-us").expect("cluster id"),
            &owner("db"),
            None
        )),
        Just("office LAN".to_string()),
    ]
}

fn any_account() -> impl Strategy<Value = Listed> {
    let ip_route = (select(CIDRS), any::<bool>(), select(TUNNELS), any_comment());
    let host_route = (select(HOSTNAMES), select(TUNNELS), any_comment());
    (
        proptest::collection::vec(ip_route, 0..6),
        proptest::collection::vec(host_route, 0..4),
    )
        .prop_map(|(ips, hosts)| {
            let mut account = listed(Vec::new(), Vec::new());
            for (i, (cidr, staged, tunnel, comment)) in ips.into_iter().enumerate() {
                let mut route = ip(&format!("ip-{i}"), cidr, tunnel, &comment);
                if staged {
                    route.virtual_network_id = Some(NETWORK.into());
                }
                // Cloudflare holds one route per range of a network.
                let key = account.ip_key(&route);
                if !account.ip_routes.iter().any(|r| account.ip_key(r) == key) {
                    account.ip_routes.push(route);
                }
            }
            for (i, (hostname, tunnel, comment)) in hosts.into_iter().enumerate() {
                let route = host(&format!("host-{i}"), hostname, tunnel, &comment);
                if !account
                    .hostname_routes
                    .iter()
                    .any(|r| hostname_key(r) == hostname_key(&route))
                {
                    account.hostname_routes.push(route);
                }
            }
            account
        })
}

fn any_sources() -> impl Strategy<Value = Vec<NetworkRouteSource>> {
    subsequence(NAMES, 0..=NAMES.len())
        .prop_flat_map(|names| names.into_iter().map(any_source).collect::<Vec<_>>())
}

proptest! {
    #[test]
    fn a_plan_carried_out_leaves_nothing_to_do(
        sources in any_sources(),
        account in any_account(),
        departed in subsequence(&["gone", "stranger"][..], 0..=2),
    ) {
        let departed: Vec<Owner> = departed.into_iter().map(owner).collect();
        let desired = desired_routes(&cluster(), &sources).with_departed(&departed);
        let plan = plan_private(&cluster(), &desired, &account);
        let after = apply(&account, &plan);
        prop_assert_eq!(plan.routes_after, after.len());
        let again = plan_private(&cluster(), &desired, &after);
        prop_assert!(again.is_empty(), "{:?}\nthen {:?}", plan, again);
        prop_assert_eq!(again.conflicts, plan.conflicts);
        prop_assert_eq!(again.routes_after, after.len());
    }

    #[test]
    fn routes_without_our_marker_are_never_changed_or_deleted(
        sources in any_sources(),
        account in any_account(),
    ) {
        let desired = desired_routes(&cluster(), &sources);
        let plan = plan_private(&cluster(), &desired, &account);
        let comments: BTreeMap<&str, &str> = account
            .ip_routes
            .iter()
            .map(|r| (r.id.as_str(), r.comment.as_str()))
            .chain(account.hostname_routes.iter().map(|r| (r.id.as_str(), r.comment.as_str())))
            .collect();
        let touched = plan.ip.iter().filter_map(touched).chain(plan.hostnames.iter().filter_map(touched));
        for id in touched {
            let listed = comments.get(id).copied().unwrap_or_default();
            prop_assert!(
                matches!(ownership(listed, &cluster()), Ownership::Ours(_)),
                "{} ({:?}) is not ours", id, listed
            );
        }
    }

    #[test]
    fn every_desired_route_with_a_tunnel_is_in_place_or_in_conflict(
        sources in any_sources(),
        account in any_account(),
    ) {
        let desired = desired_routes(&cluster(), &sources);
        let plan = plan_private(&cluster(), &desired, &account);
        let after = apply(&account, &plan);
        let in_conflict = |want: &DesiredRoute| {
            plan.conflicts.iter().any(|c| c.owner == want.owner && c.entry == want.entry)
        };
        for (key, want) in &desired.ip {
            let Some(tunnel) = &want.tunnel_id else { continue };
            let there = after.ip_routes.iter().any(|r| {
                after.ip_key(r).as_ref() == Some(key) && r.tunnel_id == *tunnel && r.comment == want.comment
            });
            prop_assert!(there || in_conflict(want), "{:?}", key);
        }
        for (key, want) in &desired.hostnames {
            let Some(tunnel) = &want.tunnel_id else { continue };
            let there = after.hostname_routes.iter().any(|r| {
                hostname_key(r) == *key && r.tunnel_id == *tunnel && r.comment == want.comment
            });
            prop_assert!(there || in_conflict(want), "{}", key);
        }
    }
}

fn touched<K>(change: &Change<K>) -> Option<&str> {
    match change {
        Change::Create { .. } => None,
        Change::Update { id, .. } | Change::Delete { id, .. } => Some(id),
    }
}
