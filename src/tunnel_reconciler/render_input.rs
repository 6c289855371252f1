//! The renderer's input, built by one function for the reconciler and `cftunnel render` alike,
//! so the offline output is exactly what the reconciler applies for the same facts.
use cftunnel_policy::render::{OwnerIdentity, RenderOptions, TunnelCredentials, TunnelInput};
use cftunnel_policy::routes::Route;
use cftunnel_types::{ConfigSource, TunnelSpec};

/// What is known about the tunnel itself: resolved on Cloudflare, or read from the input offline.
#[derive(Clone, Debug)]
pub struct TunnelFacts {
    pub tunnel_id: String,
    pub tunnel_name: String,
    pub credentials: TunnelCredentials,
    /// `tls.crt` of the `originCaPool` Secret, when known.
    pub origin_ca_pem: Option<String>,
}

/// `spec` with its effective `configSource`: its own, else the operator's default.
pub(crate) fn with_config_source(mut spec: TunnelSpec, default: ConfigSource) -> TunnelSpec {
    spec.config_source = Some(spec.config_source.unwrap_or(default));
    spec
}

/// Does `spec` (after [`with_config_source`]) keep its configuration on Cloudflare?
pub(crate) fn is_remote(spec: &TunnelSpec) -> bool {
    spec.config_source == Some(ConfigSource::Cloudflare)
}

/// The renderer input of one Tunnel or ClusterTunnel; `routes` are its share of
/// `routes::compute_routes` (`RouteTable::routes_of` its identity).
pub(crate) fn tunnel_input(
    identity: OwnerIdentity,
    spec: TunnelSpec,
    facts: TunnelFacts,
    routes: Vec<Route>,
) -> TunnelInput {
    TunnelInput {
        identity,
        domain: spec.cloudflare.domain.clone(),
        tunnel_id: facts.tunnel_id,
        account_tag: facts.credentials.account_tag.clone(),
        tunnel_name: facts.tunnel_name,
        credentials: facts.credentials,
        origin_ca_pem: facts.origin_ca_pem,
        routes,
        spec,
    }
}

/// The operator-wide render options.
pub(crate) fn render_options(cloudflared_image: &str) -> RenderOptions {
    RenderOptions {
        cloudflared_image: cloudflared_image.to_string(),
    }
}
