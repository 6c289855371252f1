//! How cftunnel's rules go into a remotely-managed tunnel's configuration without undoing
//! anyone else's (docs/design.md §3.6).
//!
//! The configurations API replaces the whole document on every PUT and has no compare-and-swap.
//! So a push reads the document first and writes back a merge: every rule of a hostname
//! cftunnel does not own (another cluster's on the same tunnel, one added in the dashboard) is
//! kept, in its order; cftunnel's own rules (the hostnames it routes now, and those it pushed
//! before, which `status.configHostnames` remembers) are replaced by the render; top-level
//! fields cftunnel does not write are kept, and so are the keys of `warp-routing` it does not
//! set (`spec.warpRouting` sets some, or none). Rules are ordered by the
//! specificity cloudflared needs (exact hostnames, then wildcards with more labels first, then
//! rules for every host), stably, so each writer's own order holds; the catch-all is
//! cftunnel's, last.
//!
//! Documents are compared on what cftunnel owns (`owned_view`), normalised: nulls and empty
//! objects dropped at every depth, since Cloudflare is reported to answer a GET with fields
//! nobody sent (`warp-routing`, an empty `originRequest` on each rule). `false` and `0` stay:
//! a rule's `noTLSVerify: false` overriding the tunnel's `true` means something.
use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use super::remote::{WARP_ROUTING, config_digest};

/// What `status.configHash` records: the digest of `config`, normalised, as pushed to the
/// tunnel `tunnel_id`. The id is part of it, so a recreated tunnel (a new id, the same rules)
/// never counts as already holding the configuration its predecessor was given.
pub fn pushed_digest(tunnel_id: &str, config: &Value) -> String {
    let config = normalised(config).unwrap_or(Value::Null);
    config_digest(&json!({ "tunnelId": tunnel_id, "config": config }))
}

/// The hostname a rule is for (`*` for one of every host).
fn rule_host(rule: &Value) -> &str {
    rule.get("hostname").and_then(Value::as_str).unwrap_or("*")
}

/// A rule for every host and path: only the last rule may be one.
fn is_catch_all(rule: &Value) -> bool {
    rule_host(rule) == "*" && rule.get("path").is_none()
}

fn rules(document: &Value) -> &[Value] {
    document
        .get("ingress")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// The hostnames of a document's rules, its catch-all left out.
pub fn rule_hostnames(document: &Value) -> BTreeSet<String> {
    rules(document)
        .iter()
        .filter(|r| !is_catch_all(r))
        .map(|r| rule_host(r).to_string())
        .collect()
}

/// What of `document` is cftunnel's when it owns the rules of `owned`: those rules in their
/// order, the catch-all, and the top-level `originRequest`, normalised.
pub fn owned_view(document: &Value, owned: &BTreeSet<String>) -> Value {
    let all = rules(document);
    let mut kept: Vec<Value> = all
        .iter()
        .filter(|r| !is_catch_all(r) && owned.contains(rule_host(r)))
        .cloned()
        .collect();
    if let Some(last) = all.last().filter(|r| is_catch_all(r)) {
        kept.push(last.clone());
    }
    let mut view = Map::new();
    view.insert("ingress".into(), Value::Array(kept));
    if let Some(top) = document.get("originRequest") {
        view.insert("originRequest".into(), top.clone());
    }
    normalised(&Value::Object(view)).unwrap_or(Value::Null)
}

/// The keys of `warp-routing` that `ours` sets, as `document` holds them, normalised: what of
/// the private-traffic options is cftunnel's (the others are someone else's, and kept).
pub fn owned_warp(document: &Value, ours: &Value) -> Value {
    let keys: Vec<&String> = ours
        .get(WARP_ROUTING)
        .and_then(Value::as_object)
        .map(|o| o.keys().collect())
        .unwrap_or_default();
    let held = document.get(WARP_ROUTING).and_then(Value::as_object);
    let view: Map<String, Value> = keys
        .into_iter()
        .filter_map(|k| Some((k.clone(), held?.get(k)?.clone())))
        .collect();
    normalised(&Value::Object(view)).unwrap_or(Value::Null)
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

/// Where a rule goes among others: exact hostnames, then wildcards with more labels first, then
/// rules for every host.
fn specificity(rule: &Value) -> (u8, usize) {
    let host = rule_host(rule);
    match host.strip_prefix("*.") {
        _ if host == "*" => (2, 0),
        Some(rest) => (1, usize::MAX - rest.split('.').count()),
        None => (0, 0),
    }
}

/// The document to PUT: `theirs` (what Cloudflare holds now) with the rules of `owned` and the
/// catch-all replaced by `ours`, every other rule and top-level field kept.
pub fn merged_for_put(theirs: &Value, ours: &Value, owned: &BTreeSet<String>) -> Value {
    let mut merged = match theirs {
        Value::Object(fields) => fields.clone(),
        _ => Map::new(),
    };
    let our_rules = rules(ours);
    let catch_all = our_rules.last().filter(|r| is_catch_all(r));
    let mut ingress: Vec<Value> = our_rules
        .iter()
        .filter(|r| !is_catch_all(r))
        .cloned()
        .collect();
    ingress.extend(
        rules(theirs)
            .iter()
            .filter(|r| !is_catch_all(r) && !owned.contains(rule_host(r)))
            .cloned(),
    );
    ingress.sort_by_key(specificity);
    ingress.extend(catch_all.cloned());
    merged.insert("ingress".into(), Value::Array(ingress));
    merged.remove("originRequest");
    if let Some(top) = ours.get("originRequest") {
        merged.insert("originRequest".into(), top.clone());
    }
    // The private-traffic options: ours replace those keys, theirs keep the others.
    if let Some(Value::Object(warp)) = ours.get(WARP_ROUTING) {
        let mut options = match merged.get(WARP_ROUTING) {
            Some(Value::Object(held)) => held.clone(),
            _ => Map::new(),
        };
        options.extend(warp.iter().map(|(k, v)| (k.clone(), v.clone())));
        merged.insert(WARP_ROUTING.into(), Value::Object(options));
    }
    Value::Object(merged)
}

/// `theirs` without the rules of `owned`: what a tunnel cftunnel stops running (an
/// existingTunnel it does not delete) keeps of its configuration.
pub fn withdrawn(theirs: &Value, owned: &BTreeSet<String>) -> Value {
    let mut left = match theirs {
        Value::Object(fields) => fields.clone(),
        _ => Map::new(),
    };
    let kept: Vec<Value> = rules(theirs)
        .iter()
        .filter(|r| is_catch_all(r) || !owned.contains(rule_host(r)))
        .cloned()
        .collect();
    left.insert("ingress".into(), Value::Array(kept));
    Value::Object(left)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_private_traffic_options_cftunnel_sets_replace_those_keys_and_keep_the_others() {
        let ours = json!({"ingress": [{"service": "http_status:404"}],
            "warp-routing": {"connectTimeout": 10, "maxActiveFlows": 500}});
        let theirs = json!({"ingress": [{"service": "http_status:404"}],
            "warp-routing": {"connectTimeout": 5, "tcpKeepAlive": 60}});
        let merged = merged_for_put(&theirs, &ours, &BTreeSet::new());
        assert_eq!(
            merged["warp-routing"],
            json!({"connectTimeout": 10, "maxActiveFlows": 500, "tcpKeepAlive": 60})
        );
        // What is cftunnel's of them: its keys only, so their tcpKeepAlive is no drift.
        assert_eq!(owned_warp(&merged, &ours), owned_warp(&ours, &ours));
        assert_ne!(owned_warp(&theirs, &ours), owned_warp(&ours, &ours));
        // Without spec.warpRouting, nothing of it is cftunnel's, and it is left as it is.
        let plain = json!({"ingress": [{"service": "http_status:404"}]});
        assert_eq!(owned_warp(&theirs, &plain), Value::Null);
        let kept = merged_for_put(&theirs, &plain, &BTreeSet::new());
        assert_eq!(kept["warp-routing"], theirs["warp-routing"]);
    }

    fn owned(hosts: &[&str]) -> BTreeSet<String> {
        hosts.iter().map(|h| h.to_string()).collect()
    }

    #[test]
    fn the_owned_view_ignores_fields_cloudflare_fills_in_and_rules_of_others() {
        let ours = json!({"ingress": [{"hostname": "a", "service": "http://x"}, {"service": "http_status:404"}]});
        let answered = json!({
            "ingress": [
                {"hostname": "a", "service": "http://x", "originRequest": {}},
                {"hostname": "dash", "service": "http://d", "originRequest": {}},
                {"service": "http_status:404", "originRequest": {"access": null}}
            ],
            "originRequest": {},
            "warp-routing": {"enabled": false}
        });
        let mine = owned(&["a"]);
        assert_eq!(owned_view(&ours, &mine), owned_view(&answered, &mine));
        let changed = json!({"ingress": [{"hostname": "a", "service": "http://y"}, {"service": "http_status:404"}]});
        assert_ne!(owned_view(&ours, &mine), owned_view(&changed, &mine));
        let explicit_off = json!({"ingress": [{"hostname": "a", "service": "http://x", "originRequest": {"noTLSVerify": false}}, {"service": "http_status:404"}]});
        assert_ne!(owned_view(&ours, &mine), owned_view(&explicit_off, &mine));
        let other_catch_all = json!({"ingress": [{"hostname": "a", "service": "http://x"}, {"service": "http_status:503"}]});
        assert_ne!(
            owned_view(&ours, &mine),
            owned_view(&other_catch_all, &mine)
        );
    }

    #[test]
    fn a_merge_keeps_others_rules_in_their_order_and_replaces_only_what_is_owned() {
        let theirs = json!({
            "ingress": [
                {"hostname": "z.example.com", "service": "http://other-z"},
                {"hostname": "old.example.com", "service": "http://ours-before"},
                {"hostname": "*.example.com", "service": "http://other-wild"},
                {"hostname": "b.example.com", "service": "http://other-b"},
                {"service": "http_status:503"}
            ],
            "warp-routing": {"enabled": true},
            "originRequest": {"noTLSVerify": true}
        });
        let ours = json!({"ingress": [
            {"hostname": "a.example.com", "service": "http://ours-a"},
            {"hostname": "*.deep.example.com", "service": "http://ours-deep"},
            {"service": "http_status:404"}
        ]});
        let merged = merged_for_put(
            &theirs,
            &ours,
            &owned(&["a.example.com", "*.deep.example.com", "old.example.com"]),
        );
        let hosts: Vec<&str> = rules(&merged).iter().map(rule_host).collect();
        assert_eq!(
            hosts,
            [
                "a.example.com",
                "z.example.com",
                "b.example.com",
                "*.deep.example.com",
                "*.example.com",
                "*"
            ],
            "exact hosts first (ours, then theirs in their order), deeper wildcards before broader, the catch-all last"
        );
        assert_eq!(rules(&merged)[5]["service"], "http_status:404");
        assert_eq!(merged["warp-routing"], json!({"enabled": true}));
        assert_eq!(
            merged.get("originRequest"),
            None,
            "the top-level settings are ours"
        );
        assert_eq!(merged_for_put(&Value::Null, &ours, &owned(&[])), ours);
    }

    #[test]
    fn withdrawing_takes_out_only_what_is_owned() {
        let theirs = json!({"ingress": [
            {"hostname": "a.example.com", "service": "http://ours"},
            {"hostname": "b.example.com", "service": "http://theirs"},
            {"service": "http_status:404"}
        ], "warp-routing": {"enabled": true}});
        assert_eq!(
            withdrawn(&theirs, &owned(&["a.example.com"])),
            json!({"ingress": [
                {"hostname": "b.example.com", "service": "http://theirs"},
                {"service": "http_status:404"}
            ], "warp-routing": {"enabled": true}})
        );
    }

    #[test]
    fn the_pushed_digest_is_tied_to_the_tunnel_id() {
        let config = json!({"ingress": [{"service": "http_status:404"}]});
        assert_ne!(pushed_digest("t1", &config), pushed_digest("t2", &config));
        let filled = json!({"ingress": [{"service": "http_status:404", "originRequest": {}}]});
        assert_eq!(pushed_digest("t1", &config), pushed_digest("t1", &filled));
    }

    #[test]
    fn the_hostnames_of_a_document_leave_out_its_catch_all() {
        let doc = json!({"ingress": [{"hostname": "a", "service": "x"}, {"hostname": "*", "path": "^/p", "service": "y"}, {"service": "z"}]});
        assert_eq!(rule_hostnames(&doc), owned(&["a", "*"]));
    }
}
