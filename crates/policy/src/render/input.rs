//! What the tunnel reconciler hands to the renderer: everything resolved, nothing to look up.
use std::fmt;

use serde::Serialize;

use cftunnel_types::{TunnelKind, TunnelSpec};

use crate::routes::Route;

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
