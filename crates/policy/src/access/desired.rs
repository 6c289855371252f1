//! What cftunnel wants at Cloudflare for one AccessPolicy: its reusable policy (from `allow`)
//! and, per hostname, a self-hosted application linking that policy first and the named
//! `policies` after it. Compared field by field with what Cloudflare holds, so an unchanged
//! policy costs no write.
use cftunnel_cloudflare::{
    AccessApp, AccessDecision, AccessPolicy as CfPolicy, AccessRule, NewAccessApp, NewAccessPolicy,
};
use cftunnel_types::access_policy::{AccessAllow, AccessPolicySpec};

/// Suffix of the name of the policy holding `allow`'s service tokens.
pub const SERVICE_TOKENS_SUFFIX: &str = " service-tokens";

/// The include rules of `allow` that name people (emails, domains, groups).
fn identity_rules(allow: &AccessAllow) -> Vec<AccessRule> {
    let mut rules: Vec<AccessRule> = Vec::new();
    rules.extend(allow.emails.iter().map(AccessRule::email));
    rules.extend(allow.email_domains.iter().map(AccessRule::email_domain));
    rules.extend(allow.groups.iter().map(AccessRule::group));
    rules
}

/// The include rules of `allow` that name service tokens.
fn token_rules(allow: &AccessAllow) -> Vec<AccessRule> {
    let mut rules: Vec<AccessRule> = allow
        .service_tokens
        .iter()
        .map(AccessRule::service_token)
        .collect();
    if allow.any_valid_service_token {
        rules.push(AccessRule::any_valid_service_token());
    }
    rules
}

/// The reusable policies of `spec`, named from `name`: one deciding `allow` for the people it
/// names, one deciding `non_identity` for its service tokens (Access matches a service token
/// only in a policy of that decision, which asks no one to sign in). Either is left out when
/// `allow` names none of its kind; none when the named `policies` alone decide.
pub fn reusable_policies(name: &str, spec: &AccessPolicySpec) -> Vec<NewAccessPolicy> {
    let mut out = Vec::new();
    for (name, decision, include) in [
        (
            name.to_string(),
            AccessDecision::Allow,
            identity_rules(&spec.allow),
        ),
        (
            format!("{name}{SERVICE_TOKENS_SUFFIX}"),
            AccessDecision::NonIdentity,
            token_rules(&spec.allow),
        ),
    ] {
        if include.is_empty() {
            continue;
        }
        let mut policy = NewAccessPolicy::new(name, decision, include);
        policy.session_duration = spec.session_duration.clone();
        out.push(policy);
    }
    out
}

/// Does Cloudflare's `live` policy say what `wanted` says?
pub fn policy_matches(live: &CfPolicy, wanted: &NewAccessPolicy) -> bool {
    live.decision == wanted.decision
        && live.include == wanted.include
        && live.exclude == wanted.exclude
        && live.require == wanted.require
        && (wanted.session_duration.is_none() || live.session_duration == wanted.session_duration)
}

/// The application for `hostname` named `name`, linking `policy_ids` in order.
pub fn application(
    name: &str,
    hostname: &str,
    policy_ids: &[String],
    spec: &AccessPolicySpec,
) -> NewAccessApp {
    let app = NewAccessApp::self_hosted(name, hostname).with_policies(policy_ids.iter().cloned());
    match &spec.session_duration {
        Some(duration) => app.with_session_duration(duration.clone()),
        None => app,
    }
}

/// Does Cloudflare's `live` application link the policies of `wanted`, in its order, with
/// its session?
pub fn app_matches(live: &AccessApp, wanted: &NewAccessApp) -> bool {
    let mut linked: Vec<(i64, &str)> = live
        .policies
        .iter()
        .map(|p| (p.precedence.unwrap_or(i64::MAX), p.policy.id.as_str()))
        .collect();
    linked.sort();
    let linked: Vec<&str> = linked.into_iter().map(|(_, id)| id).collect();
    let want: Vec<&str> = wanted.policies.iter().map(|l| l.id.as_str()).collect();
    linked == want
        && live.name == wanted.name
        && (wanted.session_duration.is_none() || live.session_duration == wanted.session_duration)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(allow: AccessAllow) -> AccessPolicySpec {
        AccessPolicySpec {
            target_refs: Vec::new(),
            allow,
            policies: Vec::new(),
            session_duration: Some("8h".into()),
        }
    }

    #[test]
    fn people_and_service_tokens_go_to_a_policy_of_their_own_decision_each() {
        let both = spec(AccessAllow {
            emails: vec!["alice@example.com".into()],
            email_domains: vec!["example.com".into()],
            any_valid_service_token: true,
            ..AccessAllow::default()
        });
        let policies = reusable_policies("p", &both);
        assert_eq!(policies.len(), 2);
        assert_eq!(
            (policies[0].name.as_str(), policies[0].decision),
            ("p", AccessDecision::Allow)
        );
        assert_eq!(
            policies[0].include,
            vec![
                AccessRule::email("alice@example.com"),
                AccessRule::email_domain("example.com"),
            ]
        );
        assert_eq!(policies[0].session_duration.as_deref(), Some("8h"));
        assert_eq!(
            (policies[1].name.as_str(), policies[1].decision),
            ("p service-tokens", AccessDecision::NonIdentity)
        );
        assert_eq!(
            policies[1].include,
            vec![AccessRule::any_valid_service_token()]
        );
        let people = spec(AccessAllow {
            groups: vec!["g".into()],
            ..AccessAllow::default()
        });
        assert_eq!(reusable_policies("p", &people).len(), 1);
        assert!(reusable_policies("p", &spec(AccessAllow::default())).is_empty());
    }
}
