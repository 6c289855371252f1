//! What the tunnel reconciler hands to the renderer: everything resolved, nothing to look up.
use std::fmt;

use serde::Serialize;

use cftunnel_types::TunnelKind;
use cftunnel_types::TunnelSpec;

/// Which custom resource owns the rendered objects, and where they live.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnerIdentity {
    pub kind: TunnelKind,
    /// Namespace of the managed objects: the Tunnel's own namespace, or the cluster-resource
    /// namespace for a ClusterTunnel.
    pub namespace: String,
    /// `metadata.name` of the Tunnel or ClusterTunnel.
    pub name: String,
    /// `metadata.uid` of the Tunnel or ClusterTunnel, for controller owner references.
    pub uid: String,
}

/// The content of credentials.json. `Debug` never shows the secret.
#[derive(Clone, PartialEq, Eq, Serialize)]
pub struct TunnelCredentials {
    #[serde(rename = "AccountTag")]
    pub account_tag: String,
    /// The base64 TunnelSecret, exactly as cloudflared reads it.
    #[serde(rename = "TunnelSecret")]
    pub secret_b64: String,
    #[serde(rename = "TunnelID")]
    pub tunnel_id: String,
}

impl fmt::Debug for TunnelCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TunnelCredentials")
            .field("account_tag", &self.account_tag)
            .field("tunnel_id", &self.tunnel_id)
            .field("secret_b64", &"<redacted>")
            .finish()
    }
}

/// cloudflared `originRequest` settings a route's source set explicitly; `None` = not set, so
/// the tunnel-wide value (or cloudflared's default) applies.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
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
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    /// Exact host (`app.example.com`) or wildcard (`*.example.com`).
    pub hostname: String,
    /// Go RE2 regex matched against the request path.
    pub path: Option<String>,
    /// cloudflared service, e.g. `http://web.shop.svc:80` or `http_status:404`.
    pub service: String,
    pub origin_request: OriginRequest,
}

/// Everything the renderer needs about one Tunnel or ClusterTunnel.
#[derive(Clone, Debug)]
pub struct TunnelInput {
    pub identity: OwnerIdentity,
    /// The v1alpha2 spec (v1alpha1 objects are converted before they get here).
    pub spec: TunnelSpec,
    pub tunnel_id: String,
    pub account_tag: String,
    /// The tunnel's name on Cloudflare.
    pub tunnel_name: String,
    /// The zone the tunnel serves (`spec.cloudflare.domain`).
    pub domain: String,
    pub credentials: TunnelCredentials,
    /// `tls.crt` of the `originCaPool` Secret, when the spec names one.
    pub origin_ca_pem: Option<String>,
    pub routes: Vec<Route>,
}

/// Operator-wide settings that shape the rendered workload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RenderOptions {
    /// Pinned image, e.g. `cloudflare/cloudflared:2026.11.0`; `latest` or no tag is refused.
    pub cloudflared_image: String,
}
