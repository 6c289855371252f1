//! The AccessPolicy's status: per target the hostnames behind Access (application id, AUD,
//! team, account) or why not, and the `Accepted` and `Programmed` conditions; `lastTransitionTime`
//! is kept while a condition's status holds. The status writer writes it
//! (`status_writer::AccessStatuses`).
use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use cftunnel_policy::access::{AccessGuard, PolicyKey, TargetKey};
use cftunnel_types::access_policy::{
    AccessPolicy, AccessPolicyStatus, CONDITION_ACCEPTED, CONDITION_PROGRAMMED, ProtectedHostname,
    TargetStatus,
};

/// What became of one protected hostname in a reconcile.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Outcome {
    /// Behind its application.
    Protected(ProtectedHostname),
    /// A step waits for something that comes by itself (a tunnel's render).
    Waiting(String),
    /// Cannot be protected until someone acts: no organization, someone else's application,
    /// a named policy the account lacks.
    Refused {
        reason: &'static str,
        message: String,
    },
    /// Cloudflare failed or refused a call (tried again with backoff).
    Failed(String),
}

pub(crate) const REASON_PENDING: &str = "Pending";
pub(crate) const REASON_CLOUDFLARE_ERROR: &str = "CloudflareError";
pub(crate) const REASON_NO_ORGANIZATION: &str = "NoOrganization";
pub(crate) const REASON_APPLICATION_CONFLICT: &str = "ApplicationConflict";
pub(crate) const REASON_POLICY_NOT_FOUND: &str = "PolicyNotFound";
/// A rule for every host: no per-hostname application can cover it.
pub(crate) const REASON_CATCH_ALL: &str = "CatchAllNotProtectable";
/// Tunnels of two Cloudflare accounts serve the hostname: no one application covers it.
pub(crate) const REASON_ACCOUNTS_DIFFER: &str = "AccountsDiffer";

/// One application a policy's status records, with the target it is listed under.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Recorded {
    pub target: TargetKey,
    pub hostname: ProtectedHostname,
    /// Listed to be deleted: it opens nothing.
    pub retiring: bool,
}

/// Every application `policy`'s status records.
pub(crate) fn recorded(policy: &AccessPolicy) -> Vec<ProtectedHostname> {
    recorded_with_targets(policy)
        .into_iter()
        .map(|r| r.hostname)
        .collect()
}

/// Every application `policy`'s status records: under its targets (protecting a hostname) and
/// in `retiring` (to delete), each once. An entry of a target whose reason is `Retiring` is
/// how an earlier release listed a removed target's applications: retiring too.
pub(crate) fn recorded_with_targets(policy: &AccessPolicy) -> Vec<Recorded> {
    let status = policy.status.as_ref();
    let targets = status.and_then(|s| s.targets.as_ref());
    let mut out: Vec<Recorded> = targets
        .into_iter()
        .flatten()
        .flat_map(|t| {
            let target = TargetKey {
                group: t.group.clone(),
                kind: t.kind.clone(),
                name: t.name.clone(),
            };
            let retiring = t.reason.as_deref() == Some(LEGACY_RETIRING);
            t.hostnames.iter().map(move |h| Recorded {
                target: target.clone(),
                hostname: h.clone(),
                retiring,
            })
        })
        .collect();
    for h in status
        .and_then(|s| s.retiring.as_ref())
        .into_iter()
        .flatten()
    {
        if !out
            .iter()
            .any(|r| r.hostname.application_id == h.application_id)
        {
            out.push(Recorded {
                target: TargetKey {
                    group: String::new(),
                    kind: String::new(),
                    name: String::new(),
                },
                hostname: h.clone(),
                retiring: true,
            });
        }
    }
    out
}

/// The reason an earlier release gave a target entry that listed retiring applications.
const LEGACY_RETIRING: &str = "Retiring";

/// The status of `policy` after a reconcile: `outcomes` per hostname it protects (by the
/// guard), `retiring` the applications still to delete.
pub(crate) fn build(
    policy: &AccessPolicy,
    guard: &AccessGuard,
    outcomes: &BTreeMap<String, Outcome>,
    retiring: &[Recorded],
    now: Time,
) -> AccessPolicyStatus {
    let key = PolicyKey::of(policy);
    let mut targets: Vec<TargetStatus> = Vec::new();
    let mut problems: Vec<(&'static str, String)> = Vec::new();
    let (mut protected, mut total) = (0usize, 0usize);
    for target in &policy.spec.target_refs {
        let target_key = TargetKey::of(target);
        let mut entry = TargetStatus {
            group: target.group.clone(),
            kind: target.kind.clone(),
            name: target.name.clone(),
            ..TargetStatus::default()
        };
        if let Some(refusal) = guard.refused_of(&key).find(|r| r.target == target_key) {
            entry.reason = Some(refusal.reason.to_string());
            entry.message = Some(bounded(refusal.message.clone()));
        }
        for (hostname, guarded) in guard.of_policy(&key) {
            if guarded.target != target_key {
                continue;
            }
            total += 1;
            let (reason, message) = match outcomes.get(hostname) {
                Some(Outcome::Protected(h)) => {
                    protected += 1;
                    entry.hostnames.push(h.clone());
                    continue;
                }
                Some(Outcome::Waiting(m)) => (REASON_PENDING, m.clone()),
                Some(Outcome::Refused { reason, message }) => (*reason, message.clone()),
                Some(Outcome::Failed(m)) => (REASON_CLOUDFLARE_ERROR, m.clone()),
                None => (REASON_PENDING, format!("{hostname}: not looked at yet")),
            };
            problems.push((reason, message.clone()));
            if entry.reason.is_none() {
                entry.reason = Some(reason.to_string());
                entry.message = Some(bounded(message));
            }
        }
        targets.push(entry);
    }
    targets.truncate(cftunnel_types::access_policy::MAX_TARGETS);
    // Targets refused whole: a target refused one hostname (another policy protects it) but
    // protecting others is still accepted.
    let refused: Vec<_> = guard
        .refused_of(&key)
        .filter(|r| !guard.of_policy(&key).any(|(_, g)| g.target == r.target))
        .collect();
    let refused_targets: std::collections::BTreeSet<_> =
        refused.iter().map(|r| &r.target).collect();
    let accepted = if !refused.is_empty() && refused_targets.len() >= policy.spec.target_refs.len()
    {
        condition(
            CONDITION_ACCEPTED,
            false,
            refused[0].reason,
            join(refused.iter().map(|r| r.message.as_str())),
        )
    } else {
        condition(CONDITION_ACCEPTED, true, "Accepted", String::new())
    };
    let programmed = if let Some((reason, _)) = problems
        .iter()
        .find(|(r, _)| *r == REASON_CLOUDFLARE_ERROR)
        .or_else(|| problems.iter().find(|(r, _)| *r != REASON_PENDING))
        .or_else(|| problems.first())
    {
        condition(
            CONDITION_PROGRAMMED,
            false,
            reason,
            join(problems.iter().map(|(_, m)| m.as_str())),
        )
    } else if total == 0 {
        condition(
            CONDITION_PROGRAMMED,
            false,
            "NoHostnames",
            "the targets serve no hostname through a tunnel yet".into(),
        )
    } else {
        condition(
            CONDITION_PROGRAMMED,
            true,
            "Programmed",
            format!("{protected} hostname(s) behind Cloudflare Access"),
        )
    };
    let previous = policy
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let generation = policy.metadata.generation;
    let conditions = [accepted, programmed]
        .into_iter()
        .map(|mut c| {
            c.observed_generation = generation;
            c.last_transition_time = match previous.iter().find(|p| p.type_ == c.type_) {
                Some(p) if p.status == c.status => p.last_transition_time.clone(),
                _ => now.clone(),
            };
            c
        })
        .collect();
    // Every application still to delete, none dropped: the list shrinks only as they go.
    let mut retiring_apps: Vec<ProtectedHostname> = Vec::new();
    for r in retiring {
        if !retiring_apps
            .iter()
            .any(|h| h.application_id == r.hostname.application_id)
        {
            retiring_apps.push(r.hostname.clone());
        }
    }
    AccessPolicyStatus {
        conditions: Some(conditions),
        targets: Some(targets),
        retiring: (!retiring_apps.is_empty()).then_some(retiring_apps),
    }
}

/// A target's message within the CRD's bound (1,024 bytes): a longer one would make the whole
/// status write fail, and with it the record of every new application.
fn bounded(message: String) -> String {
    crate::term::events::bounded(message)
}

fn condition(type_: &str, status: bool, reason: &str, message: String) -> Condition {
    Condition {
        type_: type_.to_string(),
        status: if status { "True" } else { "False" }.to_string(),
        reason: reason.to_string(),
        message: crate::term::events::bounded(message),
        observed_generation: None,
        last_transition_time: Time(jiff::Timestamp::UNIX_EPOCH),
    }
}

fn join<'a>(messages: impl Iterator<Item = &'a str>) -> String {
    let mut seen: Vec<&str> = Vec::new();
    for m in messages {
        if !seen.contains(&m) {
            seen.push(m);
        }
    }
    seen.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn recorded(target: &str, hostname: &str) -> Recorded {
        Recorded {
            target: TargetKey {
                group: "networking.k8s.io".into(),
                kind: "Ingress".into(),
                name: target.into(),
            },
            hostname: ProtectedHostname {
                hostname: hostname.into(),
                application_id: format!("app-{hostname}"),
                aud: format!("aud-{hostname}"),
                ..ProtectedHostname::default()
            },
            retiring: false,
        }
    }

    #[test]
    fn a_retiring_target_keeps_the_record_of_every_hostname() {
        let policy: AccessPolicy = serde_json::from_value(json!({
            "apiVersion": "networking.cfargotunnel.com/v1alpha2",
            "kind": "AccessPolicy",
            "metadata": {"name": "p", "namespace": "shop", "generation": 2},
            "spec": {
                "targetRefs": [{"group": "networking.k8s.io", "kind": "Ingress", "name": "new"}],
                "allow": {"emails": ["a@example.com"]},
            },
        }))
        .expect("policy");
        let retiring = [
            recorded("old", "h1.example.com"),
            recorded("old", "h2.example.com"),
        ];
        let status = build(
            &policy,
            &AccessGuard::default(),
            &BTreeMap::new(),
            &retiring,
            Time(jiff::Timestamp::UNIX_EPOCH),
        );
        let hostnames: Vec<_> = status
            .retiring
            .iter()
            .flatten()
            .map(|h| &h.hostname)
            .collect();
        assert_eq!(hostnames, ["h1.example.com", "h2.example.com"]);
        assert!(
            status
                .targets
                .iter()
                .flatten()
                .all(|t| t.hostnames.is_empty()),
            "a retiring application is never listed where it would open its hostname"
        );
    }

    #[test]
    fn more_retiring_applications_than_targets_are_all_kept_and_a_legacy_entry_is_read_as_retiring()
    {
        let mut policy: AccessPolicy = serde_json::from_value(json!({
            "apiVersion": "networking.cfargotunnel.com/v1alpha2",
            "kind": "AccessPolicy",
            "metadata": {"name": "p", "namespace": "shop"},
            "spec": {
                "targetRefs": [{"group": "networking.k8s.io", "kind": "Ingress", "name": "new"}],
                "allow": {"emails": ["a@example.com"]},
            },
        }))
        .expect("policy");
        let retiring: Vec<Recorded> = (0..40)
            .map(|i| recorded(&format!("old-{i}"), &format!("h{i}.example.com")))
            .collect();
        let status = build(
            &policy,
            &AccessGuard::default(),
            &BTreeMap::new(),
            &retiring,
            Time(jiff::Timestamp::UNIX_EPOCH),
        );
        assert_eq!(status.retiring.as_ref().map(Vec::len), Some(40));
        policy.status = Some(status);
        let read = recorded_with_targets(&policy);
        assert_eq!(read.len(), 40);
        assert!(read.iter().all(|r| r.retiring));
        // A status an earlier release wrote: a removed target's entry, reason Retiring.
        policy.status = Some(AccessPolicyStatus {
            targets: Some(vec![TargetStatus {
                group: "networking.k8s.io".into(),
                kind: "Ingress".into(),
                name: "old".into(),
                hostnames: vec![recorded("old", "h.example.com").hostname],
                reason: Some("Retiring".into()),
                message: None,
            }]),
            ..AccessPolicyStatus::default()
        });
        let read = recorded_with_targets(&policy);
        assert_eq!(read.len(), 1);
        assert!(read[0].retiring);
    }
}
