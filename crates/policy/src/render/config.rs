//! cloudflared's config.yaml (docs/design.md §3.4 item 1): fixed key order, so equal input gives equal bytes.
use serde::Serialize;

use super::RenderError;
use super::ingress::ordered_routes;
use super::input::TunnelInput;
use crate::routes::{OriginRequest, OriginSettings};
use crate::rules::service_url::service_problem;

pub(crate) const CONFIG_KEY: &str = "config.yaml";
pub const CREDENTIALS_KEY: &str = "credentials.json";
/// Key of the managed Secret holding the connector token (`configSource: Cloudflare`).
pub const TOKEN_KEY: &str = "token";
pub(crate) const CREDS_DIR: &str = "/etc/cloudflared/creds";
pub(crate) const CONFIG_DIR: &str = "/etc/cloudflared/config";
pub(crate) const CERTS_DIR: &str = "/etc/cloudflared/certs";
pub(crate) const METRICS_ADDRESS: &str = "0.0.0.0:2000";
pub(crate) const METRICS_PORT: u16 = 2000;
/// The key of the `originCaPool` Secret used as the tunnel-wide CA pool.
pub const ORIGIN_CA_KEY: &str = "tls.crt";

#[derive(Serialize)]
struct ConfigFile<'a> {
    tunnel: &'a str,
    #[serde(rename = "credentials-file")]
    credentials_file: String,
    metrics: &'a str,
    #[serde(rename = "no-autoupdate")]
    no_autoupdate: bool,
    #[serde(
        rename = "originRequest",
        skip_serializing_if = "OriginRequest::is_empty"
    )]
    origin_request: OriginRequest,
    #[serde(rename = "warp-routing", skip_serializing_if = "Option::is_none")]
    warp_routing: Option<WarpRoutingYaml<'a>>,
    ingress: Vec<Rule<'a>>,
}

/// `warp-routing` in config.yaml: durations as Go duration text, as cloudflared reads them.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct WarpRoutingYaml<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    connect_timeout: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_active_flows: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tcp_keep_alive: Option<&'a str>,
}

#[derive(Serialize)]
struct Rule<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    hostname: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    path: Option<&'a str>,
    service: &'a str,
    #[serde(
        rename = "originRequest",
        skip_serializing_if = "OriginRequest::is_empty"
    )]
    origin_request: OriginRequest,
}

/// Where cloudflared finds a key of the mounted `originCaPool` Secret.
fn ca_path(key: &str) -> String {
    format!("{CERTS_DIR}/{key}")
}

/// One ingress rule as both forms carry it: a route, or the catch-all (no hostname, no path).
pub(crate) struct IngressRule {
    pub hostname: Option<String>,
    pub path: Option<String>,
    pub service: String,
    pub origin_request: OriginRequest,
}

/// The tunnel-wide `originRequest` and the ingress rules of `input`, in cloudflared's order
/// (most specific first, catch-all last): what config.yaml and the configuration pushed to
/// Cloudflare both hold.
pub(crate) fn ingress_rules(
    input: &TunnelInput,
) -> Result<(OriginRequest, Vec<IngressRule>), RenderError> {
    let spec = &input.spec;
    let has_ca_pool = spec
        .origin_ca_pool
        .as_deref()
        .is_some_and(|s| !s.is_empty());
    let top = OriginRequest::from(OriginSettings {
        no_tls_verify: spec.no_tls_verify.then_some(true),
        ca_pool: has_ca_pool.then(|| ca_path(ORIGIN_CA_KEY)),
        ..OriginSettings::default()
    });
    let mut ingress = Vec::with_capacity(input.routes.len() + 1);
    let mut ordered = ordered_routes(&input.routes)?;
    // A route for every host and path is the catch-all itself (cloudflared takes such a rule
    // only last); it replaces `fallbackTarget`.
    let catch_all = ordered.last().filter(|r| r.matches_everything()).copied();
    if catch_all.is_some() {
        ordered.pop();
    }
    for route in ordered.into_iter().chain(catch_all) {
        let mut origin_request = route.origin_request.clone();
        if let Some(key) = origin_request.ca_pool.take() {
            if !has_ca_pool {
                return Err(RenderError::CaPoolWithoutOriginCaPool {
                    hostname: route.hostname.clone(),
                });
            }
            if key.is_empty() || key.contains('/') || key.starts_with('.') {
                return Err(RenderError::InvalidRoute {
                    hostname: route.hostname.clone(),
                    reason: format!("caPool {key:?} is not a key of the originCaPool Secret"),
                });
            }
            origin_request.ca_pool = Some(ca_path(&key));
        }
        ingress.push(IngressRule {
            hostname: (!route.matches_everything()).then(|| route.hostname.clone()),
            path: route.path.clone(),
            service: route.service.clone(),
            origin_request,
        });
    }
    if catch_all.is_some() {
        return Ok((top, ingress));
    }
    if let Some(reason) = service_problem(&spec.fallback_target) {
        return Err(RenderError::InvalidFallback { reason });
    }
    ingress.push(IngressRule {
        hostname: None,
        path: None,
        service: spec.fallback_target.clone(),
        origin_request: OriginRequest::default(),
    });
    Ok((top, ingress))
}

/// The text of config.yaml for `input`.
pub(crate) fn render_config(input: &TunnelInput) -> Result<String, RenderError> {
    let (top, rules) = ingress_rules(input)?;
    let ingress = rules
        .iter()
        .map(|r| Rule {
            hostname: r.hostname.as_deref(),
            path: r.path.as_deref(),
            service: &r.service,
            origin_request: r.origin_request.clone(),
        })
        .collect();
    let file = ConfigFile {
        tunnel: &input.tunnel_id,
        credentials_file: format!("{CREDS_DIR}/{CREDENTIALS_KEY}"),
        metrics: METRICS_ADDRESS,
        no_autoupdate: true,
        origin_request: top,
        warp_routing: input.spec.warp_routing.as_ref().map(|w| WarpRoutingYaml {
            connect_timeout: w.connect_timeout.as_deref(),
            max_active_flows: w.max_active_flows,
            tcp_keep_alive: w.tcp_keep_alive.as_deref(),
        }),
        ingress,
    };
    let text = serde_yaml_ng::to_string(&file).map_err(|e| RenderError::Encode(e.to_string()))?;
    #[cfg(test)]
    super::record::record_config(input, &text);
    Ok(text)
}
