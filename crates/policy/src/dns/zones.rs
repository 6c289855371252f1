//! Which zone of the account a hostname's records go to: the zone whose name is the hostname's
//! longest suffix (by whole labels), so with `example.com` and `dev.example.com` both in the
//! account, `a.dev.example.com` lands in `dev.example.com` (the delegated child zone answers
//! for it; a record in the parent would never be served). `*.x` is placed like `x`'s children;
//! a zone's apex is placed in that zone. Pure: the caller lists the account's zones.
use crate::rules::route::in_domain;

/// One zone of the account, as the zone list names it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AccountZone {
    pub id: String,
    pub name: String,
    /// Not active on Cloudflare yet (`pending`, `initializing`, `moved`, …): it takes no
    /// hostname, since resolvers are not sent to it; its hostnames go to the parent zone.
    pub inactive: bool,
}

impl AccountZone {
    /// An active zone.
    pub fn active(id: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            name: name.into(),
            inactive: false,
        }
    }
}

/// Most zone names a "no zone" message lists (an account may hold thousands).
pub const MAX_ZONES_NAMED: usize = 10;

/// The zone `fqdn` belongs to: the longest zone name that is a suffix of it (case-insensitive,
/// at a label boundary); `None` when no zone of `zones` holds it.
/// Inactive zones are passed over.
pub fn place<'z>(fqdn: &str, zones: &'z [AccountZone]) -> Option<&'z AccountZone> {
    zones
        .iter()
        .filter(|z| !z.inactive && !z.name.is_empty() && in_domain(fqdn, &z.name))
        .max_by_key(|z| z.name.len())
}

/// The inactive zone that would hold `fqdn` were it active: one nested deeper than the zone
/// [`place`] chose (so the hostname waits in the parent for it).
pub fn pending_zone<'z>(fqdn: &str, zones: &'z [AccountZone]) -> Option<&'z AccountZone> {
    let placed = place(fqdn, zones).map_or(0, |z| z.name.len());
    zones
        .iter()
        .filter(|z| z.inactive && z.name.len() > placed && in_domain(fqdn, &z.name))
        .max_by_key(|z| z.name.len())
}

/// The message of a hostname in no zone of the account: what it could have been in (the zone
/// names, sorted, at most [`MAX_ZONES_NAMED`], with the count of the others).
pub fn no_zone_message(fqdn: &str, zones: &[AccountZone]) -> String {
    let mut names: Vec<&str> = zones.iter().map(|z| z.name.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    if names.is_empty() {
        return format!(
            "{fqdn} is in no zone of the tunnel's Cloudflare account (the credential sees no zone); add its zone to the account, or set disableDNSUpdates and manage its record yourself"
        );
    }
    let shown = names.len().min(MAX_ZONES_NAMED);
    let more = match names.len() - shown {
        0 => String::new(),
        n => format!(" and {n} more"),
    };
    format!(
        "{fqdn} is in no zone of the tunnel's Cloudflare account; its zones are {}{more}: use a hostname in one of them, or set disableDNSUpdates and manage its record yourself",
        names[..shown].join(", ")
    )
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn zones(names: &[&str]) -> Vec<AccountZone> {
        names
            .iter()
            .enumerate()
            .map(|(i, n)| AccountZone::active(format!("z{i}"), n.to_string()))
            .collect()
    }

    fn placed<'z>(fqdn: &str, zones: &'z [AccountZone]) -> Option<&'z str> {
        place(fqdn, zones).map(|z| z.name.as_str())
    }

    #[test]
    fn an_inactive_child_zone_takes_no_hostname_until_it_is_active() {
        let mut z = zones(&["example.com", "dev.example.com"]);
        z[1].inactive = true;
        assert_eq!(placed("app.dev.example.com", &z), Some("example.com"));
        assert_eq!(
            pending_zone("app.dev.example.com", &z).map(|z| z.name.as_str()),
            Some("dev.example.com")
        );
        assert_eq!(pending_zone("app.example.com", &z), None);
        z[1].inactive = false;
        assert_eq!(placed("app.dev.example.com", &z), Some("dev.example.com"));
        assert_eq!(pending_zone("app.dev.example.com", &z), None);
        // An inactive zone alone holds nothing.
        let lone = [AccountZone {
            inactive: true,
            ..AccountZone::active("z9", "other.net")
        }];
        assert_eq!(placed("a.other.net", &lone), None);
    }

    #[test]
    fn the_longest_suffix_wins_when_zones_nest() {
        let z = zones(&["example.com", "dev.example.com", "other.net"]);
        assert_eq!(placed("a.dev.example.com", &z), Some("dev.example.com"));
        assert_eq!(placed("*.dev.example.com", &z), Some("dev.example.com"));
        assert_eq!(placed("dev.example.com", &z), Some("dev.example.com"));
        assert_eq!(placed("a.example.com", &z), Some("example.com"));
        assert_eq!(placed("example.com", &z), Some("example.com"));
        assert_eq!(placed("App.Other.NET", &z), Some("other.net"));
        // Same order reversed: the list order does not matter.
        let mut reversed = z.clone();
        reversed.reverse();
        assert_eq!(
            placed("a.dev.example.com", &reversed),
            Some("dev.example.com")
        );
    }

    #[test]
    fn only_whole_labels_match_and_a_hostname_in_no_zone_is_placed_nowhere() {
        let z = zones(&["example.com", "dev.example.com"]);
        assert_eq!(placed("aexample.com", &z), None);
        assert_eq!(placed("a.xdev.example.com", &z), Some("example.com"));
        assert_eq!(placed("example.org", &z), None);
        assert_eq!(placed("com", &z), None);
        assert_eq!(placed("a.example.com", &[]), None);
    }

    #[test]
    fn the_no_zone_message_names_the_zones_sorted_and_bounded() {
        let z = zones(&["b.net", "a.com", "b.net"]);
        assert_eq!(
            no_zone_message("x.org", &z),
            "x.org is in no zone of the tunnel's Cloudflare account; its zones are a.com, b.net: use a hostname in one of them, or set disableDNSUpdates and manage its record yourself"
        );
        let many: Vec<String> = (0..25).map(|i| format!("z{i:02}.com")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        let message = no_zone_message("x.org", &zones(&many));
        assert!(
            message.contains("its zones are z00.com, z01.com, z02.com, z03.com, z04.com, z05.com, z06.com, z07.com, z08.com, z09.com and 15 more:"),
            "{message}"
        );
        assert!(no_zone_message("x.org", &[]).contains("the credential sees no zone"));
    }

    fn label() -> impl Strategy<Value = String> {
        "[a-c]{1,2}"
    }

    proptest! {
        /// The chosen zone is a suffix of the hostname at a label boundary, and no longer zone
        /// name in the list is one; when nothing is chosen, no zone name is a suffix.
        #[test]
        fn placement_is_the_longest_label_suffix(
            host in prop::collection::vec(label(), 1..5),
            zone_labels in prop::collection::vec(prop::collection::vec(label(), 1..4), 0..8),
        ) {
            let fqdn = host.join(".");
            let names: Vec<String> = zone_labels.iter().map(|l| l.join(".")).collect();
            let z: Vec<AccountZone> = names.iter().enumerate()
                .map(|(i, n)| AccountZone::active(i.to_string(), n.clone()))
                .collect();
            let is_suffix = |zone: &str| {
                let zl: Vec<&str> = zone.split('.').collect();
                zl.len() <= host.len() && host[host.len() - zl.len()..].iter().map(String::as_str).eq(zl.iter().copied())
            };
            match place(&fqdn, &z) {
                Some(chosen) => {
                    prop_assert!(is_suffix(&chosen.name));
                    prop_assert!(!names.iter().any(|n| is_suffix(n) && n.len() > chosen.name.len()));
                }
                None => prop_assert!(!names.iter().any(|n| is_suffix(n))),
            }
        }
    }
}
