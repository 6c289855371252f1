//! Planner properties over random zones: applying a plan converges (planning again changes
//! nothing), records that are not provably ours are never touched without overwrite, record
//! order does not matter, and every routed hostname without a conflict ends up with its CNAME.
use std::collections::BTreeSet;

use proptest::prelude::*;
use proptest::sample::{select, subsequence};

use super::fixtures::{ID_A, ID_B, ID_OLD, apply, identity, record, tunnel, zone};
use super::*;
use cftunnel_cloudflare::DnsRecord;

const FOREIGN_ID: &str = "ffffffff-0000-4000-8000-00000000000f";
const HOSTS: &[&str] = &[
    "a.example.com",
    "b.example.com",
    "*.example.com",
    "wildcard.example.com",
    "c.sub.example.com",
];
const NAMES: &[&str] = &["edge", "backup", "third"];

fn any_tunnel(name: &'static str) -> impl Strategy<Value = TunnelDns> {
    (
        select(&[ID_A, ID_B, ID_OLD][..]),
        subsequence(&[ID_A, ID_B, ID_OLD][..], 0..=2),
        subsequence(HOSTS, 0..=HOSTS.len()),
        any::<bool>(),
    )
        .prop_map(move |(id, previous, hosts, txt)| {
            let mut t = tunnel(name, id, &hosts);
            t.previous_tunnel_ids = previous.iter().map(|p| p.to_string()).collect();
            t.txt_records = txt;
            t
        })
}

fn any_zone() -> impl Strategy<Value = ZoneDns> {
    subsequence(NAMES, 1..=3)
        .prop_flat_map(|names| names.into_iter().map(any_tunnel).collect::<Vec<_>>())
        .prop_map(zone)
}

fn any_comment() -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        Just(None),
        select(NAMES).prop_map(|n| Some(ownership_marker(&identity(n), None))),
        Just(Some("cftunnel Tunnel shop/edge cluster=eu".to_string())),
        Just(Some("hand made".to_string())),
    ]
}

fn any_record() -> impl Strategy<Value = (String, String, String, Option<String>)> {
    let ids = select(&[ID_A, ID_B, ID_OLD, FOREIGN_ID][..]);
    let cname = (select(HOSTS), ids.clone(), any_comment()).prop_map(|(h, id, c)| {
        (
            "CNAME".to_string(),
            h.to_string(),
            format!("{id}.cfargotunnel.com"),
            c,
        )
    });
    let foreign_cname = (select(HOSTS), any_comment())
        .prop_map(|(h, c)| ("CNAME".into(), h.to_string(), "lb.example.net".into(), c));
    let txt = (select(HOSTS), ids, 0..8u8, any::<bool>(), any_comment());
    let txt = txt.prop_map(|(h, id, dns_id, quoted, c)| {
        let value = ManagedTxt {
            dns_id: format!("r{dns_id}"),
            tunnel_name: "t".into(),
            tunnel_id: id.into(),
            owner: None,
        };
        let content = match quoted {
            true => value.to_content(),
            false => serde_json::to_string(&value).unwrap_or_default(),
        };
        ("TXT".into(), managed_txt_name(h), content, c)
    });
    let junk_txt = select(HOSTS).prop_map(|h| {
        (
            "TXT".into(),
            managed_txt_name(h),
            "\"v=spf1 -all\"".into(),
            None,
        )
    });
    let a = select(HOSTS).prop_map(|h| ("A".into(), h.to_string(), "192.0.2.1".into(), None));
    prop_oneof![cname, foreign_cname, txt, junk_txt, a]
}

fn any_records() -> impl Strategy<Value = Vec<DnsRecord>> {
    proptest::collection::vec(any_record(), 0..8).prop_map(|specs| {
        specs
            .into_iter()
            .enumerate()
            .map(|(i, (t, name, content, comment))| {
                record(&format!("r{i}"), &t, &name, &content, comment.as_deref())
            })
            .collect()
    })
}

/// Independent of the planner's own classification: the only records it may touch without
/// overwrite carry one of the zone's markers, or no cftunnel marker and a link to our ids.
fn may_be_ours(zone: &ZoneDns, record: &DnsRecord) -> bool {
    let markers: BTreeSet<String> = zone
        .tunnels
        .iter()
        .map(|t| ownership_marker(&t.identity, None))
        .collect();
    let ids: BTreeSet<String> = zone
        .tunnels
        .iter()
        .flat_map(|t| std::iter::once(t.tunnel_id.clone()).chain(t.previous_tunnel_ids.clone()))
        .collect();
    let targets: BTreeSet<String> = ids.iter().map(|id| tunnel_target(id)).collect();
    match record.comment.as_deref() {
        Some(c) if markers.contains(c) => true,
        Some(c) if c.starts_with(MARKER_PREFIX) => false,
        _ => match record.record_type.as_str() {
            "CNAME" => targets.contains(&record.content),
            "TXT" => ManagedTxt::parse(&record.content).is_some_and(|v| ids.contains(&v.tunnel_id)),
            _ => false,
        },
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn applying_a_plan_converges(zone in any_zone(), actual in any_records(), overwrite in any::<bool>()) {
        let options = DnsOptions { overwrite_unmanaged: overwrite, ..DnsOptions::default() };
        let first = plan_zone(&zone, &actual, &options);
        let after = apply(&actual, &first);
        let second = plan_zone(&zone, &after, &options);
        prop_assert_eq!(&second.changes, &Vec::new(), "first plan: {:?}", first.changes);
    }

    #[test]
    fn records_not_ours_are_never_touched(zone in any_zone(), actual in any_records()) {
        let plan = plan_zone(&zone, &actual, &DnsOptions::default());
        for change in &plan.changes {
            let current = match &change.action {
                DnsAction::Create(_) => continue,
                DnsAction::Update { current, take_over, .. }
                | DnsAction::Delete { current, take_over } => {
                    prop_assert!(!take_over);
                    current
                }
            };
            let record = actual.iter().find(|r| Some(&r.id) == current.id.as_ref()).unwrap();
            prop_assert!(may_be_ours(&zone, record), "{:?} touched {:?}", change, record);
        }
    }

    #[test]
    fn order_of_records_does_not_matter(zone in any_zone(), actual in any_records()) {
        let options = DnsOptions::default();
        let mut reversed = actual.clone();
        reversed.reverse();
        prop_assert_eq!(plan_zone(&zone, &actual, &options), plan_zone(&zone, &reversed, &options));
    }

    #[test]
    fn routed_hostnames_without_conflict_get_their_cname(zone in any_zone(), actual in any_records()) {
        let plan = plan_zone(&zone, &actual, &DnsOptions::default());
        let after = apply(&actual, &plan);
        for tunnel in &zone.tunnels {
            for hostname in &tunnel.hostnames {
                if plan.conflicts.iter().any(|c| &c.hostname == hostname) {
                    continue;
                }
                let routing = zone.tunnels.iter().filter(|t| t.hostnames.contains(hostname)).count();
                prop_assert_eq!(routing, 1, "several tunnels route {} without a conflict", hostname);
                let target = tunnel_target(&tunnel.tunnel_id);
                let marker = ownership_marker(&tunnel.identity, None);
                prop_assert!(
                    after.iter().any(|r| &r.name == hostname && r.record_type == "CNAME"
                        && r.content == target && r.comment.as_deref() == Some(marker.as_str())),
                    "{} has no CNAME to {} after {:?}", hostname, target, plan.changes
                );
            }
        }
    }
}

proptest! {
    /// The planner sorts names by comparing them in place; that order is the one of the
    /// normalized strings.
    #[test]
    fn names_compare_in_place_as_their_normalized_strings(
        a in "[ aAbZ.*-]{0,6}",
        b in "[ aAbZ.*-]{0,6}",
    ) {
        prop_assert_eq!(
            super::plan::normalized_bytes(&a).cmp(super::plan::normalized_bytes(&b)),
            normalize_name(&a).cmp(&normalize_name(&b))
        );
    }
}
