//! The canonical forms of what private routes route: CIDRs (IPv4 and IPv6, no host bit set),
//! a Service's cluster IP as a /32 or /128, and private hostnames as Cloudflare stores them.
//!
//! A CIDR with host bits set (`10.20.0.7/24`) is refused with the range to use, not quietly
//! widened: the user may have meant the single address. Desired and listed routes are compared
//! in these forms only, so what Cloudflare writes back never looks like a change.
use std::fmt;
use std::net::IpAddr;

/// The longest private hostname Cloudflare takes: fewer than 255 characters.
pub const MAX_PRIVATE_HOSTNAME_CHARS: usize = 254;

/// The longest label of a private hostname (a DNS label: cloudflared resolves the name).
const MAX_LABEL_CHARS: usize = 63;

/// An IPv4 or IPv6 range whose address has no bit set right of its prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Cidr {
    addr: IpAddr,
    prefix: u8,
}

/// How two ranges lie to each other, seen from the first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Relation {
    /// No address in common (always so between IPv4 and IPv6).
    Disjoint,
    Equal,
    /// The first holds every address of the second, and more.
    Contains,
    /// The second holds every address of the first, and more.
    Within,
}

impl Relation {
    /// The same relation seen from the other range.
    pub fn reversed(self) -> Self {
        match self {
            Self::Contains => Self::Within,
            Self::Within => Self::Contains,
            other => other,
        }
    }
}

/// Why a text is not a canonical CIDR; its `Display` is the message admission shows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CidrError {
    /// No `/`; `address` is the text when it is a bare address.
    NotCidr {
        text: String,
        address: Option<IpAddr>,
    },
    BadAddress {
        text: String,
    },
    BadPrefix {
        text: String,
        max: u8,
    },
    HostBits {
        text: String,
        canonical: Cidr,
    },
}

impl fmt::Display for CidrError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotCidr {
                address: Some(address),
                ..
            } => {
                let bits = if address.is_ipv4() { 32 } else { 128 };
                write!(f, "{address} is not in CIDR notation; use {address}/{bits}")
            }
            Self::NotCidr {
                text,
                address: None,
            } => write!(f, "{text:?} is not in CIDR notation (address/prefix)"),
            Self::BadAddress { text } => write!(f, "{text:?} has no valid IP address"),
            Self::BadPrefix { text, max } => {
                write!(f, "{text:?} has no valid prefix length; use 0 to {max}")
            }
            Self::HostBits { text, canonical } => {
                write!(f, "{text} has host bits set; use {canonical}")
            }
        }
    }
}

impl Cidr {
    /// `address/prefix`, IPv4 or IPv6 (any form the standard library reads), a decimal prefix
    /// the family allows, no host bit set.
    pub fn parse(text: &str) -> Result<Self, CidrError> {
        let Some((address, prefix)) = text.split_once('/') else {
            return Err(CidrError::NotCidr {
                text: text.to_string(),
                address: text.parse().ok(),
            });
        };
        let addr: IpAddr = address.parse().map_err(|_| CidrError::BadAddress {
            text: text.to_string(),
        })?;
        let max = bits(addr);
        let prefix = Some(prefix)
            .filter(|p| (1..=3).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|p| p.parse::<u8>().ok())
            .filter(|p| *p <= max)
            .ok_or_else(|| CidrError::BadPrefix {
                text: text.to_string(),
                max,
            })?;
        let canonical = Self {
            addr: masked(addr, prefix),
            prefix,
        };
        if canonical.addr != addr {
            return Err(CidrError::HostBits {
                text: text.to_string(),
                canonical,
            });
        }
        Ok(canonical)
    }

    /// The range of one address: a /32 or a /128.
    pub fn host(addr: IpAddr) -> Self {
        Self {
            addr,
            prefix: bits(addr),
        }
    }

    /// The range of `prefix` bits holding `addr`; `None` if the family has fewer bits.
    pub fn containing(addr: IpAddr, prefix: u8) -> Option<Self> {
        (prefix <= bits(addr)).then(|| Self {
            addr: masked(addr, prefix),
            prefix,
        })
    }

    pub fn addr(&self) -> IpAddr {
        self.addr
    }

    pub fn prefix(&self) -> u8 {
        self.prefix
    }

    /// Whether every address of `other` is in this range (a range contains itself).
    pub fn contains(&self, other: &Cidr) -> bool {
        self.addr.is_ipv4() == other.addr.is_ipv4()
            && self.prefix <= other.prefix
            && masked(other.addr, self.prefix) == self.addr
    }

    pub fn relation(&self, other: &Cidr) -> Relation {
        match (self.contains(other), other.contains(self)) {
            (true, true) => Relation::Equal,
            (true, false) => Relation::Contains,
            (false, true) => Relation::Within,
            (false, false) => Relation::Disjoint,
        }
    }

    /// Whether the two ranges have an address in common: one holds the other.
    pub fn overlaps(&self, other: &Cidr) -> bool {
        self.relation(other) != Relation::Disjoint
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

/// Entry `index` of `spec.cidrs`, or admission's message: `spec.cidrs[1]: 10.20.0.7/24 has host
/// bits set; use 10.20.0.0/24`.
pub fn spec_cidr(index: usize, text: &str) -> Result<Cidr, String> {
    Cidr::parse(text).map_err(|e| format!("spec.cidrs[{index}]: {e}"))
}

/// The route of a Service's cluster IP (`spec.clusterIPs` entry): a /32 or /128; `None` for a
/// headless Service's `None`, an empty or an unreadable value.
pub fn service_route(cluster_ip: &str) -> Option<Cidr> {
    cluster_ip.parse().ok().map(Cidr::host)
}

/// A hostname as Cloudflare stores a hostname route's: leading `*` and `.` and trailing `.`
/// trimmed, lower case (`*.Internal.Local.` is `internal.local`). Applied to listed routes
/// as they are and to desired ones after [`private_hostname`] accepted them.
pub fn normalize_hostname(hostname: &str) -> String {
    hostname
        .trim_start_matches(['*', '.'])
        .trim_end_matches('.')
        .to_ascii_lowercase()
}

/// A private hostname checked as Cloudflare takes it, then normalised: fewer than 255
/// characters, an optional leading `*.` and trailing `.`, labels of 1 to 63 letters, digits,
/// `-` or `_`.
pub fn private_hostname(hostname: &str) -> Result<String, String> {
    let chars = hostname.chars().count();
    if chars > MAX_PRIVATE_HOSTNAME_CHARS {
        return Err(format!(
            "has {chars} characters, more than {MAX_PRIVATE_HOSTNAME_CHARS}"
        ));
    }
    let name = hostname.strip_prefix("*.").unwrap_or(hostname);
    let name = name.strip_suffix('.').unwrap_or(name);
    if name.is_empty() {
        return Err("names no host".into());
    }
    for label in name.split('.') {
        if label.is_empty() {
            return Err("has an empty label".into());
        }
        if label.len() > MAX_LABEL_CHARS {
            return Err(format!(
                "has a label longer than {MAX_LABEL_CHARS} characters"
            ));
        }
        if label == "*" {
            return Err("has a `*` other than a leading `*.`".into());
        }
        if let Some(c) = label
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '_'))
        {
            return Err(format!("has {c:?}, not a letter, digit, '-' or '_'"));
        }
    }
    Ok(normalize_hostname(name))
}

/// Entry `index` of `spec.hostnames`, normalised, or admission's message.
pub fn spec_hostname(index: usize, hostname: &str) -> Result<String, String> {
    private_hostname(hostname).map_err(|e| format!("spec.hostnames[{index}]: {hostname:?} {e}"))
}

fn bits(addr: IpAddr) -> u8 {
    if addr.is_ipv4() { 32 } else { 128 }
}

/// `addr` with every bit right of `prefix` cleared.
fn masked(addr: IpAddr, prefix: u8) -> IpAddr {
    match addr {
        IpAddr::V4(v4) => {
            let mask = u32::MAX
                .checked_shl(32u32.saturating_sub(u32::from(prefix)))
                .unwrap_or(0);
            IpAddr::V4((u32::from(v4) & mask).into())
        }
        IpAddr::V6(v6) => {
            let mask = u128::MAX
                .checked_shl(128u32.saturating_sub(u32::from(prefix)))
                .unwrap_or(0);
            IpAddr::V6((u128::from(v6) & mask).into())
        }
    }
}

#[cfg(test)]
#[path = "normalize_tests.rs"]
mod tests;
