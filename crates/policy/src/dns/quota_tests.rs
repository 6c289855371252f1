//! Which hostnames a full zone's room goes to, and what the quota memory concludes.
use std::collections::BTreeMap;

use cftunnel_cloudflare::ZoneRecordQuota;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::super::fixtures::*;
use super::super::*;
use crate::routes::{Age, SourceKind, SourceRef};

fn age(created: i64, name: &str) -> Age {
    let source = SourceRef {
        kind: SourceKind::TunnelBinding,
        namespace: "shop".into(),
        name: name.into(),
        uid: format!("uid-{name}"),
    };
    let at = jiff::Timestamp::from_second(created).unwrap_or(jiff::Timestamp::UNIX_EPOCH);
    Age::new(Some(Time(at)), &source)
}

/// The plan's changes grouped by hostname, as the executor sends them.
fn groups(zone: &ZoneDns, actual: &[cftunnel_cloudflare::DnsRecord]) -> Vec<Vec<DnsChange>> {
    let mut out: Vec<Vec<DnsChange>> = Vec::new();
    for change in plan(zone, actual).changes {
        match out.last_mut() {
            Some(g) if g[0].hostname == change.hostname => g.push(change),
            _ => out.push(vec![change]),
        }
    }
    out
}

fn hostnames(groups: &[Vec<DnsChange>]) -> Vec<&str> {
    groups.iter().map(|g| g[0].hostname.as_str()).collect()
}

fn room(limit: usize, held: usize) -> ZoneRoom {
    ZoneRoom {
        limit,
        basis: QuotaBasis::Refused { held },
        held,
    }
}

/// `a`…`e`.example.com, routed by bindings created in the order of `created`.
fn five(created: [i64; 5]) -> ZoneDns {
    let names = ["a", "b", "c", "d", "e"];
    let hosts: Vec<String> = names.iter().map(|n| format!("{n}.example.com")).collect();
    let refs: Vec<&str> = hosts.iter().map(String::as_str).collect();
    let mut zone = zone(vec![tunnel("edge", ID_A, &refs)]);
    zone.since = hosts
        .iter()
        .zip(created)
        .zip(names)
        .map(|((h, at), n)| (h.clone(), age(at, n)))
        .collect();
    zone
}

#[test]
fn the_room_goes_to_the_oldest_routes_first() {
    let zone = five([50, 10, 40, 20, 30]);
    let fitted = fit(groups(&zone, &[]), &zone.since, Some(&room(10, 4)));
    // 6 records free, 2 per hostname: b (10), d (20), e (30) fit; c (40), a (50) do not.
    assert_eq!(
        hostnames(&fitted.send),
        vec!["b.example.com", "d.example.com", "e.example.com"]
    );
    assert_eq!(
        hostnames(&fitted.beyond),
        vec!["c.example.com", "a.example.com"]
    );
}

#[test]
fn one_sources_hostnames_are_ordered_by_name_and_an_unknown_age_comes_first() {
    let mut zone = five([10, 10, 10, 10, 10]);
    // One binding routes them all.
    for (_, at) in zone.since.iter_mut() {
        *at = age(10, "web");
    }
    zone.since.remove("d.example.com");
    let fitted = fit(groups(&zone, &[]), &zone.since, Some(&room(200, 196)));
    assert_eq!(
        hostnames(&fitted.send),
        vec!["d.example.com", "a.example.com"]
    );
    assert_eq!(
        hostnames(&fitted.beyond),
        vec!["b.example.com", "c.example.com", "e.example.com"]
    );
}

#[test]
fn a_hostname_that_does_not_fit_leaves_the_room_to_a_later_one_that_does() {
    // b needs 2 records, its TXT turned off for the other tunnel's c: 1 record.
    let mut lean = tunnel("lean", ID_B, &["c.example.com"]);
    lean.txt_records = false;
    let mut zone = zone(vec![tunnel("edge", ID_A, &["b.example.com"]), lean]);
    zone.since = BTreeMap::from([
        ("b.example.com".to_string(), age(10, "b")),
        ("c.example.com".to_string(), age(20, "c")),
    ]);
    let fitted = fit(groups(&zone, &[]), &zone.since, Some(&room(5, 4)));
    assert_eq!(hostnames(&fitted.send), vec!["c.example.com"]);
    assert_eq!(hostnames(&fitted.beyond), vec!["b.example.com"]);
    assert_eq!(records_needed(&fitted.beyond[0]), 2);
}

#[test]
fn records_deleted_in_the_same_sync_make_room_and_go_out_first() {
    // old.example.com is no longer routed: its CNAME and TXT go, which frees 2 records.
    let actual = [
        ours("c-old", "old.example.com", ID_A, "edge"),
        record(
            "t-old",
            "TXT",
            "_managed.old.example.com",
            &ManagedTxt {
                dns_id: "c-old".into(),
                tunnel_name: "edge-cf".into(),
                tunnel_id: ID_A.into(),
                owner: None,
            }
            .to_content(),
            Some(&marker("edge")),
        ),
    ];
    let zone = five([1, 2, 3, 4, 5]);
    let all = groups(&zone, &actual);
    let old = all.iter().find(|g| g[0].hostname == "old.example.com");
    assert_eq!(
        old.map(|g| records_added(g)),
        Some(-2),
        "{:?}",
        hostnames(&all)
    );
    // 10 held of 12: 2 free plus the 2 the deletes free make room for b and a.
    let fitted = fit(all, &zone.since, Some(&room(12, 10)));
    assert_eq!(
        hostnames(&fitted.send),
        vec!["old.example.com", "a.example.com", "b.example.com"]
    );
    assert_eq!(
        hostnames(&fitted.beyond),
        vec!["c.example.com", "d.example.com", "e.example.com"]
    );
}

#[test]
fn an_unknown_room_sends_every_hostname_oldest_first() {
    let zone = five([50, 10, 40, 20, 30]);
    let fitted = fit(groups(&zone, &[]), &zone.since, None);
    assert_eq!(
        hostnames(&fitted.send),
        vec![
            "b.example.com",
            "d.example.com",
            "e.example.com",
            "c.example.com",
            "a.example.com"
        ]
    );
    assert!(fitted.beyond.is_empty());
}

#[test]
fn a_zone_over_its_figure_has_no_room_and_updates_still_go() {
    // A record of ours to fix (no marker yet) costs no room.
    let actual = go_records("a.example.com", "edge-cf", ID_A);
    let zone = five([1, 2, 3, 4, 5]);
    let fitted = fit(groups(&zone, &actual), &zone.since, Some(&room(3, 7)));
    assert_eq!(hostnames(&fitted.send), vec!["a.example.com"]);
    assert_eq!(fitted.beyond.len(), 4);
}

fn free_plan() -> ZoneRecordQuota {
    ZoneRecordQuota {
        records: 200,
        plan: "Free Website".into(),
    }
}

#[test]
fn a_refusal_at_the_plan_figure_confirms_it() {
    let mut facts = QuotaFacts {
        reported: Some(free_plan()),
        ..QuotaFacts::default()
    };
    let plan = || "Free Website".to_string();
    assert_eq!(
        facts.limit(),
        Some((200, QuotaBasis::Reported { plan: plan() }))
    );
    facts.refused_at(199, 2);
    assert_eq!(
        facts.limit(),
        Some((200, QuotaBasis::Confirmed { plan: plan() }))
    );
    assert!(facts.limit().is_some_and(|(_, b)| b.is_confirmed()));
}

#[test]
fn a_refusal_below_the_plan_figure_is_the_bound_until_the_zone_holds_more() {
    let mut facts = QuotaFacts {
        reported: Some(free_plan()),
        ..QuotaFacts::default()
    };
    facts.refused_at(10, 2);
    assert_eq!(facts.limit(), Some((11, QuotaBasis::Refused { held: 10 })));
    assert!(
        !facts.disproved,
        "a smaller quota does not prove the figure wrong"
    );
    // The zone took more records since (a plan upgrade): back to the plan figure.
    facts.exceeded_by(40);
    assert_eq!(facts.refused, None);
    assert!(matches!(
        facts.limit(),
        Some((200, QuotaBasis::Reported { .. }))
    ));
    // Past both: neither holds.
    facts.refused_at(10, 2);
    facts.exceeded_by(300);
    assert_eq!((facts.limit(), facts.disproved), (None, true));
}

#[test]
fn a_zone_holding_more_than_its_plan_figure_disproves_it() {
    let mut facts = QuotaFacts {
        reported: Some(free_plan()),
        ..QuotaFacts::default()
    };
    facts.exceeded_by(600);
    assert!(facts.disproved);
    assert_eq!(facts.limit(), None);
    // Refused far above the figure (an older Free zone with a larger quota).
    facts.refused_at(1_000, 2);
    assert_eq!(
        facts.limit(),
        Some((1_001, QuotaBasis::Refused { held: 1_000 }))
    );
}

#[test]
fn the_memory_is_shared_by_clones_and_forgotten_per_zone() {
    let memory = QuotaMemory::default();
    memory
        .clone()
        .update("z", |f| f.reported = Some(free_plan()));
    assert_eq!(memory.get("z").reported, Some(free_plan()));
    assert_eq!(memory.get("y"), QuotaFacts::default());
    memory.forget("z");
    assert_eq!(memory.get("z"), QuotaFacts::default());
}

fn over(quota: Option<(usize, QuotaBasis)>, held: Option<usize>, records: usize) -> String {
    OverQuota {
        tunnel: identity("edge"),
        hostname: "app.example.com".into(),
        zone_name: "example.com".into(),
        records,
        held,
        quota,
    }
    .to_string()
}

#[test]
fn the_message_names_the_zone_its_quota_what_it_holds_and_the_fixes() {
    let confirmed = over(
        Some((
            200,
            QuotaBasis::Confirmed {
                plan: "Free Website".into(),
            },
        )),
        Some(200),
        2,
    );
    assert!(
        confirmed.starts_with(
            "no DNS record for app.example.com: zone example.com is at its Cloudflare record \
             quota (it holds 200 records; 200 records is the quota reported for its plan, Free \
             Website) and the hostname needs 2 records, its CNAME and its _managed TXT."
        ),
        "{confirmed}"
    );
    assert!(confirmed.contains("oldest routes first"), "{confirmed}");
    assert!(confirmed.contains("a paid plan"), "{confirmed}");
    assert!(confirmed.contains("route fewer hostnames"), "{confirmed}");
    assert!(confirmed.contains("--no-dns-txt-records"), "{confirmed}");

    let refused = over(Some((11, QuotaBasis::Refused { held: 10 })), Some(10), 1);
    assert!(
        refused.contains("(it holds 10 records and Cloudflare refuses more, code 81045)"),
        "{refused}"
    );
    assert!(refused.contains("needs 1 record, its CNAME"), "{refused}");
    assert!(
        !refused.contains("--no-dns-txt-records"),
        "no TXT to drop: {refused}"
    );
    let unknown = over(None, None, 2);
    assert!(
        unknown.contains("(Cloudflare refuses more records, code 81045)"),
        "{unknown}"
    );
}
