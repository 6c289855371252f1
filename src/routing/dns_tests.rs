//! Tests of the DNS sync scheduling: groups, settling and release of deleting sources.
use super::*;
use crate::admission::TunnelKind;
use crate::api::{CloudflareDetails, TunnelStatus, ZoneRef};
use crate::routes::{DnsName, TunnelRoutes};

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
            TunnelRoutes {
                dns,
                ..TunnelRoutes::default()
            },
        );
    }
    table
}

#[test]
fn groups_are_per_zone_and_api_secret_and_skip_what_cannot_have_dns() {
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
    let groups = wanted(&table, &records, true);
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
    assert_eq!(
        hosts,
        vec![
            vec!["a.example.com".to_string()],
            vec!["b.example.com".to_string()]
        ]
    );
}

#[test]
fn tunnels_reading_one_secret_through_different_keys_are_synced_apart() {
    let table = table(&[
        ("a", &[("a.example.com", false)]),
        ("b", &[("b.example.com", false)]),
        ("c", &[("c.example.com", false)]),
    ]);
    let mut records = vec![
        record("a", "s1", Some("z1"), false),
        record("b", "s1", Some("z1"), false),
        record("c", "s1", Some("z1"), false),
    ];
    records[1].cloudflare.api_token_key = "OTHER_TOKEN".into();
    records[2].cloudflare.email = Some("ops@example.com".into());
    let groups = wanted(&table, &records, true);
    assert_eq!(groups.len(), 3, "{groups:?}");
    for (key, zone) in &groups {
        let r = records
            .iter()
            .find(|r| r.identity == zone.tunnels[0].identity)
            .unwrap_or_else(|| panic!("no record"));
        assert_eq!(zone.tunnels.len(), 1);
        assert_eq!(key.api_token_key, r.cloudflare.api_token_key);
        assert_eq!(key.email, r.cloudflare.email);
    }
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
    let (key, zone) = wanted(&table, &records, true)
        .into_iter()
        .next()
        .unwrap_or_else(|| panic!("no group"));
    view.groups.insert(key.clone(), (zone, false));
    let in_group = |p: DnsProblem| BTreeMap::from([(key.clone(), vec![p])]);
    let problem = |host: Option<&str>| DnsProblem {
        hostname: host.map(str::to_string),
        reason: REASON_DNS_CONFLICT,
        message: "x".into(),
    };
    view.problems
        .insert(id.clone(), in_group(problem(Some("keep.example.com"))));
    assert!(
        view.released(&id, &mine, &table, &records),
        "a conflict elsewhere in the zone does not hold it"
    );
    view.problems
        .insert(id.clone(), in_group(problem(Some("GONE.example.com"))));
    assert!(!view.released(&id, &mine, &table, &records));
    view.problems.insert(id.clone(), in_group(problem(None)));
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
    let (key, zone) = wanted(&table, &records, true)
        .into_iter()
        .next()
        .unwrap_or_else(|| panic!("no group"));
    view.groups.insert(key.clone(), (zone.clone(), false));
    assert!(!view.settled(&id, &table, &records), "a sync with problems");
    view.groups.insert(key, (zone, true));
    assert!(view.settled(&id, &table, &records));
    let moved = self::table(&[("a", &[("a2.example.com", false)])]);
    assert!(
        !view.settled(&id, &moved, &records),
        "the input changed since"
    );
    let unknown = record("zz", "s1", None, false).identity;
    assert!(view.settled(&unknown, &table, &records), "no DNS at all");
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
    records[0].status.previous_zones = Some(vec![old.clone()]);
    let groups = wanted(&table, &records, true);
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
    let view = DnsView {
        txt_records: true,
        groups: groups
            .clone()
            .into_iter()
            .map(|(k, z)| (k, (z, true)))
            .collect(),
        ..DnsView::default()
    };
    let (key, _) = view
        .group_of(&id, &table, &records)
        .unwrap_or_else(|| panic!("no group"));
    assert_eq!(key.zone_id, "z2", "its own group is the current zone's");
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
