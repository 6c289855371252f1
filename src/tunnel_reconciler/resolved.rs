//! What setup resolves about a tunnel on Cloudflare, for the status and the renderer.
use cftunnel_policy::render::TunnelCredentials;

/// Everything the status and the renderer need about the tunnel.
#[derive(Clone, Debug)]
pub(crate) struct Resolved {
    pub account_id: String,
    pub tunnel_id: String,
    pub tunnel_name: String,
    pub zone_id: String,
    pub zone_domain: String,
    pub credentials: TunnelCredentials,
    /// What admission would refuse in the spec today and how it was served instead
    /// ([`super::legacy::notes`]); appended to the `Ready` message.
    pub notes: Vec<String>,
}
