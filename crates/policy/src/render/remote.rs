//! The configuration of a remotely-managed tunnel (`configSource: Cloudflare`): the very rules
//! of config.yaml, in the same order with the catch-all last, as the JSON the configurations
//! API takes. Its `originRequest` durations are whole seconds there, not Go duration text.
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use super::RenderError;
use super::config::{IngressRule, ingress_rules};
use super::input::TunnelInput;
use crate::routes::OriginRequest;
use crate::rules::duration::parse_go_duration;

/// The document PUT as `config`: `{"ingress": [...], "originRequest": {...}}`.
pub fn remote_config(input: &TunnelInput) -> Result<Value, RenderError> {
    let (top, rules) = ingress_rules(input)?;
    let ingress = rules
        .iter()
        .map(|rule| rule_json(rule).map_err(|reason| invalid(rule, reason)))
        .collect::<Result<Vec<Value>, RenderError>>()?;
    let mut config = Map::new();
    config.insert("ingress".into(), Value::Array(ingress));
    let top =
        origin_request_json(&top).map_err(|reason| RenderError::InvalidFallback { reason })?;
    if !top.is_empty() {
        config.insert("originRequest".into(), Value::Object(top));
    }
    if let Some(warp) = input.spec.warp_routing.as_ref() {
        let warp =
            warp_routing_json(warp).map_err(|reason| RenderError::InvalidFallback { reason })?;
        if !warp.is_empty() {
            config.insert(WARP_ROUTING.into(), Value::Object(warp));
        }
    }
    Ok(Value::Object(config))
}

/// The top-level key of the private-traffic options.
pub(crate) const WARP_ROUTING: &str = "warp-routing";

/// `spec.warpRouting` as the configurations API takes it: durations in whole seconds (rounded
/// up; cloudflared refuses duration text there).
fn warp_routing_json(warp: &cftunnel_types::WarpRouting) -> Result<Map<String, Value>, String> {
    let mut out = Map::new();
    for (name, text) in [
        ("connectTimeout", &warp.connect_timeout),
        ("tcpKeepAlive", &warp.tcp_keep_alive),
    ] {
        if let Some(text) = text {
            let seconds = seconds_of(text)
                .ok_or_else(|| format!("spec.warpRouting.{name} {text:?} is not a duration"))?;
            out.insert(name.into(), json!(seconds));
        }
    }
    if let Some(flows) = warp.max_active_flows {
        out.insert("maxActiveFlows".into(), json!(flows));
    }
    Ok(out)
}

fn invalid(rule: &IngressRule, reason: String) -> RenderError {
    RenderError::InvalidRoute {
        hostname: rule.hostname.clone().unwrap_or_default(),
        reason,
    }
}

fn rule_json(rule: &IngressRule) -> Result<Value, String> {
    let mut out = Map::new();
    if let Some(hostname) = &rule.hostname {
        out.insert("hostname".into(), json!(hostname));
    }
    if let Some(path) = &rule.path {
        out.insert("path".into(), json!(path));
    }
    out.insert("service".into(), json!(rule.service));
    let origin = origin_request_json(&rule.origin_request)?;
    if !origin.is_empty() {
        out.insert("originRequest".into(), Value::Object(origin));
    }
    Ok(Value::Object(out))
}

/// The settings as the API names them, durations in whole seconds (rounded up).
fn origin_request_json(origin: &OriginRequest) -> Result<Map<String, Value>, String> {
    let value = serde_json::to_value(origin).map_err(|e| e.to_string())?;
    let mut fields = match value {
        Value::Object(fields) => fields,
        _ => Map::new(),
    };
    for name in ["connectTimeout", "tlsTimeout", "keepAliveTimeout"] {
        if let Some(Value::String(text)) = fields.get(name) {
            let seconds = seconds_of(text)
                .ok_or_else(|| format!("originRequest.{name} {text:?} is not a duration"))?;
            fields.insert(name.into(), json!(seconds));
        }
    }
    Ok(fields)
}

/// Go duration text as whole seconds, rounded up (`1500ms` is 2).
fn seconds_of(text: &str) -> Option<u64> {
    let nanos = u64::try_from(parse_go_duration(text)?).ok()?;
    Some(nanos.div_ceil(1_000_000_000))
}

/// A digest of a configuration document: equal documents, whatever their key order, give the
/// same digest, so what was pushed is compared without asking Cloudflare.
pub fn config_digest(config: &Value) -> String {
    let text = cftunnel_types::conversion::canonical(config);
    let digest = Sha256::digest(text.as_bytes());
    digest.iter().take(16).map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_whole_seconds_rounded_up() {
        assert_eq!(seconds_of("30s"), Some(30));
        assert_eq!(seconds_of("1m30s"), Some(90));
        assert_eq!(seconds_of("1500ms"), Some(2));
        assert_eq!(seconds_of("0s"), Some(0));
        assert_eq!(seconds_of("soon"), None);
    }

    #[test]
    fn the_digest_ignores_key_order_and_sees_every_value() {
        let a = json!({"ingress": [{"hostname": "a", "service": "http://x"}], "originRequest": {"noTLSVerify": true}});
        let b = json!({"originRequest": {"noTLSVerify": true}, "ingress": [{"service": "http://x", "hostname": "a"}]});
        let c = json!({"ingress": [{"hostname": "b", "service": "http://x"}], "originRequest": {"noTLSVerify": true}});
        assert_eq!(config_digest(&a), config_digest(&b));
        assert_ne!(config_digest(&a), config_digest(&c));
    }
}
