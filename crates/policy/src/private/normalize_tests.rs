//! CIDRs and private hostnames: what is refused with which message, the canonical forms, and
//! the properties desired and listed routes are compared by.
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;

use super::*;

fn cidr(text: &str) -> Cidr {
    Cidr::parse(text).expect(text)
}

#[test]
fn canonical_cidrs_are_read_in_both_families() {
    for (text, shown) in [
        ("10.20.0.0/24", "10.20.0.0/24"),
        ("10.20.0.7/32", "10.20.0.7/32"),
        ("0.0.0.0/0", "0.0.0.0/0"),
        ("fd00::/8", "fd00::/8"),
        ("FD00:0:0::/16", "fd00::/16"),
        ("::/0", "::/0"),
        ("2001:db8::1/128", "2001:db8::1/128"),
    ] {
        assert_eq!(cidr(text).to_string(), shown, "{text}");
    }
    assert_eq!(cidr("10.20.0.0/24").prefix(), 24);
    assert_eq!(
        cidr("10.20.0.0/24").addr(),
        IpAddr::V4(Ipv4Addr::new(10, 20, 0, 0))
    );
}

#[test]
fn a_cidr_with_host_bits_is_refused_naming_the_range_to_use() {
    assert_eq!(
        spec_cidr(2, "10.20.0.7/24").unwrap_err(),
        "spec.cidrs[2]: 10.20.0.7/24 has host bits set; use 10.20.0.0/24"
    );
    assert_eq!(
        Cidr::parse("fd00::1/8").unwrap_err().to_string(),
        "fd00::1/8 has host bits set; use fd00::/8"
    );
}

#[test]
fn malformed_cidrs_are_refused_with_what_is_wrong() {
    let message = |text: &str| Cidr::parse(text).unwrap_err().to_string();
    assert_eq!(
        message("10.0.0.1"),
        "10.0.0.1 is not in CIDR notation; use 10.0.0.1/32"
    );
    assert_eq!(
        message("fd00::1"),
        "fd00::1 is not in CIDR notation; use fd00::1/128"
    );
    assert_eq!(
        message("db"),
        "\"db\" is not in CIDR notation (address/prefix)"
    );
    assert_eq!(message("10.0.0/8"), "\"10.0.0/8\" has no valid IP address");
    assert_eq!(
        message(" 10.0.0.0/8"),
        "\" 10.0.0.0/8\" has no valid IP address"
    );
    for bad in [
        "10.0.0.0/33",
        "10.0.0.0/+8",
        "10.0.0.0/",
        "10.0.0.0/0008",
        "10.0.0.0/8 ",
    ] {
        assert_eq!(
            message(bad),
            format!("{bad:?} has no valid prefix length; use 0 to 32"),
            "{bad}"
        );
    }
    assert_eq!(
        message("fd00::/129"),
        "\"fd00::/129\" has no valid prefix length; use 0 to 128"
    );
}

#[test]
fn a_cluster_ip_is_routed_as_its_own_address() {
    assert_eq!(service_route("10.96.0.10"), Some(cidr("10.96.0.10/32")));
    assert_eq!(
        service_route("fd00:10:96::a"),
        Some(cidr("fd00:10:96::a/128"))
    );
    assert_eq!(service_route("None"), None);
    assert_eq!(service_route(""), None);
    assert_eq!(
        Cidr::host(IpAddr::V6(Ipv6Addr::LOCALHOST)).to_string(),
        "::1/128"
    );
}

#[test]
fn ranges_overlap_when_one_holds_the_other() {
    let wide = cidr("10.0.0.0/16");
    assert_eq!(wide.relation(&cidr("10.0.1.0/24")), Relation::Contains);
    assert_eq!(cidr("10.0.1.0/24").relation(&wide), Relation::Within);
    assert_eq!(wide.relation(&cidr("10.0.0.0/16")), Relation::Equal);
    assert_eq!(wide.relation(&cidr("10.1.0.0/16")), Relation::Disjoint);
    assert!(
        !cidr("0.0.0.0/0").overlaps(&cidr("::/0")),
        "families never overlap"
    );
    assert!(cidr("0.0.0.0/0").overlaps(&cidr("192.168.1.1/32")));
    assert_eq!(
        Cidr::containing(IpAddr::V4(Ipv4Addr::new(10, 20, 0, 7)), 24),
        Some(cidr("10.20.0.0/24"))
    );
    assert_eq!(Cidr::containing(IpAddr::V4(Ipv4Addr::LOCALHOST), 33), None);
}

#[test]
fn hostnames_are_normalised_as_cloudflare_stores_them() {
    assert_eq!(normalize_hostname("*.internal.local"), "internal.local");
    assert_eq!(normalize_hostname("*.Internal.Local."), "internal.local");
    assert_eq!(normalize_hostname("db.local"), "db.local");
    assert_eq!(
        private_hostname("*.Internal.local."),
        Ok("internal.local".into())
    );
    assert_eq!(private_hostname("db"), Ok("db".into()));
    assert_eq!(
        private_hostname("_svc.db-1.local"),
        Ok("_svc.db-1.local".into())
    );
}

#[test]
fn hostnames_cloudflare_would_not_take_are_refused() {
    let refused = |h: &str| spec_hostname(0, h).unwrap_err();
    assert_eq!(refused(""), "spec.hostnames[0]: \"\" names no host");
    assert_eq!(refused("*."), "spec.hostnames[0]: \"*.\" names no host");
    assert_eq!(
        refused("a..b"),
        "spec.hostnames[0]: \"a..b\" has an empty label"
    );
    assert_eq!(
        refused(".a"),
        "spec.hostnames[0]: \".a\" has an empty label"
    );
    assert_eq!(
        refused("a.*.local"),
        "spec.hostnames[0]: \"a.*.local\" has a `*` other than a leading `*.`"
    );
    assert_eq!(
        refused("a b.local"),
        "spec.hostnames[0]: \"a b.local\" has ' ', not a letter, digit, '-' or '_'"
    );
    assert!(refused(&"a".repeat(64)).ends_with("has a label longer than 63 characters"));
    let long = vec!["a".repeat(63); 4].join(".");
    assert_eq!(long.len(), 255);
    assert!(refused(&long).ends_with("has 255 characters, more than 254"));
    assert!(private_hostname(&long[1..]).is_ok());
}

fn any_cidr() -> impl Strategy<Value = Cidr> {
    prop_oneof![
        (any::<u32>(), 0u8..=32).prop_filter_map("v4", |(a, p)| {
            Cidr::containing(IpAddr::V4(Ipv4Addr::from(a)), p)
        }),
        (any::<u128>(), 0u8..=128).prop_filter_map("v6", |(a, p)| {
            Cidr::containing(IpAddr::V6(Ipv6Addr::from(a)), p)
        }),
        // Small ranges near each other, so that overlaps are common.
        (0u32..16, 28u8..=32).prop_filter_map("near", |(a, p)| {
            Cidr::containing(IpAddr::V4(Ipv4Addr::from(0x0a00_0000 | a)), p)
        }),
    ]
}

fn any_hostname() -> impl Strategy<Value = String> {
    (
        proptest::option::of(Just("*.")),
        proptest::collection::vec("[a-zA-Z0-9_-]{1,12}", 1..5),
        any::<bool>(),
    )
        .prop_map(|(star, labels, dot)| {
            format!(
                "{}{}{}",
                star.unwrap_or_default(),
                labels.join("."),
                if dot { "." } else { "" }
            )
        })
}

proptest! {
    #[test]
    fn a_canonical_cidr_reads_back_as_itself(c in any_cidr()) {
        prop_assert_eq!(Cidr::parse(&c.to_string()), Ok(c));
    }

    #[test]
    fn overlap_is_symmetric(a in any_cidr(), b in any_cidr()) {
        prop_assert_eq!(a.relation(&b), b.relation(&a).reversed());
        prop_assert_eq!(a.overlaps(&b), b.overlaps(&a));
    }

    #[test]
    fn a_range_with_host_bits_names_a_range_that_holds_the_address(
        a in any::<u32>(), p in 0u8..=32,
    ) {
        let address = IpAddr::V4(Ipv4Addr::from(a));
        let text = format!("{address}/{p}");
        match Cidr::parse(&text) {
            Ok(c) => prop_assert_eq!(c.addr(), address),
            Err(CidrError::HostBits { canonical, .. }) => {
                prop_assert!(canonical.contains(&Cidr::host(address)));
                prop_assert_eq!(Cidr::parse(&canonical.to_string()), Ok(canonical));
            }
            Err(other) => prop_assert!(false, "{}", other),
        }
    }

    #[test]
    fn normalising_a_hostname_twice_changes_nothing(h in "\\PC{0,40}") {
        let once = normalize_hostname(&h);
        prop_assert_eq!(normalize_hostname(&once), once);
    }

    #[test]
    fn an_accepted_hostname_is_stored_as_cftunnel_sends_it(h in any_hostname()) {
        let sent = private_hostname(&h);
        prop_assert_eq!(sent.clone(), Ok(normalize_hostname(&h)));
        let sent = sent.unwrap_or_default();
        prop_assert_eq!(private_hostname(&sent), Ok(sent.clone()));
    }
}
