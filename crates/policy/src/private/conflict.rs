//! A private route an owner asks for and cannot have: an older NetworkRoute holds it (or a
//! range overlapping it), or a route at Cloudflare that is not this installation's does.
use std::fmt;

use super::marker::Owner;

/// What an entry of a NetworkRoute routes, as its status names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EntryKind {
    Cidr,
    Service,
    Hostname,
}

impl EntryKind {
    /// `cidr`, `service` or `hostname`: a status entry's `kind`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Cidr => "cidr",
            Self::Service => "service",
            Self::Hostname => "hostname",
        }
    }
}

/// One route an owner asks for: the canonical CIDR (a Service's address as a CIDR) or the
/// normalised hostname, and the Service it comes from.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Entry {
    pub kind: EntryKind,
    pub route: String,
    pub service: Option<String>,
}

/// Who holds the route an owner asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HeldBy {
    /// An older owner routes `route`: the same one, or a range overlapping it in the same
    /// virtual network.
    Older { owner: Owner, route: String },
    /// A route at Cloudflare whose comment does not carry this installation's marker.
    Route { id: String, comment: String },
}

/// A route `owner` asked for that is left to whoever holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conflict {
    pub owner: Owner,
    pub entry: Entry,
    pub held_by: HeldBy,
}

impl fmt::Display for Conflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let route = &self.entry.route;
        match &self.held_by {
            HeldBy::Older { owner, route: held } if held == route => {
                write!(f, "{route} is routed by {owner}, which is older")
            }
            HeldBy::Older { owner, route: held } => {
                write!(
                    f,
                    "{route} overlaps {held} routed by {owner}, which is older"
                )
            }
            HeldBy::Route { id, comment } if comment.is_empty() => write!(
                f,
                "{route} is routed at Cloudflare by route {id}, without a comment: not made by this cftunnel"
            ),
            HeldBy::Route { id, comment } => write!(
                f,
                "{route} is routed at Cloudflare by route {id} ({comment:?}): not made by this cftunnel"
            ),
        }
    }
}
