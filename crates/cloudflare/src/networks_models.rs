//! Private-network models: virtual networks, IP (CIDR) routes and hostname routes, as
//! Cloudflare answers them and as the client sends them, with the checks made before sending.
//!
//! None of these objects has tags or labels: `comment` (and a virtual network's `name`) is the
//! only place an owner marker fits, at most [`ROUTE_COMMENT_MAX_CHARS`] characters on a route.
use std::net::IpAddr;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use super::error::CloudflareError;
use super::models::null_as_default;

/// Longest route comment (IP routes, per the current API reference; hostname routes have no
/// stated limit and are held to the same).
pub const ROUTE_COMMENT_MAX_CHARS: usize = 100;
/// Longest virtual network name, and comment (the schema's `maxLength`).
pub const VIRTUAL_NETWORK_TEXT_MAX_CHARS: usize = 256;
/// Private hostnames have fewer than 255 characters.
pub const PRIVATE_HOSTNAME_MAX_CHARS: usize = 254;

/// A virtual network: a namespace of IP routes, so two networks may route the same range.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct VirtualNetwork {
    pub id: String,
    #[serde(default)]
    pub name: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub comment: String,
    /// True on exactly one network of the account, its default: routes created without a
    /// network go there.
    #[serde(default)]
    pub is_default_network: bool,
    #[serde(default)]
    pub created_at: Option<Timestamp>,
    #[serde(default)]
    pub deleted_at: Option<Timestamp>,
}

impl VirtualNetwork {
    pub fn is_deleted(&self) -> bool {
        self.deleted_at.is_some()
    }
}

/// Body of a virtual network create.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NewVirtualNetwork {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    /// Sent (as `is_default_network`, the name cloudflared and the current SDKs use) only when
    /// true: the new network then becomes the account's default, demoting the old one.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub is_default_network: bool,
}

impl NewVirtualNetwork {
    /// A network that is not the default, without a comment.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            comment: None,
            is_default_network: false,
        }
    }

    pub fn with_comment(mut self, comment: impl Into<String>) -> Self {
        self.comment = Some(comment.into());
        self
    }

    pub(crate) fn validate(&self) -> Result<(), CloudflareError> {
        if self.name.trim().is_empty() {
            return Err(invalid("virtual network name is empty"));
        }
        network_text("name", &self.name)?;
        self.comment
            .as_deref()
            .map_or(Ok(()), |c| network_text("comment", c))
    }
}

/// Body of a virtual network PATCH: only the fields set are sent and changed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct VirtualNetworkUpdate {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    /// `Some(true)` makes the network the default (demoting the old one). Cloudflare refuses
    /// `Some(false)` on the default: another network must be made the default instead.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub is_default_network: Option<bool>,
}

impl VirtualNetworkUpdate {
    pub(crate) fn validate(&self) -> Result<(), CloudflareError> {
        if let Some(name) = &self.name {
            if name.trim().is_empty() {
                return Err(invalid("virtual network name is empty"));
            }
            network_text("name", name)?;
        }
        self.comment
            .as_deref()
            .map_or(Ok(()), |c| network_text("comment", c))
    }
}

/// An IP route: a range of a virtual network reached through a tunnel.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct IpRoute {
    pub id: String,
    /// CIDR notation, `10.0.0.0/8`.
    pub network: String,
    #[serde(default)]
    pub tunnel_id: String,
    /// `None` only on routes older than virtual networks.
    #[serde(default)]
    pub virtual_network_id: Option<String>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub comment: String,
    #[serde(default)]
    pub created_at: Option<Timestamp>,
    #[serde(default)]
    pub deleted_at: Option<Timestamp>,
    /// List answers only: the tunnel's type (`cfd_tunnel`, `warp_connector`, …).
    #[serde(default)]
    pub tun_type: Option<String>,
    /// List answers only.
    #[serde(default)]
    pub tunnel_name: Option<String>,
    /// List answers only.
    #[serde(default)]
    pub virtual_network_name: Option<String>,
}

impl IpRoute {
    pub fn is_deleted(&self) -> bool {
        self.deleted_at.is_some()
    }
}

/// Body of an IP route create.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NewIpRoute {
    /// CIDR notation with no host bit set (`10.0.0.0/8`, not `10.0.0.1/8`).
    pub network: String,
    pub tunnel_id: String,
    /// The account's default network when `None`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub virtual_network_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
}

impl NewIpRoute {
    /// A route of `network` through `tunnel_id` in the default network, without a comment.
    pub fn new(network: impl Into<String>, tunnel_id: impl Into<String>) -> Self {
        Self {
            network: network.into(),
            tunnel_id: tunnel_id.into(),
            virtual_network_id: None,
            comment: None,
        }
    }

    pub fn in_virtual_network(mut self, id: impl Into<String>) -> Self {
        self.virtual_network_id = Some(id.into());
        self
    }

    pub fn with_comment(mut self, comment: impl Into<String>) -> Self {
        self.comment = Some(comment.into());
        self
    }

    pub(crate) fn validate(&self) -> Result<(), CloudflareError> {
        check_cidr(&self.network)?;
        if self.tunnel_id.trim().is_empty() {
            return Err(invalid("route tunnel_id is empty"));
        }
        self.comment.as_deref().map_or(Ok(()), route_comment)
    }
}

/// Body of an IP route PATCH: only the fields set are sent and changed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct IpRouteUpdate {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tunnel_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub virtual_network_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
}

impl IpRouteUpdate {
    pub(crate) fn validate(&self) -> Result<(), CloudflareError> {
        self.network.as_deref().map_or(Ok(()), check_cidr)?;
        self.comment.as_deref().map_or(Ok(()), route_comment)
    }
}

/// A hostname route: a private hostname resolved and reached through a tunnel. Not scoped to
/// a virtual network; a hostname is routed at most once per account.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct HostnameRoute {
    pub id: String,
    /// As Cloudflare stores it: compare with [`normalize_private_hostname`] applied to both.
    #[serde(default)]
    pub hostname: String,
    #[serde(default)]
    pub tunnel_id: String,
    #[serde(default)]
    pub tunnel_name: Option<String>,
    /// `cfd_tunnel` or `warp_connector` (newer answers only).
    #[serde(default)]
    pub tun_type: Option<String>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub comment: String,
    #[serde(default)]
    pub created_at: Option<Timestamp>,
    #[serde(default)]
    pub deleted_at: Option<Timestamp>,
}

impl HostnameRoute {
    pub fn is_deleted(&self) -> bool {
        self.deleted_at.is_some()
    }
}

/// Body of a hostname route create: the schema requires no field, but a route without a
/// hostname or a tunnel routes nothing, so both are always sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NewHostnameRoute {
    /// Sent as given; Cloudflare stores it normalised ([`normalize_private_hostname`]).
    pub hostname: String,
    pub tunnel_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
}

impl NewHostnameRoute {
    /// A route of `hostname` through `tunnel_id`, without a comment.
    pub fn new(hostname: impl Into<String>, tunnel_id: impl Into<String>) -> Self {
        Self {
            hostname: hostname.into(),
            tunnel_id: tunnel_id.into(),
            comment: None,
        }
    }

    pub fn with_comment(mut self, comment: impl Into<String>) -> Self {
        self.comment = Some(comment.into());
        self
    }

    pub(crate) fn validate(&self) -> Result<(), CloudflareError> {
        private_hostname(&self.hostname)?;
        if self.tunnel_id.trim().is_empty() {
            return Err(invalid("route tunnel_id is empty"));
        }
        self.comment.as_deref().map_or(Ok(()), route_comment)
    }
}

/// Body of a hostname route PATCH: only the fields set are sent and changed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct HostnameRouteUpdate {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tunnel_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
}

impl HostnameRouteUpdate {
    pub(crate) fn validate(&self) -> Result<(), CloudflareError> {
        self.hostname.as_deref().map_or(Ok(()), private_hostname)?;
        self.comment.as_deref().map_or(Ok(()), route_comment)
    }
}

/// A private hostname as Cloudflare stores it: lower-case, leading `*` and `.` and a trailing
/// `.` trimmed (`*.internal.local` routes `internal.local` and every name under it). Refused:
/// empty, a `*` anywhere else, an empty label, a character other than a letter, digit, `-` or
/// `_`, 255 characters or more. Desired and stored hostnames compare equal only after this.
pub fn normalize_private_hostname(hostname: &str) -> Result<String, String> {
    let name = hostname
        .trim()
        .trim_start_matches(['*', '.'])
        .trim_end_matches('.')
        .to_ascii_lowercase();
    if name.is_empty() {
        return Err("is empty".into());
    }
    if name.len() > PRIVATE_HOSTNAME_MAX_CHARS {
        return Err(format!(
            "is longer than {PRIVATE_HOSTNAME_MAX_CHARS} characters"
        ));
    }
    if name.contains('*') {
        return Err("has a `*` other than a leading one".into());
    }
    let label_ok = |label: &str| {
        !label.is_empty()
            && label
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    };
    if !name.split('.').all(label_ok) {
        return Err("is not a hostname".into());
    }
    Ok(name)
}

/// `address/prefix` with a prefix the family allows and no host bit set.
fn check_cidr(network: &str) -> Result<(), CloudflareError> {
    let refused =
        |why: &str| CloudflareError::InvalidInput(format!("route network {network:?} {why}"));
    let (addr, prefix) = network
        .split_once('/')
        .ok_or_else(|| refused("is not in CIDR notation (address/prefix)"))?;
    let addr: IpAddr = addr.parse().map_err(|_| refused("has no valid address"))?;
    let bits: u32 = if addr.is_ipv4() { 32 } else { 128 };
    let prefix: u32 = prefix
        .parse()
        .ok()
        .filter(|p| *p <= bits)
        .ok_or_else(|| refused("has no valid prefix length"))?;
    let host_bits = match addr {
        IpAddr::V4(v4) => u128::from(u32::from(v4)) & (u128::from(u32::MAX) >> prefix),
        IpAddr::V6(v6) => u128::from(v6) & u128::MAX.checked_shr(prefix).unwrap_or(0),
    };
    if host_bits != 0 {
        return Err(refused("has host bits set"));
    }
    Ok(())
}

fn private_hostname(hostname: &str) -> Result<(), CloudflareError> {
    normalize_private_hostname(hostname)
        .map(drop)
        .map_err(|e| CloudflareError::InvalidInput(format!("private hostname {hostname:?} {e}")))
}

fn route_comment(comment: &str) -> Result<(), CloudflareError> {
    let chars = comment.chars().count();
    if chars > ROUTE_COMMENT_MAX_CHARS {
        return Err(CloudflareError::InvalidInput(format!(
            "route comment has {chars} characters, more than {ROUTE_COMMENT_MAX_CHARS}"
        )));
    }
    Ok(())
}

fn network_text(field: &str, text: &str) -> Result<(), CloudflareError> {
    let chars = text.chars().count();
    if chars > VIRTUAL_NETWORK_TEXT_MAX_CHARS {
        return Err(CloudflareError::InvalidInput(format!(
            "virtual network {field} has {chars} characters, more than {VIRTUAL_NETWORK_TEXT_MAX_CHARS}"
        )));
    }
    Ok(())
}

fn invalid(message: &str) -> CloudflareError {
    CloudflareError::InvalidInput(message.into())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn ranges_are_checked_before_sending() {
        for good in ["10.0.0.0/8", "10.1.2.3/32", "0.0.0.0/0", "fd00::/8", "::/0"] {
            assert!(check_cidr(good).is_ok(), "{good}");
        }
        for bad in [
            "10.0.0.1/8",
            "10.0.0.0",
            "10.0.0.0/33",
            "fd00::1/8",
            "fd00::/129",
            "a/8",
        ] {
            assert!(check_cidr(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn comments_are_held_to_one_hundred_characters() {
        let route = NewIpRoute::new("10.0.0.0/8", "t").with_comment("é".repeat(100));
        assert!(route.validate().is_ok());
        let route = route.with_comment("x".repeat(101));
        assert!(matches!(
            route.validate(),
            Err(CloudflareError::InvalidInput(_))
        ));
        let hostname = NewHostnameRoute::new("a.local", "t").with_comment("x".repeat(101));
        assert!(hostname.validate().is_err());
        let network = NewVirtualNetwork::new("n").with_comment("x".repeat(257));
        assert!(network.validate().is_err());
        assert!(NewVirtualNetwork::new(" ").validate().is_err());
    }

    #[test]
    fn hostnames_normalise_as_cloudflare_stores_them() {
        assert_eq!(
            normalize_private_hostname("*.Internal.Local.").as_deref(),
            Ok("internal.local")
        );
        for bad in ["", "*", "a.*.local", "a..b", "a b"] {
            assert!(normalize_private_hostname(bad).is_err(), "{bad:?}");
        }
        assert!(NewHostnameRoute::new("a.local", " ").validate().is_err());
        assert!(NewHostnameRoute::new("a.*.local", "t").validate().is_err());
        let rename = HostnameRouteUpdate {
            hostname: Some("*.b.local".into()),
            ..HostnameRouteUpdate::default()
        };
        assert!(
            rename.validate().is_ok(),
            "a PATCH may change the hostname only"
        );
    }

    #[test]
    fn bodies_send_only_what_is_set() {
        let body = serde_json::to_value(NewVirtualNetwork::new("staging")).unwrap();
        assert_eq!(body, json!({"name": "staging"}));
        let mut default = NewVirtualNetwork::new("prod").with_comment("c");
        default.is_default_network = true;
        let body = serde_json::to_value(default).unwrap();
        assert_eq!(
            body,
            json!({"name": "prod", "comment": "c", "is_default_network": true})
        );
        let patch = IpRouteUpdate {
            comment: Some(String::new()),
            ..IpRouteUpdate::default()
        };
        assert_eq!(serde_json::to_value(patch).unwrap(), json!({"comment": ""}));
    }
}
