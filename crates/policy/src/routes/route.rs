//! What one route is once the model has resolved it: the ingress rule a tunnel's config gets.
use std::cmp::Reverse;

use serde::{Deserialize, Serialize};

/// cloudflared `originRequest` settings a route's source set explicitly; `None` = not set, so
/// the tunnel-wide value (or cloudflared's default) applies. Routes hold them as an
/// [`OriginRequest`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OriginSettings {
    #[serde(rename = "noTLSVerify", skip_serializing_if = "Option::is_none")]
    pub no_tls_verify: Option<bool>,
    /// A key of the tunnel's `originCaPool` Secret (rendered as its path under
    /// `/etc/cloudflared/certs`).
    #[serde(rename = "caPool", skip_serializing_if = "Option::is_none")]
    pub ca_pool: Option<String>,
    #[serde(rename = "http2Origin", skip_serializing_if = "Option::is_none")]
    pub http2_origin: Option<bool>,
    #[serde(rename = "httpHostHeader", skip_serializing_if = "Option::is_none")]
    pub http_host_header: Option<String>,
    #[serde(rename = "originServerName", skip_serializing_if = "Option::is_none")]
    pub origin_server_name: Option<String>,
    /// Go duration text, e.g. `30s` (YAML config takes duration strings).
    #[serde(rename = "connectTimeout", skip_serializing_if = "Option::is_none")]
    pub connect_timeout: Option<String>,
    #[serde(rename = "tlsTimeout", skip_serializing_if = "Option::is_none")]
    pub tls_timeout: Option<String>,
    #[serde(rename = "keepAliveTimeout", skip_serializing_if = "Option::is_none")]
    pub keep_alive_timeout: Option<String>,
    #[serde(rename = "proxyAddress", skip_serializing_if = "Option::is_none")]
    pub proxy_address: Option<String>,
    #[serde(rename = "proxyPort", skip_serializing_if = "Option::is_none")]
    pub proxy_port: Option<u16>,
    /// `""` or `socks`.
    #[serde(rename = "proxyType", skip_serializing_if = "Option::is_none")]
    pub proxy_type: Option<String>,
    /// cloudflared's own check of Cloudflare Access: a request without a valid Access token
    /// for the application is refused at the connector, whatever path it came by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access: Option<AccessCheck>,
}

/// `originRequest.access`: cloudflared verifies the request's Access JWT against the team's
/// keys and the application's AUD.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccessCheck {
    pub required: bool,
    /// The Zero Trust team (`<team>.cloudflareaccess.com`).
    #[serde(rename = "teamName")]
    pub team_name: String,
    /// The AUD of each Access application the request may carry a token of.
    #[serde(rename = "audTag")]
    pub aud_tag: Vec<String>,
}

/// No setting at all.
static UNSET: OriginSettings = OriginSettings {
    no_tls_verify: None,
    ca_pool: None,
    http2_origin: None,
    http_host_header: None,
    origin_server_name: None,
    connect_timeout: None,
    tls_timeout: None,
    keep_alive_timeout: None,
    proxy_address: None,
    proxy_port: None,
    proxy_type: None,
    access: None,
};

/// A route's [`OriginSettings`], which it reads and writes through (`Deref`, `DerefMut`), and
/// which take no room until one is set: nearly every route sets none, and every route is in
/// every route table (ten thousand at a time, some tables held twice), where the settings
/// inline were 256 of a route's 336 bytes. Compares, prints and serializes as the settings.
#[derive(Clone, Default)]
pub struct OriginRequest(Option<Box<OriginSettings>>);

impl OriginRequest {
    pub fn is_empty(&self) -> bool {
        **self == UNSET
    }
}

impl From<OriginSettings> for OriginRequest {
    fn from(settings: OriginSettings) -> OriginRequest {
        match settings == UNSET {
            true => OriginRequest(None),
            false => OriginRequest(Some(Box::new(settings))),
        }
    }
}

impl std::ops::Deref for OriginRequest {
    type Target = OriginSettings;

    fn deref(&self) -> &OriginSettings {
        self.0.as_deref().unwrap_or(&UNSET)
    }
}

impl std::ops::DerefMut for OriginRequest {
    /// Makes room for the settings (a write is about to set one).
    fn deref_mut(&mut self) -> &mut OriginSettings {
        self.0.get_or_insert_with(Box::default)
    }
}

impl PartialEq for OriginRequest {
    fn eq(&self, other: &OriginRequest) -> bool {
        **self == **other
    }
}

impl Eq for OriginRequest {}

impl std::fmt::Debug for OriginRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (**self).fmt(f)
    }
}

impl Serialize for OriginRequest {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        (**self).serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for OriginRequest {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        OriginSettings::deserialize(deserializer).map(OriginRequest::from)
    }
}

/// The hostname of a route that matches every host (an Ingress rule without `host`, an
/// HTTPRoute on a listener without hostname): it gets no DNS name, sorts after every named
/// host, and with no path it is the tunnel's catch-all itself.
pub const ANY_HOST: &str = "*";

/// How a route's path was declared, which decides its place among the routes of one hostname
/// (docs/design.md §3.2): `Exact` first, then `Prefix` (longer first), then `Regex` (longer
/// pattern first), then a route without a path.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub enum PathKind {
    /// `^/foo$`: this path only.
    Exact,
    /// `^/foo(/|$)`: the path and everything below it, element by element.
    Prefix,
    /// A cloudflared path regex as written (bindings, Service annotations, Ingress
    /// `ImplementationSpecific`).
    #[default]
    Regex,
}

/// The rank of a route in cloudflared's first-match order: smaller is tried first.
pub type Precedence<'r> = (
    u8,
    Reverse<usize>,
    bool,
    PathKind,
    Reverse<usize>,
    &'r str,
    &'r str,
);

/// One routed hostname (plus optional path) and where it goes; conflicts are already resolved.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Route {
    /// Exact host (`app.example.com`), wildcard (`*.example.com`) or every host ([`ANY_HOST`]).
    pub hostname: String,
    /// Go RE2 regex matched against the request path.
    pub path: Option<String>,
    /// How `path` was declared (its regex says what it matches; this says where it sorts).
    #[serde(default, skip_serializing_if = "is_regex")]
    pub path_kind: PathKind,
    /// cloudflared service, e.g. `http://web.shop.svc:80` or `http_status:404`.
    pub service: String,
    pub origin_request: OriginRequest,
}

fn is_regex(kind: &PathKind) -> bool {
    *kind == PathKind::Regex
}

impl Route {
    /// Where this route sorts among a tunnel's rules, the first match serving: exact hosts,
    /// then wildcards (more labels first), then every host; within one host, a path before none,
    /// then [`PathKind`] order, then the longer pattern; then hostname and path text, so the
    /// order never depends on input order.
    pub fn precedence(&self) -> Precedence<'_> {
        let host_class = if self.hostname == ANY_HOST {
            2
        } else if self.hostname.starts_with("*.") {
            1
        } else {
            0
        };
        let depth = if host_class == 1 {
            self.hostname.split('.').count()
        } else {
            0
        };
        let path = self.path.as_deref().unwrap_or("");
        (
            host_class,
            Reverse(depth),
            self.path.is_none(),
            self.path_kind,
            Reverse(path.len()),
            self.hostname.as_str(),
            path,
        )
    }

    /// Does this route match every request, so that it can only be the catch-all?
    pub fn matches_everything(&self) -> bool {
        self.hostname == ANY_HOST && self.path.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origin_settings_take_room_only_once_one_is_set_and_compare_and_serialize_as_settings() {
        let unset = OriginRequest::default();
        assert!(unset.0.is_none() && unset.is_empty());
        assert!(OriginRequest::from(OriginSettings::default()).0.is_none());
        assert_eq!(
            serde_json::to_value(&unset).ok(),
            Some(serde_json::json!({}))
        );

        // A write through `DerefMut`, as the renderer's protection makes one.
        let mut set = OriginRequest::default();
        let settings: &mut OriginSettings = &mut set;
        settings.http2_origin = Some(true);
        assert!(set.0.is_some() && !set.is_empty());
        let settings = OriginSettings {
            http2_origin: Some(true),
            ..OriginSettings::default()
        };
        assert_eq!(set, OriginRequest::from(settings.clone()));
        assert_eq!(
            serde_json::to_value(&set).ok(),
            serde_json::to_value(&settings).ok()
        );
        // Room made by a write that set nothing still compares as unset.
        let mut emptied = set.clone();
        emptied.http2_origin = None;
        assert_eq!(emptied, unset);
        assert!(emptied.is_empty());
        let back: Result<OriginRequest, _> = serde_json::from_value(serde_json::json!({}));
        assert!(back.is_ok_and(|o| o.0.is_none()));
    }
}
