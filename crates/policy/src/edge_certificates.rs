//! Is a routed hostname covered by an active edge certificate? A tunnel route is a proxied
//! CNAME, and Cloudflare's edge presents a certificate only for a hostname one of the zone's
//! certificate packs covers: without one, HTTPS fails at the edge
//! (`ERR_SSL_VERSION_OR_CIPHER_MISMATCH`) while the tunnel is healthy and the record right.
//!
//! Universal SSL covers the apex and one level below it (`example.com`, `*.example.com`), so
//! `a.b.example.com` needs an advanced certificate (or an uploaded one). Total TLS does not
//! issue certificates for tunnel hostnames, as Cloudflare documents, so nothing here counts on
//! it. A pack's host covers a hostname exactly, or as a wildcard of exactly one label
//! (RFC 6125 §6.4.3): `*.example.com` covers `www.example.com`, not `example.com` nor
//! `a.b.example.com`. Only an `active` pack serves.

/// The reason of the finding, on the route's condition and the Event.
pub const REASON_EDGE_CERTIFICATE_MISSING: &str = "EdgeCertificateMissing";

/// One certificate pack as the zone lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pack {
    pub hosts: Vec<String>,
    pub status: String,
}

fn normal(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}

/// Does the pack host `host` cover `hostname`?
pub fn covers(host: &str, hostname: &str) -> bool {
    let (host, hostname) = (normal(host), normal(hostname));
    if host == hostname {
        return true;
    }
    match (host.strip_prefix("*."), hostname.split_once('.')) {
        (Some(suffix), Some((label, rest))) => !label.is_empty() && label != "*" && rest == suffix,
        _ => false,
    }
}

/// What the packs say of one hostname.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Coverage {
    Covered,
    /// Only packs that are not active cover it (their statuses).
    Pending(Vec<String>),
    Missing,
}

pub fn coverage(packs: &[Pack], hostname: &str) -> Coverage {
    let covering: Vec<&Pack> = packs
        .iter()
        .filter(|p| p.hosts.iter().any(|h| covers(h, hostname)))
        .collect();
    if covering.iter().any(|p| p.status == "active") {
        return Coverage::Covered;
    }
    if covering.is_empty() {
        return Coverage::Missing;
    }
    let mut statuses: Vec<String> = covering.iter().map(|p| p.status.clone()).collect();
    statuses.sort();
    statuses.dedup();
    Coverage::Pending(statuses)
}

/// The message of a hostname no active pack of `zone` covers; `None` when one does.
pub fn finding(packs: &[Pack], hostname: &str, zone: &str) -> Option<String> {
    let how = match coverage(packs, hostname) {
        Coverage::Covered => return None,
        Coverage::Pending(statuses) => format!(
            "is covered only by a certificate pack of zone {zone} that is not active yet ({})",
            statuses.join(", ")
        ),
        Coverage::Missing => format!("is not covered by any edge certificate of zone {zone}"),
    };
    let name = normal(hostname);
    let below = name.split_once('.').map_or(zone, |(_, rest)| rest);
    let first_level = name
        .strip_suffix(&format!(".{}", normal(zone)))
        .map(|labels| format!("{}.{zone}", labels.replace(['.', '*'], "-")));
    let rename = first_level
        .map(|n| format!(", or use a first-level name such as {n}"))
        .unwrap_or_default();
    Some(format!(
        "{hostname} {how}: HTTPS to it fails at Cloudflare's edge \
         (ERR_SSL_VERSION_OR_CIPHER_MISMATCH) although its DNS record is published. Universal \
         SSL covers {zone} and *.{zone} only; order an advanced certificate for *.{below} or \
         {hostname}, upload a custom certificate{rename}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn universal(zone: &str) -> Pack {
        Pack {
            hosts: vec![zone.to_string(), format!("*.{zone}")],
            status: "active".into(),
        }
    }

    #[test]
    fn a_wildcard_covers_exactly_one_label() {
        assert!(covers("*.example.com", "www.example.com"));
        assert!(covers("*.example.com", "WWW.Example.com."));
        assert!(!covers("*.example.com", "example.com"));
        assert!(!covers("*.example.com", "a.b.example.com"));
        assert!(!covers("*.example.com", "*.b.example.com"));
        assert!(covers("*.b.example.com", "*.b.example.com"));
        assert!(covers("*.b.example.com", "a.b.example.com"));
        assert!(covers("example.com", "example.com"));
        assert!(!covers("*.example.com", ".example.com"));
    }

    #[test]
    fn universal_ssl_covers_the_first_level_and_an_advanced_pack_a_deeper_one() {
        let mut packs = vec![universal("example.com")];
        assert_eq!(finding(&packs, "c.example.com", "example.com"), None);
        let missing = finding(&packs, "a.b.example.com", "example.com").unwrap_or_default();
        for part in [
            "a.b.example.com is not covered by any edge certificate of zone example.com",
            "ERR_SSL_VERSION_OR_CIPHER_MISMATCH",
            "order an advanced certificate for *.b.example.com or a.b.example.com",
            "upload a custom certificate",
            "a first-level name such as a-b.example.com",
        ] {
            assert!(missing.contains(part), "{part:?} not in {missing}");
        }
        packs.push(Pack {
            hosts: vec!["example.com".into(), "*.b.example.com".into()],
            status: "pending_validation".into(),
        });
        let pending = finding(&packs, "a.b.example.com", "example.com").unwrap_or_default();
        assert!(
            pending.contains("not active yet (pending_validation)"),
            "{pending}"
        );
        packs[1].status = "active".into();
        assert_eq!(finding(&packs, "a.b.example.com", "example.com"), None);
    }
}
