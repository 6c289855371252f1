//! The routes NetworkRoutes ask for: keys, comments, who wins a route two of them ask for,
//! what is refused and what is held.
use cftunnel_types::network::{NetworkService, NetworkTunnelRef, VirtualNetworkRef};

use super::*;

const TUNNEL: &str = "11111111-1111-4111-8111-111111111111";
const OTHER_TUNNEL: &str = "22222222-2222-4222-8222-222222222222";
const NETWORK: &str = "33333333-3333-4333-8333-333333333333";

fn cluster() -> ClusterId {
    ClusterId::new("prod-eu").expect("cluster id")
}

fn source(namespace: &str, name: &str, created: i64) -> NetworkRouteSource {
    NetworkRouteSource {
        owner_kind: OwnerKind::NetworkRoute,
        namespace: namespace.into(),
        name: name.into(),
        created: Some(Timestamp::from_second(created).expect("time")),
        spec: NetworkRouteSpec {
            tunnel_ref: NetworkTunnelRef {
                kind: None,
                name: "edge".into(),
            },
            virtual_network_ref: None,
            cidrs: Vec::new(),
            services: Vec::new(),
            hostnames: Vec::new(),
            comment: None,
        },
        tunnel_id: Some(TUNNEL.into()),
        virtual_network_id: None,
        service_ips: BTreeMap::new(),
    }
}

fn with_cidrs(mut s: NetworkRouteSource, cidrs: &[&str]) -> NetworkRouteSource {
    s.spec.cidrs = cidrs.iter().map(|c| c.to_string()).collect();
    s
}

fn with_hostnames(mut s: NetworkRouteSource, hostnames: &[&str]) -> NetworkRouteSource {
    s.spec.hostnames = hostnames.iter().map(|h| h.to_string()).collect();
    s
}

fn key(network: Option<&str>, cidr: &str) -> IpKey {
    IpKey {
        virtual_network_id: network.map(str::to_string),
        cidr: Cidr::parse(cidr).expect(cidr),
    }
}

fn owner(namespace: &str, name: &str) -> Owner {
    Owner::new(OwnerKind::NetworkRoute, namespace, name)
}

#[test]
fn cidrs_services_and_hostnames_become_keyed_routes() {
    let mut db = with_hostnames(
        with_cidrs(source("shop", "db", 100), &["10.20.0.0/24", "fd00::/64"]),
        &["*.DB.internal.", "cache.local"],
    );
    db.spec.comment = Some("replicas".into());
    db.spec.services = vec![NetworkService { name: "pg".into() }];
    db.service_ips
        .insert("pg".into(), vec!["10.96.0.10".into(), "fd00:96::a".into()]);
    let desired = desired_routes(&cluster(), &[db]);

    let keys: Vec<IpKey> = desired.ip.keys().cloned().collect();
    assert_eq!(
        keys,
        [
            key(None, "10.20.0.0/24"),
            key(None, "10.96.0.10/32"),
            key(None, "fd00::/64"),
            key(None, "fd00:96::a/128"),
        ]
    );
    let comment = ownership_comment(&cluster(), &owner("shop", "db"), Some("replicas"));
    let service = &desired.ip[&key(None, "10.96.0.10/32")];
    assert_eq!(
        service.entry,
        Entry {
            kind: EntryKind::Service,
            route: "10.96.0.10/32".into(),
            service: Some("pg".into()),
        }
    );
    assert_eq!(service.tunnel_id.as_deref(), Some(TUNNEL));
    assert_eq!(service.comment, comment);
    assert_eq!(
        desired.hostnames.keys().collect::<Vec<_>>(),
        ["cache.local", "db.internal"]
    );
    assert_eq!(desired.hostnames["db.internal"].comment, comment);
    assert_eq!(
        desired.owners.iter().collect::<Vec<_>>(),
        [&owner("shop", "db").digest()]
    );
    assert!(desired.conflicts.is_empty() && desired.refusals.is_empty());
    assert!(desired.held_ip.is_empty() && desired.held_hostnames.is_empty());
}

#[test]
fn the_older_owner_keeps_a_route_two_ask_for() {
    let young = with_cidrs(source("a", "young", 200), &["10.0.0.0/24"]);
    let old = with_cidrs(source("z", "old", 100), &["10.0.0.0/24"]);
    for sources in [[young.clone(), old.clone()], [old.clone(), young.clone()]] {
        let desired = desired_routes(&cluster(), &sources);
        assert_eq!(
            desired.ip[&key(None, "10.0.0.0/24")].owner,
            owner("z", "old")
        );
        assert_eq!(
            desired.conflicts,
            [Conflict {
                owner: owner("a", "young"),
                entry: Entry {
                    kind: EntryKind::Cidr,
                    route: "10.0.0.0/24".into(),
                    service: None,
                },
                held_by: HeldBy::Older {
                    owner: owner("z", "old"),
                    route: "10.0.0.0/24".into(),
                },
            }]
        );
        assert_eq!(
            desired.conflicts[0].to_string(),
            "10.0.0.0/24 is routed by NetworkRoute z/old, which is older"
        );
    }

    // Same age: namespace, then name; not yet created: youngest.
    let twin = with_cidrs(source("b", "twin", 100), &["10.0.0.0/24"]);
    let desired = desired_routes(&cluster(), &[twin, old.clone()]);
    assert_eq!(
        desired.ip[&key(None, "10.0.0.0/24")].owner,
        owner("b", "twin")
    );
    let mut unborn = with_cidrs(source("a", "new", 0), &["10.0.0.0/24"]);
    unborn.created = None;
    let desired = desired_routes(&cluster(), &[unborn, old]);
    assert_eq!(
        desired.ip[&key(None, "10.0.0.0/24")].owner,
        owner("z", "old")
    );
    assert_eq!(desired.conflicts[0].owner, owner("a", "new"));
}

#[test]
fn hostnames_are_claimed_account_wide_after_normalisation() {
    let mut old = with_hostnames(source("shop", "old", 100), &["*.internal.local"]);
    old.virtual_network_id = Some(NETWORK.into());
    old.spec.virtual_network_ref = Some(VirtualNetworkRef {
        name: "staging".into(),
    });
    let young = with_hostnames(source("shop", "young", 200), &["Internal.Local"]);
    let desired = desired_routes(&cluster(), &[young, old]);
    assert_eq!(
        desired.hostnames["internal.local"].owner,
        owner("shop", "old")
    );
    assert_eq!(desired.conflicts.len(), 1);
    assert_eq!(desired.conflicts[0].owner, owner("shop", "young"));
}

#[test]
fn overlapping_ranges_of_two_owners_in_one_network_conflict() {
    let wide = with_cidrs(source("net", "wide", 100), &["10.0.0.0/16"]);
    let mut narrow = with_cidrs(
        source("net", "narrow", 200),
        &["10.0.1.0/24", "10.1.0.0/24"],
    );
    narrow.spec.services = vec![NetworkService { name: "dns".into() }];
    narrow
        .service_ips
        .insert("dns".into(), vec!["10.0.0.10".into()]);
    let desired = desired_routes(&cluster(), &[narrow.clone(), wide.clone()]);
    assert_eq!(
        desired.ip.keys().cloned().collect::<Vec<_>>(),
        [key(None, "10.0.0.0/16"), key(None, "10.1.0.0/24")]
    );
    let lost: Vec<String> = desired.conflicts.iter().map(ToString::to_string).collect();
    assert_eq!(
        lost,
        [
            "10.0.1.0/24 overlaps 10.0.0.0/16 routed by NetworkRoute net/wide, which is older",
            "10.0.0.10/32 overlaps 10.0.0.0/16 routed by NetworkRoute net/wide, which is older",
        ]
    );

    // In another virtual network the same addresses are other routes.
    narrow.virtual_network_id = Some(NETWORK.into());
    narrow.spec.virtual_network_ref = Some(VirtualNetworkRef {
        name: "staging".into(),
    });
    let desired = desired_routes(&cluster(), &[narrow, wide]);
    assert!(desired.conflicts.is_empty(), "{:?}", desired.conflicts);
    assert!(desired.ip.contains_key(&key(Some(NETWORK), "10.0.1.0/24")));
    assert!(desired.ip.contains_key(&key(None, "10.0.0.0/16")));
}

#[test]
fn one_owner_may_overlap_itself_and_repeat_a_route() {
    let mut own = with_cidrs(
        source("net", "own", 100),
        &["10.0.0.0/16", "10.0.1.0/24", "10.0.0.10/32"],
    );
    own.spec.services = vec![NetworkService { name: "dns".into() }];
    own.service_ips
        .insert("dns".into(), vec!["10.0.0.10".into()]);
    own.spec.hostnames = vec!["a.local".into(), "*.a.local".into()];
    let desired = desired_routes(&cluster(), &[own]);
    assert_eq!(desired.ip.len(), 3);
    assert_eq!(
        desired.ip[&key(None, "10.0.0.10/32")].entry.kind,
        EntryKind::Cidr,
        "the first entry asking for a route names it"
    );
    assert_eq!(desired.hostnames.len(), 1);
    assert!(desired.conflicts.is_empty());
}

#[test]
fn invalid_entries_and_services_without_an_address_are_refused() {
    let mut bad = with_hostnames(
        with_cidrs(
            source("shop", "bad", 100),
            &["10.20.0.7/24", "10.30.0.0/16"],
        ),
        &["a..local", "ok.local"],
    );
    bad.spec.services = ["missing", "headless", "pg"]
        .iter()
        .map(|n| NetworkService {
            name: n.to_string(),
        })
        .collect();
    bad.service_ips
        .insert("headless".into(), vec!["None".into()]);
    bad.service_ips
        .insert("pg".into(), vec!["10.96.0.10".into()]);
    let desired = desired_routes(&cluster(), &[bad]);
    let refused: Vec<(EntryKind, &str, &str)> = desired
        .refusals
        .iter()
        .map(|r| (r.entry.kind, r.entry.route.as_str(), r.reason.as_str()))
        .collect();
    assert_eq!(
        refused,
        [
            (
                EntryKind::Cidr,
                "10.20.0.7/24",
                "spec.cidrs[0]: 10.20.0.7/24 has host bits set; use 10.20.0.0/24"
            ),
            (EntryKind::Service, "", "Service missing not found"),
            (EntryKind::Service, "", "Service headless has no cluster IP"),
            (
                EntryKind::Hostname,
                "a..local",
                "spec.hostnames[0]: \"a..local\" has an empty label"
            ),
        ]
    );
    assert_eq!(
        desired.ip.keys().cloned().collect::<Vec<_>>(),
        [key(None, "10.30.0.0/16"), key(None, "10.96.0.10/32")]
    );
    assert!(desired.hostnames.contains_key("ok.local"));
}

#[test]
fn an_owner_whose_tunnel_or_network_is_not_known_is_held() {
    let mut no_tunnel = with_hostnames(
        with_cidrs(source("shop", "a", 100), &["10.0.0.0/24"]),
        &["a.local"],
    );
    no_tunnel.tunnel_id = None;
    let mut no_network = with_hostnames(
        with_cidrs(source("shop", "b", 200), &["10.0.0.0/24"]),
        &["b.local"],
    );
    no_network.spec.virtual_network_ref = Some(VirtualNetworkRef {
        name: "staging".into(),
    });
    no_network.tunnel_id = Some(OTHER_TUNNEL.into());
    let desired = desired_routes(&cluster(), &[no_tunnel, no_network]);

    let (a, b) = (owner("shop", "a").digest(), owner("shop", "b").digest());
    assert_eq!(desired.held_ip, BTreeSet::from([a.clone(), b.clone()]));
    assert_eq!(desired.held_hostnames, BTreeSet::from([a]));
    assert_eq!(desired.ip[&key(None, "10.0.0.0/24")].tunnel_id, None);
    assert_eq!(
        desired.ip.len(),
        1,
        "b's range has no network to be keyed in"
    );
    assert_eq!(
        desired.hostnames["b.local"].tunnel_id.as_deref(),
        Some(OTHER_TUNNEL)
    );
    assert!(desired.conflicts.is_empty());
}

#[test]
fn departed_owners_are_known_and_ask_for_nothing() {
    let desired = desired_routes(&cluster(), &[]).with_departed([&owner("shop", "gone")]);
    assert!(desired.ip.is_empty() && desired.hostnames.is_empty());
    assert!(desired.owners.contains(&owner("shop", "gone").digest()));
}
