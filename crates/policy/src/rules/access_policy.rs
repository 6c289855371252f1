//! The rules of an AccessPolicy (docs/design.md §2.5): its targets are objects of its own
//! namespace of the five kinds it protects, each named once; it lets someone in; its emails,
//! domains, ids, policy names and session duration are well formed. A GRPCRoute target is
//! admitted with a warning: Access does not apply to gRPC, so that target will be refused.
use std::collections::BTreeSet;

use super::Verdict;
use super::duration::parse_go_duration;
use super::syntax::{is_dns_subdomain, is_domain_name, is_email, is_service_name, is_uuid};
use cftunnel_types::access_policy::{
    AccessPolicy, AccessPolicySpec, MAX_POLICY_NAME, TARGET_KINDS,
};
use cftunnel_types::cel::{ACCESS_POLICY_NOBODY_ALLOWED, ACCESS_POLICY_TARGET_KIND};

/// The shortest and longest `sessionDuration` cftunnel accepts (cftunnel's bounds: a minute, 30 days).
pub const MIN_SESSION_NANOS: u128 = 60 * 1_000_000_000;
pub const MAX_SESSION_NANOS: u128 = 720 * 3600 * 1_000_000_000;

/// The warning a GRPCRoute target gets (after its field path).
pub const GRPC_WARNING: &str = "Cloudflare Access does not apply to gRPC: the GRPCRoute target will be refused and left unprotected; remove it from spec.targetRefs, or protect its hostnames another way";

/// All rules of an AccessPolicy in `namespace`.
pub fn validate(spec: &AccessPolicySpec, namespace: &str) -> Verdict {
    let mut v = Verdict::default();
    check_targets(spec, namespace, &mut v);
    check_allow(spec, &mut v);
    check_policies(spec, &mut v);
    if let Some(duration) = spec.session_duration.as_deref() {
        check_session_duration(duration, &mut v);
    }
    v
}

fn check_targets(spec: &AccessPolicySpec, namespace: &str, v: &mut Verdict) {
    if spec.target_refs.is_empty() {
        v.deny(
            "spec.targetRefs",
            "must name at least one target; add the TunnelBinding, HTTPRoute, Ingress or Service to protect",
        );
    }
    let mut seen: Vec<(&str, &str, &str)> = Vec::new();
    for (i, target) in spec.target_refs.iter().enumerate() {
        let field = format!("spec.targetRefs[{i}]");
        match target.namespace.as_deref() {
            // The guard reads an empty namespace as another one (and would leave the target
            // unprotected): it is refused like any namespace but the policy's own.
            Some("") => v.deny(
                format!("{field}.namespace"),
                format!("must not be empty; leave it out or set it to {namespace:?}, the AccessPolicy's own namespace"),
            ),
            Some(other) if other != namespace => v.deny(
                format!("{field}.namespace"),
                format!("an AccessPolicy protects objects of its own namespace only; create the AccessPolicy in namespace {other}"),
            ),
            _ => {}
        }
        let known = TARGET_KINDS
            .iter()
            .any(|(g, k)| *g == target.group && *k == target.kind);
        if !known {
            v.deny(&field, ACCESS_POLICY_TARGET_KIND);
        } else if target.kind == "GRPCRoute" {
            v.warn(&field, GRPC_WARNING);
        }
        check_target_name(&field, &target.kind, &target.name, v);
        let key = (
            target.group.as_str(),
            target.kind.as_str(),
            target.name.as_str(),
        );
        if let Some(first) = seen.iter().position(|s| *s == key) {
            v.deny(
                &field,
                format!(
                    "names the same {} {:?} as spec.targetRefs[{first}]; list each target once",
                    target.kind, target.name
                ),
            );
        }
        seen.push(key);
    }
}

/// Warns of each target another AccessPolicy of the namespace names too: a target (and a
/// hostname) is protected by one policy, the older (by creation time, then name), and the
/// other is refused for it (`TargetConflict`), so one of the two allow lists never applies.
pub fn warn_targets_named_elsewhere<'p>(
    spec: &AccessPolicySpec,
    namespace: &str,
    name: &str,
    others: impl IntoIterator<Item = &'p AccessPolicy>,
    v: &mut Verdict,
) {
    let others: Vec<&AccessPolicy> = others
        .into_iter()
        .filter(|p| {
            p.metadata.namespace.as_deref() == Some(namespace)
                && p.metadata.name.as_deref() != Some(name)
                && p.metadata.deletion_timestamp.is_none()
        })
        .collect();
    for (i, target) in spec.target_refs.iter().enumerate() {
        let named = |p: &&&AccessPolicy| {
            p.spec.target_refs.iter().any(|t| {
                t.group == target.group
                    && t.kind == target.kind
                    && t.name == target.name
                    && t.namespace.as_deref().is_none_or(|ns| ns == namespace)
            })
        };
        let Some(other) = others.iter().find(named) else {
            continue;
        };
        let other = other.metadata.name.as_deref().unwrap_or_default();
        v.warn(
            format!("spec.targetRefs[{i}]"),
            format!(
                "{} {namespace}/{} is also named by AccessPolicy {namespace}/{other}: a target is protected by one policy only, the older, and the newer is refused for it (TargetConflict); name it in one policy",
                target.kind, target.name
            ),
        );
    }
}

fn check_target_name(field: &str, kind: &str, name: &str, v: &mut Verdict) {
    if kind == "Service" {
        if !is_service_name(name) {
            v.deny(
                format!("{field}.name"),
                format!("{name:?} is not a valid Service name; use lowercase letters, digits and '-', starting with a letter"),
            );
        }
    } else if !is_dns_subdomain(name) {
        v.deny(
            format!("{field}.name"),
            format!(
                "{name:?} is not a valid object name; use lowercase letters, digits, '-' and '.'"
            ),
        );
    }
}

fn check_allow(spec: &AccessPolicySpec, v: &mut Verdict) {
    let allow = &spec.allow;
    if allow.is_empty() && spec.policies.is_empty() {
        v.violations
            .push(super::Violation::from_message(ACCESS_POLICY_NOBODY_ALLOWED));
    }
    for (i, email) in allow.emails.iter().enumerate() {
        if !is_email(email) {
            v.deny(
                format!("spec.allow.emails[{i}]"),
                format!("{email:?} is not an email address; give one such as alice@example.com"),
            );
        }
    }
    for (i, domain) in allow.email_domains.iter().enumerate() {
        let field = format!("spec.allow.emailDomains[{i}]");
        match domain.strip_prefix('@') {
            Some(bare) if is_domain_name(bare) => v.deny(
                field,
                format!("{domain:?} starts with @; give the domain alone: {bare}"),
            ),
            _ if !is_domain_name(domain) => v.deny(
                field,
                format!("{domain:?} is not a domain; give the part of the addresses after @, such as example.com"),
            ),
            _ => {}
        }
    }
    for (list, what, items) in [
        ("groups", "an Access group id", &allow.groups),
        ("serviceTokens", "a service token id", &allow.service_tokens),
    ] {
        for (i, id) in items.iter().enumerate() {
            if !is_uuid(id) {
                v.deny(
                    format!("spec.allow.{list}[{i}]"),
                    format!("{id:?} is not {what}; give its id as the Zero Trust dashboard shows it, a UUID such as 5f8e0a1c-2b3d-4e5f-8a9b-0c1d2e3f4a5b"),
                );
            }
        }
    }
    if allow.any_valid_service_token && !allow.service_tokens.is_empty() {
        v.warn(
            "spec.allow.serviceTokens",
            "has no effect beside anyValidServiceToken: true, which lets in every service token of the account; remove one of them",
        );
    }
}

fn check_policies(spec: &AccessPolicySpec, v: &mut Verdict) {
    let mut seen = BTreeSet::new();
    for (i, name) in spec.policies.iter().enumerate() {
        let field = format!("spec.policies[{i}]");
        if name.trim().is_empty() {
            v.deny(
                field,
                "must not be empty; give the name of a reusable Access policy of the account",
            );
        } else if name.chars().count() > MAX_POLICY_NAME {
            v.deny(
                field,
                format!("is longer than {MAX_POLICY_NAME} characters; give the name of a reusable Access policy of the account"),
            );
        } else if is_cftunnel_policy_name(name) {
            v.deny(
                field,
                format!("{name:?} is a reusable policy cftunnel keeps for an AccessPolicy: its rules are that policy's to change, not this one's; name a reusable policy made in the dashboard, or put the people in spec.allow"),
            );
        } else if !seen.insert(name.as_str()) {
            v.deny(
                field,
                format!("{name:?} is named twice; list each policy once"),
            );
        }
    }
}

/// How the name cftunnel gives the reusable policy of an AccessPolicy starts
/// (`crate::access::names::policy_name`, whose tests hold the two together).
pub const CFTUNNEL_POLICY_PREFIX: &str = "cftunnel AccessPolicy ";

/// Is `name` one cftunnel gives the reusable policy of an AccessPolicy? Such a policy follows
/// another AccessPolicy's `allow`: naming it would let that policy's author decide who reaches
/// this one's routes.
pub fn is_cftunnel_policy_name(name: &str) -> bool {
    name.trim_start()
        .get(..CFTUNNEL_POLICY_PREFIX.len())
        .is_some_and(|start| start.eq_ignore_ascii_case(CFTUNNEL_POLICY_PREFIX))
}

fn check_session_duration(duration: &str, v: &mut Verdict) {
    match parse_go_duration(duration) {
        None => v.deny(
            "spec.sessionDuration",
            format!("{duration:?} is not a duration; use a number and a unit (s, m or h), e.g. 30m or 24h"),
        ),
        Some(nanos) if !(MIN_SESSION_NANOS..=MAX_SESSION_NANOS).contains(&nanos) => v.deny(
            "spec.sessionDuration",
            format!("{duration:?} is outside 1m to 720h; choose a session of one minute to 30 days, e.g. 24h"),
        ),
        Some(_) => {}
    }
}
