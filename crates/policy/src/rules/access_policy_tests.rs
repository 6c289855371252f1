//! AccessPolicy rules, exact messages; properties over generated policies.
use proptest::prelude::*;
use serde_json::{Value, json};

use super::access_policy::{GRPC_WARNING, validate};
use cftunnel_types::access_policy::AccessPolicySpec;
use cftunnel_types::cel::{ACCESS_POLICY_NOBODY_ALLOWED, ACCESS_POLICY_TARGET_KIND};

fn spec(value: Value) -> AccessPolicySpec {
    serde_json::from_value(value).unwrap_or_else(|e| panic!("spec: {e}"))
}

fn good() -> Value {
    json!({
        "targetRefs": [
            {"group": "networking.cfargotunnel.com", "kind": "TunnelBinding", "name": "web"},
            {"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": "shop"},
            {"group": "networking.k8s.io", "kind": "Ingress", "name": "app"},
            {"group": "", "kind": "Service", "name": "api"},
        ],
        "allow": {"emails": ["alice@example.com"], "emailDomains": ["example.com"]},
        "sessionDuration": "24h",
    })
}

/// The denial messages of `value` in namespace `shop`, in order.
fn denials(value: Value) -> Vec<String> {
    validate(&spec(value), "shop")
        .violations
        .iter()
        .map(|v| v.message().to_string())
        .collect()
}

#[test]
fn the_example_policy_is_allowed_without_warnings() {
    let v = validate(&spec(good()), "shop");
    assert!(v.is_allowed(), "{:?}", v.denial_message());
    assert!(v.warnings.is_empty(), "{:?}", v.warnings);
}

#[test]
fn a_target_in_another_namespace_is_refused_naming_where_to_create_the_policy() {
    let mut value = good();
    value["targetRefs"][1]["namespace"] = json!("payments");
    assert_eq!(
        denials(value),
        [
            "spec.targetRefs[1].namespace: an AccessPolicy protects objects of its own namespace only; create the AccessPolicy in namespace payments"
        ]
    );
}

#[test]
fn a_target_naming_the_own_namespace_is_allowed_and_an_empty_one_refused() {
    let mut value = good();
    value["targetRefs"][0]["namespace"] = json!("shop");
    assert_eq!(denials(value.clone()), Vec::<String>::new());
    value["targetRefs"][1]["namespace"] = json!("");
    assert_eq!(
        denials(value),
        [
            "spec.targetRefs[1].namespace: must not be empty; leave it out or set it to \"shop\", the AccessPolicy's own namespace"
        ]
    );
}

#[test]
fn a_policy_that_lets_nobody_in_is_refused() {
    let expected = [ACCESS_POLICY_NOBODY_ALLOWED];
    assert_eq!(
        expected[0],
        "spec.allow and spec.policies are both empty: an AccessPolicy that lets nobody in would lock the routes; add spec.allow.emails, emailDomains, groups, serviceTokens or anyValidServiceToken: true, or name a reusable policy in spec.policies"
    );
    let mut value = good();
    if let Some(spec) = value.as_object_mut() {
        spec.remove("allow");
    }
    assert_eq!(denials(value.clone()), expected);
    value["allow"] = json!({"emails": [], "anyValidServiceToken": false});
    assert_eq!(denials(value.clone()), expected);
    for enough in [
        json!({"allow": {"anyValidServiceToken": true}}),
        json!({"policies": ["staff"]}),
        json!({"allow": {"groups": ["5f8e0a1c-2b3d-4e5f-8a9b-0c1d2e3f4a5b"]}}),
    ] {
        let mut value = value.clone();
        for (k, field) in enough.as_object().into_iter().flatten() {
            value[k] = field.clone();
        }
        assert_eq!(denials(value), Vec::<String>::new());
    }
}

#[test]
fn a_group_and_kind_pair_outside_the_five_is_refused_with_the_cel_text() {
    let mut value = good();
    value["targetRefs"][0]["group"] = json!("");
    value["targetRefs"][3]["kind"] = json!("Gateway");
    assert_eq!(
        denials(value),
        [
            format!("spec.targetRefs[0]: {ACCESS_POLICY_TARGET_KIND}"),
            format!("spec.targetRefs[3]: {ACCESS_POLICY_TARGET_KIND}"),
        ]
    );
}

#[test]
fn target_names_must_be_object_names_and_distinct() {
    let mut value = good();
    value["targetRefs"][0]["name"] = json!("Web_1");
    value["targetRefs"][3]["name"] = json!("1api");
    if let Some(targets) = value["targetRefs"].as_array_mut() {
        targets.push(
            json!({"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": "shop"}),
        );
    }
    assert_eq!(
        denials(value),
        [
            "spec.targetRefs[0].name: \"Web_1\" is not a valid object name; use lowercase letters, digits, '-' and '.'",
            "spec.targetRefs[3].name: \"1api\" is not a valid Service name; use lowercase letters, digits and '-', starting with a letter",
            "spec.targetRefs[4]: names the same HTTPRoute \"shop\" as spec.targetRefs[1]; list each target once",
        ]
    );
}

#[test]
fn no_target_at_all_is_refused() {
    let mut value = good();
    value["targetRefs"] = json!([]);
    assert_eq!(
        denials(value),
        [
            "spec.targetRefs: must name at least one target; add the TunnelBinding, HTTPRoute, Ingress or Service to protect"
        ]
    );
}

#[test]
fn a_grpc_route_target_is_admitted_with_a_warning() {
    let mut value = good();
    value["targetRefs"][1]["kind"] = json!("GRPCRoute");
    let v = validate(&spec(value), "shop");
    assert!(v.is_allowed(), "{:?}", v.denial_message());
    assert_eq!(v.warnings, [format!("spec.targetRefs[1]: {GRPC_WARNING}")]);
    assert_eq!(
        v.warnings[0],
        "spec.targetRefs[1]: Cloudflare Access does not apply to gRPC: the GRPCRoute target will be refused and left unprotected; remove it from spec.targetRefs, or protect its hostnames another way"
    );
}

#[test]
fn emails_domains_and_ids_are_checked_one_by_one() {
    let mut value = good();
    value["allow"] = json!({
        "emails": ["alice@example.com", "bob", "carol@localhost"],
        "emailDomains": ["@example.com", "example..com"],
        "groups": ["staff"],
        "serviceTokens": ["5f8e0a1c2b3d4e5f8a9b0c1d2e3f4a5b"],
    });
    assert_eq!(
        denials(value),
        [
            "spec.allow.emails[1]: \"bob\" is not an email address; give one such as alice@example.com",
            "spec.allow.emails[2]: \"carol@localhost\" is not an email address; give one such as alice@example.com",
            "spec.allow.emailDomains[0]: \"@example.com\" starts with @; give the domain alone: example.com",
            "spec.allow.emailDomains[1]: \"example..com\" is not a domain; give the part of the addresses after @, such as example.com",
            "spec.allow.groups[0]: \"staff\" is not an Access group id; give its id as the Zero Trust dashboard shows it, a UUID such as 5f8e0a1c-2b3d-4e5f-8a9b-0c1d2e3f4a5b",
            "spec.allow.serviceTokens[0]: \"5f8e0a1c2b3d4e5f8a9b0c1d2e3f4a5b\" is not a service token id; give its id as the Zero Trust dashboard shows it, a UUID such as 5f8e0a1c-2b3d-4e5f-8a9b-0c1d2e3f4a5b",
        ]
    );
}

#[test]
fn service_tokens_beside_any_valid_service_token_get_a_warning() {
    let mut value = good();
    value["allow"] = json!({
        "serviceTokens": ["5f8e0a1c-2b3d-4e5f-8a9b-0c1d2e3f4a5b"],
        "anyValidServiceToken": true,
    });
    let v = validate(&spec(value), "shop");
    assert!(v.is_allowed());
    assert_eq!(
        v.warnings,
        [
            "spec.allow.serviceTokens: has no effect beside anyValidServiceToken: true, which lets in every service token of the account; remove one of them"
        ]
    );
}

#[test]
fn policy_names_are_non_empty_bounded_and_distinct() {
    let mut value = good();
    value["policies"] = json!(["staff", " ", "a".repeat(256), "staff"]);
    assert_eq!(
        denials(value),
        [
            "spec.policies[1]: must not be empty; give the name of a reusable Access policy of the account",
            "spec.policies[2]: is longer than 255 characters; give the name of a reusable Access policy of the account",
            "spec.policies[3]: \"staff\" is named twice; list each policy once",
        ]
    );
}

#[test]
fn a_reusable_policy_cftunnel_keeps_for_another_access_policy_cannot_be_named() {
    let mut value = good();
    value["policies"] = json!([
        "cftunnel AccessPolicy other/admins cluster=0b7c",
        "CFTUNNEL accesspolicy shop/staff cluster=0b7c service-tokens",
        "cftunnel-ops",
    ]);
    let denied = denials(value);
    assert_eq!(denied.len(), 2, "{denied:?}");
    assert!(denied[0].starts_with("spec.policies[0]: \"cftunnel AccessPolicy other/admins"));
    assert!(denied[0].contains("name a reusable policy made in the dashboard"));
    assert!(denied[1].starts_with("spec.policies[1]: "));
}

#[test]
fn session_durations_are_go_durations_from_a_minute_to_thirty_days() {
    for ok in ["1m", "30m", "24h", "1h30m", "720h", "90s"] {
        let mut value = good();
        value["sessionDuration"] = json!(ok);
        assert_eq!(denials(value), Vec::<String>::new(), "{ok}");
    }
    let mut value = good();
    value["sessionDuration"] = json!("1d");
    assert_eq!(
        denials(value),
        [
            "spec.sessionDuration: \"1d\" is not a duration; use a number and a unit (s, m or h), e.g. 30m or 24h"
        ]
    );
    for out in ["59s", "0", "721h"] {
        let mut value = good();
        value["sessionDuration"] = json!(out);
        assert_eq!(
            denials(value),
            [format!(
                "spec.sessionDuration: {out:?} is outside 1m to 720h; choose a session of one minute to 30 days, e.g. 24h"
            )]
        );
    }
}

fn target() -> impl Strategy<Value = Value> {
    (
        prop::sample::select(vec![
            ("networking.cfargotunnel.com", "TunnelBinding"),
            ("gateway.networking.k8s.io", "HTTPRoute"),
            ("networking.k8s.io", "Ingress"),
            ("", "Service"),
            ("", "Ingress"),
        ]),
        "[a-z][a-z0-9-]{0,8}[a-z0-9]|[A-Z_]{1,3}",
        prop::option::of(prop::sample::select(vec!["shop", "other", ""])),
    )
        .prop_map(|((group, kind), name, namespace)| {
            let mut t = json!({"group": group, "kind": kind, "name": name});
            if let Some(ns) = namespace {
                t["namespace"] = json!(ns);
            }
            t
        })
}

proptest! {
    /// Whatever the targets, the policy is refused exactly when some target is in another
    /// namespace or an empty one, of an unknown pair, badly named or repeated; each refusal names its field.
    #[test]
    fn refusals_match_the_targets_that_break_a_rule(targets in prop::collection::vec(target(), 1..6)) {
        let mut value = good();
        value["targetRefs"] = Value::Array(targets.clone());
        let v = validate(&spec(value), "shop");
        let mut seen = Vec::new();
        let mut broken = 0;
        for t in &targets {
            let key = (t["group"].clone(), t["kind"].clone(), t["name"].clone());
            let name = t["name"].as_str().unwrap_or_default();
            let bad = t["namespace"] == "other"
                || t["namespace"] == ""
                || (t["group"] == "" && t["kind"] == "Ingress")
                || !name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                || seen.contains(&key);
            seen.push(key);
            broken += usize::from(bad);
        }
        prop_assert_eq!(v.is_allowed(), broken == 0, "{:?}", v.violations);
        for violation in &v.violations {
            prop_assert!(violation.message().starts_with("spec.targetRefs["), "{}", violation);
        }
    }

    /// Any syntactically plain address is an email; the rules never panic on arbitrary text.
    #[test]
    fn plain_addresses_pass_and_arbitrary_text_never_panics(
        local in "[a-z0-9][a-z0-9._+-]{0,10}[a-z0-9]",
        domain in "[a-z][a-z0-9-]{0,8}[a-z0-9]\\.(com|org|co\\.uk)",
        junk in "\\PC{0,40}",
    ) {
        prop_assume!(!local.contains(".."));
        let mut value = good();
        value["allow"] = json!({"emails": [format!("{local}@{domain}")], "emailDomains": [domain]});
        prop_assert!(validate(&spec(value.clone()), "shop").is_allowed());
        value["allow"] = json!({"emails": [junk.clone()], "groups": [junk.clone()]});
        value["sessionDuration"] = json!(junk);
        let _ = validate(&spec(value), "shop");
    }
}
