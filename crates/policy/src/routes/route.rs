//! What one route is once the model has resolved it: the ingress rule a tunnel's config gets.
use serde::{Deserialize, Serialize};

/// cloudflared `originRequest` settings a route's source set explicitly; `None` = not set, so
/// the tunnel-wide value (or cloudflared's default) applies.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OriginRequest {
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
}

impl OriginRequest {
    pub fn is_empty(&self) -> bool {
        self == &OriginRequest::default()
    }
}

/// One routed hostname (plus optional path) and where it goes; conflicts are already resolved.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Route {
    /// Exact host (`app.example.com`) or wildcard (`*.example.com`).
    pub hostname: String,
    /// Go RE2 regex matched against the request path.
    pub path: Option<String>,
    /// cloudflared service, e.g. `http://web.shop.svc:80` or `http_status:404`.
    pub service: String,
    pub origin_request: OriginRequest,
}
