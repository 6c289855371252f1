//! Tests of the DNS sync scheduling: groups, settling and release of deleting sources.
use super::*;
use crate::dns_sync::credentials::{CredentialKey, CredentialRef, Resolved};
use crate::dns_sync::groups::{Directory, Elsewhere};
use crate::dns_sync::problem::REASON_DNS_CONFLICT;
use cftunnel_cloudflare::Credentials;
use cftunnel_policy::routes::{DnsName, TunnelRoutes};
use cftunnel_types::TunnelKind;
use cftunnel_types::{CloudflareDetails, TunnelStatus, ZoneRef};

fn record(name: &str, secret: &str, zone: Option<&str>, deleting: bool) -> TunnelRecord {
    let details: CloudflareDetails = serde_json::from_value(serde_json::json!({
        "domain": "example.com", "secret": secret,
    }))
    .unwrap_or_else(|e| panic!("{e}"));
    TunnelRecord {
        identity: TunnelIdentity {
            kind: TunnelKind::Tunnel,
            namespace: "ns".into(),
            name: name.into(),
        },
        secret_namespace: "ns".into(),
        cloudflare: details,
        status: TunnelStatus {
            tunnel_id: Some(format!("id-{name}")),
            zone_id: zone.map(str::to_string),
            zone_domain: zone.map(|_| "example.com".to_string()),
            ..TunnelStatus::default()
        },
        routed: false,
        deleting,
    }
}

fn table(entries: &[(&str, &[(&str, bool)])]) -> RouteTable {
    let mut table = RouteTable::default();
    for (name, hosts) in entries {
        let id = record(name, "s", None, false).identity;
        let dns = hosts
            .iter()
            .map(|(h, off)| DnsName {
                fqdn: h.to_string(),
                dns_updates_disabled: *off,
            })
            .collect();
        table.tunnels.insert(
            id,
            std::sync::Arc::new(TunnelRoutes {
                dns,
                ..TunnelRoutes::default()
            }),
        );
    }
    table
}

/// The groups with no zone list, no other zones and no credential read.
fn wanted_plain(table: &RouteTable, records: &[TunnelRecord]) -> Wanted {
    wanted_in(table, records, &Directory::new())
}

/// The groups with the zone lists of `directory`.
fn wanted_in(table: &RouteTable, records: &[TunnelRecord], directory: &Directory) -> Wanted {
    let none = Resolved::default();
    wanted(table, records, true, directory, &Elsewhere::new(), &none)
}

/// The groups with the credentials of `resolved`.
fn wanted_with(table: &RouteTable, records: &[TunnelRecord], resolved: &Resolved) -> Wanted {
    let none = Directory::new();
    wanted(table, records, true, &none, &Elsewhere::new(), resolved)
}

/// The round's credentials: each `(record, token)` names that token.
fn tokens(entries: &[(&TunnelRecord, &str)]) -> Resolved {
    let mut resolved = Resolved::default();
    for (r, token) in entries {
        resolved.insert(
            CredentialRef::of(r),
            Credentials::ApiToken(token.to_string()),
        );
    }
    resolved
}

#[test]
fn groups_are_per_zone_and_credential_and_skip_what_cannot_have_dns() {
    let table = table(&[
        (
            "a",
            &[("a.example.com", false), ("quiet.example.com", true)],
        ),
        ("b", &[("b.example.com", false)]),
        ("c", &[("c.example.com", false)]),
    ]);
    let records = vec![
        record("a", "s1", Some("z1"), false),
        record("b", "s2", Some("z1"), false),
        record("c", "s1", Some("z1"), true),
        record("d", "s1", None, false),
    ];
    let resolved = tokens(&[(&records[0], "one"), (&records[1], "two")]);
    let groups = wanted_with(&table, &records, &resolved).groups;
    assert_eq!(groups.len(), 2, "{groups:?}");
    let hosts: Vec<Vec<String>> = groups
        .values()
        .map(|z| {
            z.tunnels
                .iter()
                .flat_map(|t| t.hostnames.iter().cloned())
                .collect()
        })
        .collect();
    let mut hosts = hosts;
    hosts.sort();
    assert_eq!(
        hosts,
        vec![
            vec!["a.example.com".to_string()],
            vec!["b.example.com".to_string()]
        ]
    );
}

#[test]
fn groups_of_one_zone_know_the_hostnames_of_its_other_credentials_and_a_lone_one_none() {
    let table = table(&[
        ("a", &[("a.example.com", false)]),
        ("b", &[("B.example.com", false)]),
    ]);
    let records = vec![
        record("a", "s1", Some("z1"), false),
        record("b", "s2", Some("z1"), false),
    ];
    let two = tokens(&[(&records[0], "one"), (&records[1], "two")]);
    let groups = wanted_with(&table, &records, &two).groups;
    let elsewhere: BTreeMap<&str, Vec<&str>> = groups
        .values()
        .map(|z| {
            let first = z.tunnels[0].identity.name.as_str();
            (
                first,
                z.routed_elsewhere.iter().map(String::as_str).collect(),
            )
        })
        .collect();
    let expected = BTreeMap::from([("a", vec!["b.example.com"]), ("b", vec!["a.example.com"])]);
    assert_eq!(elsewhere, expected);
    let one = tokens(&[(&records[0], "one"), (&records[1], "one")]);
    let groups = wanted_with(&table, &records, &one).groups;
    assert_eq!(groups.len(), 1);
    assert!(groups.values().all(|z| z.routed_elsewhere.is_empty()));
}

#[test]
fn tunnels_are_grouped_by_the_credential_their_secrets_hold_and_written_with_it() {
    let table = table(&[
        ("a", &[("a.example.com", false)]),
        ("b", &[("b.example.com", false)]),
        ("c", &[("c.example.com", false)]),
        ("d", &[("d.example.com", false)]),
        ("e", &[("e.example.com", false)]),
    ]);
    let mut records = vec![
        record("a", "s1", Some("z1"), false),
        record("b", "s2", Some("z1"), false),
        record("c", "s1", Some("z1"), false),
        record("d", "s3", Some("z1"), false),
        record("e", "gone", Some("z1"), false),
    ];
    // One Secret read through another key, and another Secret, hold the same token as s1.
    records[2].cloudflare.api_token_key = "OTHER_TOKEN".into();
    let resolved = tokens(&[
        (&records[0], "shared"),
        (&records[1], "shared"),
        (&records[2], "shared"),
        (&records[3], "own"),
    ]);
    let groups = wanted_with(&table, &records, &resolved).groups;
    let members: BTreeMap<&GroupKey, Vec<&str>> = groups
        .iter()
        .map(|(k, z)| {
            let names = z.tunnels.iter().map(|t| t.identity.name.as_str()).collect();
            (k, names)
        })
        .collect();
    assert_eq!(
        members.values().cloned().collect::<BTreeSet<_>>(),
        [vec!["a", "b", "c"], vec!["d"], vec!["e"]]
            .into_iter()
            .collect(),
        "{members:?}"
    );
    for (key, zone) in &groups {
        let token = match resolved.for_group(&key.credential) {
            Ok(Credentials::ApiToken(token)) => token.clone(),
            Ok(other) => panic!("unexpected {other:?}"),
            Err(error) => {
                assert!(matches!(key.credential, CredentialKey::Unread(_)));
                assert_eq!(zone.tunnels[0].identity.name, "e");
                assert!(error.contains("not read"), "{error}");
                continue;
            }
        };
        let expected = if zone.tunnels[0].identity.name == "d" {
            "own"
        } else {
            "shared"
        };
        assert_eq!(token, expected);
    }
    // The token of s2 changes: b leaves the shared group for its own, written with the new one.
    let rotated = {
        let mut r = tokens(&[
            (&records[0], "shared"),
            (&records[2], "shared"),
            (&records[3], "own"),
        ]);
        r.insert(
            CredentialRef::of(&records[1]),
            Credentials::ApiToken("rotated".into()),
        );
        r
    };
    let groups = wanted_with(&table, &records, &rotated).groups;
    let b = groups
        .iter()
        .find(|(_, z)| z.tunnels.iter().any(|t| t.identity.name == "b"))
        .unwrap_or_else(|| panic!("no group of b"));
    assert_eq!(b.1.tunnels.len(), 1);
    assert_eq!(
        rotated.for_group(&b.0.credential),
        Ok(&Credentials::ApiToken("rotated".into()))
    );
}

#[test]
fn a_deleting_source_is_released_by_its_own_hostnames_only() {
    let table = table(&[("a", &[("keep.example.com", false)])]);
    let records = vec![record("a", "s1", Some("z1"), false)];
    let id = records[0].identity.clone();
    let mine = vec!["gone.example.com".to_string()];
    let mut view = DnsView {
        txt_records: true,
        ..DnsView::default()
    };
    assert!(
        !view.released(&id, &mine, &table, &records),
        "not synced yet"
    );
    let (key, zone) = wanted_plain(&table, &records)
        .groups
        .into_iter()
        .next()
        .unwrap_or_else(|| panic!("no group"));
    view.groups.insert(key, (zone.into(), false));
    let problem = |host: Option<&str>| DnsProblem {
        hostname: host.map(str::to_string),
        reason: REASON_DNS_CONFLICT,
        message: "x".into(),
    };
    view.problems
        .insert(id.clone(), vec![problem(Some("keep.example.com"))]);
    assert!(
        view.released(&id, &mine, &table, &records),
        "a conflict elsewhere in the zone does not hold it"
    );
    view.problems
        .insert(id.clone(), vec![problem(Some("GONE.example.com"))]);
    assert!(!view.released(&id, &mine, &table, &records));
    view.problems.insert(id.clone(), vec![problem(None)]);
    assert!(!view.released(&id, &mine, &table, &records));
    let moved = self::table(&[("a", &[("new.example.com", false)])]);
    view.problems.clear();
    assert!(
        !view.released(&id, &mine, &moved, &records),
        "the current input was not synced yet"
    );
}

#[test]
fn a_tunnel_is_settled_only_after_a_clean_sync_of_its_current_input() {
    let table = table(&[("a", &[("a.example.com", false)])]);
    let records = vec![record("a", "s1", Some("z1"), false)];
    let id = records[0].identity.clone();
    let mut view = DnsView {
        txt_records: true,
        ..DnsView::default()
    };
    assert!(!view.settled(&id, &table, &records));
    let (key, zone) = wanted_plain(&table, &records)
        .groups
        .into_iter()
        .next()
        .unwrap_or_else(|| panic!("no group"));
    view.groups
        .insert(key.clone(), (zone.clone().into(), false));
    assert!(!view.settled(&id, &table, &records), "a sync with problems");
    view.groups.insert(key, (zone.into(), true));
    assert!(view.settled(&id, &table, &records));
    let moved = self::table(&[("a", &[("a2.example.com", false)])]);
    assert!(
        !view.settled(&id, &moved, &records),
        "the input changed since"
    );
    let unknown = record("zz", "s1", None, false).identity;
    assert!(view.settled(&unknown, &table, &records), "no DNS at all");
}

fn zone(id: &str, name: &str) -> AccountZone {
    AccountZone::active(id, name)
}

/// The directory of the test records' credential `s1` and account `acc`.
fn listed(zones: &[AccountZone]) -> Directory {
    let mut r = record("a", "s1", Some("z1"), false);
    r.status.account_id = Some("acc".into());
    let key = (CredentialRef::of(&r), "acc".to_string());
    [(key, Arc::new(zones.to_vec()))].into_iter().collect()
}

fn with_account(mut r: TunnelRecord) -> TunnelRecord {
    r.status.account_id = Some("ACC".into());
    r
}

#[test]
fn one_tunnel_gets_a_group_per_zone_its_hostnames_are_placed_in() {
    let table = table(&[(
        "a",
        &[
            ("a.example.com", false),
            ("x.dev.example.com", false),
            ("b.example.net", false),
            ("quiet.elsewhere.org", true),
        ],
    )]);
    let records = vec![with_account(record("a", "s1", Some("z1"), false))];
    let directory = listed(&[
        zone("z1", "example.com"),
        zone("z2", "dev.example.com"),
        zone("z3", "example.net"),
    ]);
    let w = wanted_in(&table, &records, &directory);
    let placed: Vec<(String, String, Vec<String>)> = w
        .groups
        .iter()
        .map(|(k, z)| {
            (
                k.zone_id.clone(),
                z.zone_name.clone(),
                z.tunnels[0].hostnames.iter().cloned().collect(),
            )
        })
        .collect();
    assert_eq!(
        placed,
        vec![
            (
                "z1".into(),
                "example.com".into(),
                vec!["a.example.com".into()]
            ),
            (
                "z2".into(),
                "dev.example.com".into(),
                vec!["x.dev.example.com".into()]
            ),
            (
                "z3".into(),
                "example.net".into(),
                vec!["b.example.net".into()]
            ),
        ]
    );
    assert!(w.unplaced.is_empty(), "{:?}", w.unplaced);
}

#[test]
fn a_hostname_in_no_zone_is_reported_with_the_zones_and_without_a_list_only_the_own_zone_is_used() {
    let table = table(&[("a", &[("a.example.com", false), ("b.nowhere.org", false)])]);
    let records = vec![with_account(record("a", "s1", Some("z1"), false))];
    let directory = listed(&[zone("z1", "example.com"), zone("z3", "example.net")]);
    let w = wanted_in(&table, &records, &directory);
    assert_eq!(w.groups.len(), 1);
    let id = &records[0].identity;
    assert_eq!(
        w.unplaced[id],
        vec![DnsProblem {
            hostname: Some("b.nowhere.org".into()),
            reason: "DNSZoneNotFound",
            message: "b.nowhere.org is in no zone of the tunnel's Cloudflare account; its zones are example.com, example.net: use a hostname in one of them, or set disableDNSUpdates and manage its record yourself".into(),
        }]
    );
    // No list (the credential may not list zones): the own zone still gets its hostnames.
    let w = wanted_plain(&table, &records);
    let own: Vec<&String> = w
        .groups
        .values()
        .flat_map(|z| &z.tunnels[0].hostnames)
        .collect();
    assert_eq!(own, vec!["a.example.com"]);
    assert_eq!(w.unplaced[id][0].reason, REASON_DNS_ERROR);
    assert_eq!(w.unplaced[id][0].hostname.as_deref(), Some("b.nowhere.org"));
}

#[test]
fn a_zone_a_tunnel_had_hostnames_in_stays_in_its_groups_with_none_until_let_go() {
    let table = table(&[("a", &[("a.example.com", false)])]);
    let records = vec![with_account(record("a", "s1", Some("z1"), false))];
    let directory = listed(&[zone("z1", "example.com"), zone("z3", "example.net")]);
    let mut elsewhere = Elsewhere::new();
    elsewhere.insert(
        records[0].identity.clone(),
        [zone("z3", "example.net")].into_iter().collect(),
    );
    let w = wanted(
        &table,
        &records,
        true,
        &directory,
        &elsewhere,
        &Resolved::default(),
    );
    let z3: Vec<&ZoneDns> = w
        .groups
        .iter()
        .filter(|(k, _)| k.zone_id == "z3")
        .map(|(_, z)| z)
        .collect();
    assert_eq!(z3.len(), 1);
    assert_eq!(z3[0].zone_name, "example.net");
    assert!(
        z3[0].tunnels[0].hostnames.is_empty(),
        "its records there are removed"
    );
}

#[test]
fn the_own_zone_is_one_group_whatever_the_case_and_counts_when_the_list_misses_it() {
    let table = table(&[("a", &[("a.example.com", false), ("b.example.net", false)])]);
    let mut r = with_account(record("a", "s1", Some("z1"), false));
    r.status.zone_domain = Some("Example.COM".into());
    let records = vec![r];
    let both = listed(&[zone("z1", "example.com"), zone("z3", "example.net")]);
    let w = wanted_in(&table, &records, &both);
    let ids: Vec<&str> = w.groups.keys().map(|k| k.zone_id.as_str()).collect();
    assert_eq!(ids, vec!["z1", "z3"]);
    assert!(w.groups.values().all(|z| z.tunnels.len() == 1));
    // A list without the tunnel's own zone (found by name) still places its hostnames there.
    let without_own = listed(&[zone("z3", "example.net")]);
    let w = wanted_in(&table, &records, &without_own);
    let z1 = w
        .groups
        .iter()
        .find(|(k, _)| k.zone_id == "z1")
        .map(|(_, z)| z.tunnels[0].hostnames.iter().cloned().collect::<Vec<_>>());
    assert_eq!(z1, Some(vec!["a.example.com".to_string()]));
    assert!(w.unplaced.is_empty());
}

#[test]
fn a_tunnel_whose_domain_changed_is_in_its_old_zone_with_nothing_wanted_until_released() {
    let table = table(&[("a", &[("a.example.org", false)])]);
    let mut records = vec![record("a", "s1", Some("z2"), false)];
    records[0].status.zone_domain = Some("example.org".into());
    let old = ZoneRef {
        zone_id: "z1".into(),
        zone_domain: "example.com".into(),
    };
    records[0].status.previous_zones = Some(vec![old]);
    let groups = wanted_plain(&table, &records).groups;
    let zones: Vec<(&str, &str, usize)> = groups
        .iter()
        .map(|(k, z)| {
            (
                k.zone_id.as_str(),
                z.zone_name.as_str(),
                z.tunnels[0].hostnames.len(),
            )
        })
        .collect();
    assert_eq!(
        zones,
        vec![("z1", "example.com", 0), ("z2", "example.org", 1)]
    );
    let id = records[0].identity.clone();
    assert!(groups.values().all(|z| z.tunnels[0].identity == id));
    let old_group = groups.values().next().unwrap_or_else(|| panic!("no group"));
    assert!(wants_nothing(old_group, &id), "its records there go");
    // Settled only once the old zone is clean too.
    let mut view = DnsView {
        txt_records: true,
        groups: groups
            .clone()
            .into_iter()
            .map(|(k, z)| (k, (z.into(), true)))
            .collect(),
        ..DnsView::default()
    };
    assert!(view.settled(&id, &table, &records));
    for (k, (_, clean)) in view.groups.iter_mut() {
        *clean = k.zone_id != "z1";
    }
    assert!(
        !view.settled(&id, &table, &records),
        "records may be left in the old zone"
    );
    let patch = super::super::previous_zones::release_patch(&records[0], &["z1"])
        .map(|p| serde_json::to_value(p).unwrap_or_default());
    assert_eq!(
        patch,
        Some(serde_json::json!([
            {"op": "test", "path": "/status/previousZones", "value": [{"zoneId": "z1", "zoneDomain": "example.com"}]},
            {"op": "remove", "path": "/status/previousZones"},
        ]))
    );
    assert!(super::super::previous_zones::release_patch(&records[0], &["z9"]).is_none());
}

#[test]
fn a_previous_zone_that_still_holds_a_routed_hostname_wants_it_there() {
    // The domain moved to example.org, but a route still names a hostname of example.com.
    let table = table(&[("a", &[("a.example.org", false), ("b.example.com", false)])]);
    let mut r = with_account(record("a", "s1", Some("z2"), false));
    r.status.zone_domain = Some("example.org".into());
    r.status.previous_zones = Some(vec![ZoneRef {
        zone_id: "z1".into(),
        zone_domain: "example.com".into(),
    }]);
    let records = vec![r];
    let directory = listed(&[zone("z1", "example.com"), zone("z2", "example.org")]);
    let w = wanted_in(&table, &records, &directory);
    let placed: Vec<(&str, Vec<&str>)> = w
        .groups
        .iter()
        .map(|(k, z)| {
            let hosts = z.tunnels[0].hostnames.iter().map(String::as_str).collect();
            (k.zone_id.as_str(), hosts)
        })
        .collect();
    assert_eq!(
        placed,
        vec![("z1", vec!["b.example.com"]), ("z2", vec!["a.example.org"])]
    );
    let id = &records[0].identity;
    assert!(
        w.groups.values().all(|z| !wants_nothing(z, id)),
        "the old zone is not released while a hostname of the tunnel is placed there"
    );
}

#[test]
fn an_object_that_does_not_run_its_tunnel_wants_no_record() {
    use crate::term::ReadyReason;
    use crate::term::conditions::ready_condition;
    let table = table(&[("a", &[("a.example.com", false)])]);
    let mut r = record("a", "s1", Some("z1"), false);
    let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::UNIX_EPOCH);
    let conflict = ready_condition(None, ReadyReason::TunnelIdConflict, "x", None, now);
    r.status.conditions = Some(vec![conflict]);
    let records = vec![r];
    let w = wanted_plain(&table, &records);
    let hostnames: Vec<usize> = w
        .groups
        .values()
        .map(|z| z.tunnels[0].hostnames.len())
        .collect();
    assert_eq!(hostnames, vec![0], "in its zone with nothing wanted");
}

#[test]
fn a_group_knows_how_old_each_of_its_hostnames_route_is() {
    use cftunnel_policy::routes::{Age, SourceKind, SourceRef};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    let age = |name: &str, second: i64| {
        let source = SourceRef {
            kind: SourceKind::TunnelBinding,
            namespace: "ns".into(),
            name: name.into(),
            uid: String::new(),
        };
        let at = jiff::Timestamp::from_second(second).unwrap_or(jiff::Timestamp::UNIX_EPOCH);
        Age::new(Some(Time(at)), &source)
    };
    let mut table = table(&[
        (
            "a",
            &[("app.example.com", false), ("old.example.com", false)],
        ),
        ("b", &[("api.example.com", false)]),
    ]);
    let records = vec![
        record("a", "s", Some("z1"), false),
        record("b", "s", Some("z1"), false),
    ];
    for (tunnel, host, at) in [
        ("a", "app.example.com", 30),
        ("a", "old.example.com", 10),
        ("b", "api.example.com", 20),
    ] {
        let id = record(tunnel, "s", None, false).identity;
        if let Some(routes) = table.tunnels.get_mut(&id) {
            std::sync::Arc::make_mut(routes)
                .dns_since
                .insert(host.into(), age(tunnel, at));
        }
    }
    let groups = wanted_plain(&table, &records).groups;
    let zone = groups.values().next().unwrap_or_else(|| panic!("no group"));
    let since: Vec<(&str, &Age)> = zone.since.iter().map(|(h, a)| (h.as_str(), a)).collect();
    assert_eq!(
        since,
        vec![
            ("api.example.com", &age("b", 20)),
            ("app.example.com", &age("a", 30)),
            ("old.example.com", &age("a", 10)),
        ]
    );
}
