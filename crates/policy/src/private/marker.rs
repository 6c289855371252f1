//! The ownership marker cftunnel writes at the start of the `comment` of every private route
//! and virtual network it makes: Cloudflare keeps no labels on these objects, and at most 100
//! characters of a route's comment.
//!
//! A comment is `cftunnel:<cluster id>:<owner digest> <namespace>/<name>[: <user comment>]`,
//! e.g. `cftunnel:prod-eu:3f9a0c2d71be shop/db: reporting replicas`. The marker (up to the
//! first space) is never shortened: at most 62 characters whatever the names, since the owner
//! (kind, namespace and name) is always written as a 12-hex-digit digest. The readable
//! `namespace/name` and the user's comment after it are shortened to fit 100 characters.
use std::fmt;

use sha2::{Digest, Sha256};

use crate::dns::ClusterId;

/// Every marker of a private route or network starts with this.
pub const PRIVATE_MARKER_PREFIX: &str = "cftunnel:";

/// The most characters Cloudflare keeps in a route's comment; cftunnel's comments never pass it.
pub const MAX_ROUTE_COMMENT_CHARS: usize = 100;

/// Hex digits of an owner digest.
const OWNER_DIGEST_HEX: usize = 12;

/// What a shortened readable part ends with.
const ELLIPSIS: &str = "...";

/// The kinds of object that own private routes and networks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum OwnerKind {
    NetworkRoute,
    VirtualNetwork,
    Gateway,
}

impl OwnerKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NetworkRoute => "NetworkRoute",
            Self::VirtualNetwork => "VirtualNetwork",
            Self::Gateway => "Gateway",
        }
    }
}

/// The object a route or network is made for; `namespace` is empty for a cluster-scoped kind.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Owner {
    pub kind: OwnerKind,
    pub namespace: String,
    pub name: String,
}

impl Owner {
    pub fn new(kind: OwnerKind, namespace: &str, name: &str) -> Self {
        Self {
            kind,
            namespace: namespace.to_string(),
            name: name.to_string(),
        }
    }

    /// The digest the marker names this owner by.
    pub fn digest(&self) -> OwnerDigest {
        let text = format!("{}/{}/{}", self.kind.as_str(), self.namespace, self.name);
        let digest = Sha256::digest(text.as_bytes());
        let hex = digest
            .iter()
            .flat_map(|b| [b >> 4, b & 0xf])
            .take(OWNER_DIGEST_HEX)
            .filter_map(|n| char::from_digit(u32::from(n), 16))
            .collect();
        OwnerDigest(hex)
    }

    /// `namespace/name`, or `name` for a cluster-scoped owner.
    pub fn readable(&self) -> String {
        if self.namespace.is_empty() {
            self.name.clone()
        } else {
            format!("{}/{}", self.namespace, self.name)
        }
    }
}

impl fmt::Display for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.kind.as_str(), self.readable())
    }
}

/// An owner as a marker names it: 12 lowercase hex digits.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OwnerDigest(String);

impl OwnerDigest {
    /// Reads a digest as written in a marker.
    pub fn parse(text: &str) -> Option<Self> {
        let ok = text.len() == OWNER_DIGEST_HEX
            && text
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        ok.then(|| Self(text.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for OwnerDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What a marker says: the installation and the object a route or network was made for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Marker {
    pub cluster: ClusterId,
    pub owner: OwnerDigest,
}

/// Whose a route or network is, read from its comment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ownership {
    /// Made by this installation for the owner with this digest.
    Ours(OwnerDigest),
    /// Made by another cftunnel installation.
    OtherCluster(ClusterId),
    /// Not made by cftunnel (or its marker was edited): never changed or deleted.
    Foreign,
}

/// The marker alone: `cftunnel:<cluster>:<digest>`.
pub fn private_marker(cluster: &ClusterId, owner: &Owner) -> String {
    format!("{PRIVATE_MARKER_PREFIX}{cluster}:{}", owner.digest())
}

/// The whole comment cftunnel writes for `owner`: the marker in full, then the readable owner
/// and the user's comment (trimmed), shortened so the whole has at most
/// [`MAX_ROUTE_COMMENT_CHARS`] characters.
pub fn ownership_comment(cluster: &ClusterId, owner: &Owner, user: Option<&str>) -> String {
    let marker = private_marker(cluster, owner);
    let room = MAX_ROUTE_COMMENT_CHARS.saturating_sub(marker.chars().count() + 1);
    let name = owner.readable();
    let name_chars = name.chars().count();
    let tail = match user.map(str::trim).filter(|c| !c.is_empty()) {
        None => shorten(&name, room),
        Some(comment) => {
            let comment_chars = comment.chars().count();
            if name_chars + 2 + comment_chars <= room {
                format!("{name}: {comment}")
            } else {
                // The name keeps at least half the room, more if the comment is short.
                let name_room =
                    name_chars.min((room / 2).max(room.saturating_sub(comment_chars + 2)));
                let name_part = shorten(&name, name_room);
                let left = room.saturating_sub(name_part.chars().count() + 2);
                format!("{name_part}: {}", shorten(comment, left))
            }
        }
    };
    let tail = tail.trim();
    if tail.is_empty() {
        marker
    } else {
        format!("{marker} {tail}")
    }
}

/// The marker at the start of `comment`, if it is a well-formed one.
pub fn parse_marker(comment: &str) -> Option<Marker> {
    let rest = comment.strip_prefix(PRIVATE_MARKER_PREFIX)?;
    let token = rest.split(' ').next().unwrap_or_default();
    let (cluster, owner) = token.rsplit_once(':')?;
    Some(Marker {
        cluster: ClusterId::new(cluster).ok()?,
        owner: OwnerDigest::parse(owner)?,
    })
}

/// Whose the object with `comment` is, seen from the installation `cluster`.
pub fn ownership(comment: &str, cluster: &ClusterId) -> Ownership {
    match parse_marker(comment) {
        Some(marker) if marker.cluster == *cluster => Ownership::Ours(marker.owner),
        Some(marker) => Ownership::OtherCluster(marker.cluster),
        None => Ownership::Foreign,
    }
}

/// `text` cut on a character boundary to at most `max` characters, ending in `...` when cut.
fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let keep = max.saturating_sub(ELLIPSIS.len());
    if keep == 0 {
        return String::new();
    }
    let head: String = text.chars().take(keep).collect();
    format!("{}{ELLIPSIS}", head.trim_end())
}

#[cfg(test)]
#[path = "marker_tests.rs"]
mod tests;
