//! The ownership marker cftunnel writes into the `comment` of its DNS records.
//!
//! `cftunnel <tunnel identity> cluster=<id>`, e.g. `cftunnel Tunnel shop/edge cluster=<uid>`:
//! the operator always runs with a cluster id, so two clusters sharing one zone, even with the
//! same manifests, are never the same owner. The form without a cluster is what cftunnel wrote
//! before; such records are adopted, never deleted (`ownership.rs`). A marker is compared as a
//! whole string: a comment is ours only if it is exactly the marker we would write.
use std::fmt;

use sha2::{Digest, Sha256};

use cftunnel_types::TunnelIdentity;

/// Every marker starts with this; a comment starting with it belongs to some cftunnel.
pub const MARKER_PREFIX: &str = "cftunnel ";

/// Longest comment written: the Free plan's reported limit (Cloudflare publishes none).
pub const MAX_COMMENT_CHARS: usize = 100;

/// Hex digits of the digest that stands in for the tail of an over-long marker.
const DIGEST_HEX: usize = 16;

/// Names one cftunnel installation among several that share a zone.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClusterId(String);

impl ClusterId {
    /// 1 to 40 lowercase letters, digits or `-`: it goes into comments and TXT records.
    pub fn new(value: &str) -> Result<Self, String> {
        let ok = (1..=40).contains(&value.len())
            && value
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        if ok {
            Ok(Self(value.to_string()))
        } else {
            Err(format!(
                "cluster id {value:?} is not usable; use 1 to 40 lowercase letters, digits or '-'"
            ))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ClusterId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The comment that marks a record as owned by `identity` (at most [`MAX_COMMENT_CHARS`]).
///
/// Names are DNS labels, so the full marker is ASCII; one that would be too long keeps its
/// readable head and ends in `~` plus a digest of the whole, so it stays unique.
pub fn ownership_marker(identity: &TunnelIdentity, cluster: Option<&ClusterId>) -> String {
    let full = match cluster {
        Some(cluster) => format!("{MARKER_PREFIX}{identity} cluster={cluster}"),
        None => format!("{MARKER_PREFIX}{identity}"),
    };
    if full.chars().count() <= MAX_COMMENT_CHARS {
        return full;
    }
    let digest = Sha256::digest(full.as_bytes());
    let hex: String = digest
        .iter()
        .flat_map(|b| [b >> 4, b & 0xf])
        .take(DIGEST_HEX)
        .map(|n| char::from_digit(u32::from(n), 16).unwrap_or('0'))
        .collect();
    let head: String = full
        .chars()
        .take(MAX_COMMENT_CHARS - 1 - DIGEST_HEX)
        .collect();
    format!("{head}~{hex}")
}

/// The cluster a cftunnel marker names, if it names one in full (a marker cut to fit the
/// comment limit may have lost it).
pub(crate) fn marker_cluster(comment: &str) -> Option<&str> {
    let rest = comment.strip_prefix(MARKER_PREFIX)?;
    let (_, cluster) = rest.rsplit_once(" cluster=")?;
    ClusterId::new(cluster).ok().map(|_| cluster)
}

/// True if `comment` is some cftunnel's marker (ours or another installation's).
pub(crate) fn is_cftunnel_marker(comment: &str) -> bool {
    comment.starts_with(MARKER_PREFIX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cftunnel_types::TunnelKind;

    fn tunnel(namespace: &str, name: &str) -> TunnelIdentity {
        TunnelIdentity {
            kind: TunnelKind::Tunnel,
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    #[test]
    fn marker_names_the_identity_and_the_cluster() {
        assert_eq!(
            ownership_marker(&tunnel("shop", "edge"), None),
            "cftunnel Tunnel shop/edge"
        );
        let cluster = ClusterId::new("prod-eu").unwrap();
        let cluster_tunnel = TunnelIdentity {
            kind: TunnelKind::ClusterTunnel,
            namespace: String::new(),
            name: "edge".into(),
        };
        assert_eq!(
            ownership_marker(&cluster_tunnel, Some(&cluster)),
            "cftunnel ClusterTunnel edge cluster=prod-eu"
        );
    }

    #[test]
    fn long_markers_are_cut_to_the_limit_and_stay_distinct() {
        let long = "n".repeat(63);
        let a = ownership_marker(&tunnel(&long, &format!("{long}a")[1..]), None);
        let b = ownership_marker(&tunnel(&long, &format!("{long}b")[1..]), None);
        assert_eq!(a.len(), MAX_COMMENT_CHARS);
        assert_eq!(b.len(), MAX_COMMENT_CHARS);
        assert_ne!(a, b);
        assert!(a.starts_with("cftunnel Tunnel nnn"));
        assert!(is_cftunnel_marker(&a));
    }

    #[test]
    fn the_cluster_of_a_marker_is_read_whole_or_not_at_all() {
        assert_eq!(
            marker_cluster("cftunnel Tunnel shop/edge cluster=prod-eu"),
            Some("prod-eu")
        );
        assert_eq!(marker_cluster("cftunnel Tunnel shop/edge"), None);
        assert_eq!(marker_cluster("someone Tunnel a/b cluster=prod-eu"), None);
        let long = "n".repeat(63);
        let cut = ownership_marker(
            &tunnel(&long, &long[1..]),
            Some(&ClusterId::new("prod-eu").unwrap()),
        );
        assert_eq!(marker_cluster(&cut), None, "{cut}");
    }

    #[test]
    fn cluster_ids_are_checked() {
        assert!(ClusterId::new("a-1").is_ok());
        assert_eq!(
            ClusterId::new("Prod EU").unwrap_err(),
            "cluster id \"Prod EU\" is not usable; use 1 to 40 lowercase letters, digits or '-'"
        );
        assert!(ClusterId::new("").is_err());
        assert!(ClusterId::new(&"a".repeat(41)).is_err());
    }
}
