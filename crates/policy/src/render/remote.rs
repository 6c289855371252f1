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
    Ok(Value::Object(config))
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

/// The top-level keys of a configuration document that cftunnel writes; every other key
/// (`warp-routing`, anything Cloudflare or the dashboard adds) belongs to someone else.
pub const OWNED_KEYS: [&str; 2] = ["ingress", "originRequest"];

/// The parts of a configuration document cftunnel writes, normalised: the other top-level keys
/// dropped, and nulls and empty objects removed at every depth. Cloudflare is reported to answer
/// a GET with fields nobody sent (`warp-routing`, an empty `originRequest` on each rule), so
/// documents are compared on these parts only. `false` and `0` are kept: a rule's
/// `noTLSVerify: false` overriding the tunnel's `true` means something.
pub fn owned_parts(document: &Value) -> Value {
    let mut owned = Map::new();
    if let Value::Object(fields) = document {
        for key in OWNED_KEYS {
            if let Some(value) = fields.get(key).and_then(normalised) {
                owned.insert(key.to_string(), value);
            }
        }
    }
    Value::Object(owned)
}

/// `value` without nulls or empty objects at any depth; `None` when nothing is left of it.
fn normalised(value: &Value) -> Option<Value> {
    match value {
        Value::Null => None,
        Value::Object(fields) => {
            let kept: Map<String, Value> = fields
                .iter()
                .filter_map(|(k, v)| normalised(v).map(|v| (k.clone(), v)))
                .collect();
            (!kept.is_empty()).then_some(Value::Object(kept))
        }
        Value::Array(items) => Some(Value::Array(
            items
                .iter()
                .map(|item| normalised(item).unwrap_or_else(|| Value::Object(Map::new())))
                .collect(),
        )),
        other => Some(other.clone()),
    }
}

/// The document to PUT: `theirs` (what Cloudflare holds now) with cftunnel's parts replaced by
/// `ours`, so a field cftunnel does not manage (an adopted tunnel's `warp-routing`) survives.
pub fn merged_for_put(theirs: &Value, ours: &Value) -> Value {
    let mut merged = match theirs {
        Value::Object(fields) => fields.clone(),
        _ => Map::new(),
    };
    for key in OWNED_KEYS {
        merged.remove(key);
        if let Some(value) = ours.get(key) {
            merged.insert(key.to_string(), value.clone());
        }
    }
    Value::Object(merged)
}

/// What `status.configHash` records: the digest of cftunnel's parts of `config` as pushed to
/// the tunnel `tunnel_id`. The id is part of it, so a recreated tunnel (a new id, the same
/// rules) never counts as already holding the configuration its predecessor was given.
pub fn pushed_digest(tunnel_id: &str, config: &Value) -> String {
    config_digest(&json!({ "tunnelId": tunnel_id, "config": owned_parts(config) }))
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

    #[test]
    fn owned_parts_ignore_fields_cloudflare_fills_in_and_keys_cftunnel_does_not_write() {
        let ours = json!({"ingress": [{"hostname": "a", "service": "http://x"}, {"service": "http_status:404"}]});
        let answered = json!({
            "ingress": [
                {"hostname": "a", "service": "http://x", "originRequest": {}},
                {"service": "http_status:404", "originRequest": {"access": null}}
            ],
            "originRequest": {},
            "warp-routing": {"enabled": false}
        });
        assert_eq!(owned_parts(&ours), owned_parts(&answered));
        let changed = json!({"ingress": [{"hostname": "a", "service": "http://y"}, {"service": "http_status:404"}]});
        assert_ne!(owned_parts(&ours), owned_parts(&changed));
        let explicit_off = json!({"ingress": [{"hostname": "a", "service": "http://x", "originRequest": {"noTLSVerify": false}}, {"service": "http_status:404"}]});
        assert_ne!(owned_parts(&ours), owned_parts(&explicit_off));
    }

    #[test]
    fn a_merged_document_keeps_what_cftunnel_does_not_manage() {
        let theirs = json!({"ingress": [{"service": "http_status:503"}], "warp-routing": {"enabled": true}, "originRequest": {"noTLSVerify": true}});
        let ours = json!({"ingress": [{"hostname": "a", "service": "http://x"}, {"service": "http_status:404"}]});
        assert_eq!(
            merged_for_put(&theirs, &ours),
            json!({"ingress": [{"hostname": "a", "service": "http://x"}, {"service": "http_status:404"}], "warp-routing": {"enabled": true}})
        );
        assert_eq!(merged_for_put(&Value::Null, &ours), ours);
    }

    #[test]
    fn the_pushed_digest_is_tied_to_the_tunnel_id() {
        let config = json!({"ingress": [{"service": "http_status:404"}]});
        assert_ne!(pushed_digest("t1", &config), pushed_digest("t2", &config));
        let filled = json!({"ingress": [{"service": "http_status:404", "originRequest": {}}], "warp-routing": {"enabled": false}});
        assert_eq!(pushed_digest("t1", &config), pushed_digest("t1", &filled));
    }
}
