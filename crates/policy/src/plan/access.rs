//! What cftunnel wants at Cloudflare Access for the guard's hostnames: per AccessPolicy its
//! reusable policies ([`reusable_policies`]), per protected hostname one self-hosted application
//! ([`application`], named by [`app_name`]) linking them first and the named `policies` after.
//! A rule for every host (`*`) gets none: no application covers it, it stays closed.
use std::collections::BTreeMap;
use std::sync::Arc;

use super::output::{AccessPlan, ApplicationPlan, RefusalPlan};
use crate::access::desired::{application, reusable_policies};
use crate::access::{AccessGuard, PolicyKey, app_name, policy_name};
use crate::dns::ClusterId;
use crate::render::protection::Protection;
use crate::routes::ANY_HOST;
use cftunnel_types::access_policy::AccessPolicy;

pub(super) fn access_plan(
    policies: &[Arc<AccessPolicy>],
    guard: &AccessGuard,
    cluster: &ClusterId,
) -> AccessPlan {
    let specs: BTreeMap<PolicyKey, &AccessPolicy> = policies
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| (PolicyKey::of(p), &**p))
        .collect();
    let mut plan = AccessPlan::default();
    for (hostname, guarded) in &guard.hostnames {
        let Some(policy) = specs.get(&guarded.policy) else {
            continue;
        };
        if hostname == ANY_HOST {
            continue;
        }
        let reusable = reusable_policies(&policy_name(cluster, &guarded.policy), &policy.spec);
        let names: Vec<String> = reusable
            .iter()
            .map(|p| p.name.clone())
            .chain(policy.spec.policies.iter().cloned())
            .collect();
        let name = app_name(cluster, &guarded.policy, hostname);
        let app = application(&name, hostname, &names, &policy.spec);
        plan.reusable_policies
            .insert(guarded.policy.to_string(), reusable);
        plan.applications.insert(
            hostname.clone(),
            ApplicationPlan {
                name: app.name,
                policy: guarded.policy.to_string(),
                target: format!("{} {}", guarded.target.kind, guarded.target.name),
                source: guarded.source.to_string(),
                tunnels: guarded.tunnels.iter().map(ToString::to_string).collect(),
                policies: app.policies.into_iter().map(|l| l.id).collect(),
                session_duration: app.session_duration,
                recorded: matches!(guarded.protection, Protection::Open { .. }),
            },
        );
    }
    plan.refused = guard
        .refused
        .iter()
        .map(|r| RefusalPlan {
            policy: r.policy.to_string(),
            target: format!("{} {}", r.target.kind, r.target.name),
            reason: r.reason.to_string(),
            message: r.message.clone(),
        })
        .collect();
    plan
}
