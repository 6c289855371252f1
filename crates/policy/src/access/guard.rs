//! Which hostnames the AccessPolicies protect, and how each stands (docs/design.md §3.7).
//!
//! A policy protects every hostname its targets serve in the route table. Choices:
//! - **One policy per target.** When several policies name the same object, the oldest
//!   (creation time, then name) protects it; the others are told so for that target.
//! - **Per hostname.** Protection follows the hostname, as an Access application does: every
//!   rule of a protected hostname is closed or checked, whichever object declares it.
//! - **Open only with proof.** A hostname is open (served, with cloudflared checking the
//!   Access token) only when the policy's own status records its application: the AUD and
//!   the team. Until then it is closed (503). Status is what a restart or another replica reads,
//!   so the first render after a restart is the last one before it, never public.
//! - **The user's word.** A policy being deleted protects nothing: its routes are public again
//!   (its applications go only after that render is applied).
//! - A GRPCRoute target is refused (Access does not apply to gRPC), and so is a rule for every
//!   host (`*`), which no application can cover: that one stays closed.
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::render::protection::Protection;
use crate::routes::{ANY_HOST, RouteTable, SourceKind, SourceRef};
use cftunnel_types::TunnelIdentity;
use cftunnel_types::access_policy::{AccessPolicy, PolicyTargetRef};
use kube::ResourceExt;

/// The reason of a target refused because Access does not apply to it.
pub const REASON_UNSUPPORTED_KIND: &str = "UnsupportedKind";
/// The reason of a target an older policy protects already.
pub const REASON_TARGET_CONFLICT: &str = "TargetConflict";
/// The reason of a target that is not one of cftunnel's routes (yet).
pub const REASON_TARGET_NOT_FOUND: &str = "TargetNotFound";
/// Why a protected hostname answers 503 before its application is recorded.
pub const WAITING: &str = "waiting for its Access application";

/// An AccessPolicy, by namespace and name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PolicyKey {
    pub namespace: String,
    pub name: String,
}

impl PolicyKey {
    pub fn of(policy: &AccessPolicy) -> PolicyKey {
        PolicyKey {
            namespace: policy.namespace().unwrap_or_default(),
            name: policy.name_any(),
        }
    }
}

impl std::fmt::Display for PolicyKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// One target of a policy: group, kind and name (in the policy's namespace).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TargetKey {
    pub group: String,
    pub kind: String,
    pub name: String,
}

impl TargetKey {
    pub fn of(target: &PolicyTargetRef) -> TargetKey {
        TargetKey {
            group: target.group.clone(),
            kind: target.kind.clone(),
            name: target.name.clone(),
        }
    }
}

/// A hostname some policy protects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Guarded {
    pub policy: PolicyKey,
    pub target: TargetKey,
    /// The object whose route serves it.
    pub source: Arc<SourceRef>,
    /// The tunnel serving it.
    pub tunnel: TunnelIdentity,
    pub protection: Protection,
}

/// A target a policy names that it does not protect, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub policy: PolicyKey,
    pub target: TargetKey,
    pub reason: &'static str,
    pub message: String,
}

/// Every protected hostname and every refused target.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AccessGuard {
    /// Lowercase hostname → how it is protected.
    pub hostnames: BTreeMap<String, Guarded>,
    pub refused: Vec<Refusal>,
}

impl AccessGuard {
    /// The protection of each hostname `tunnel` serves that a policy protects.
    pub fn of_tunnel(&self, tunnel: &TunnelIdentity) -> BTreeMap<String, Protection> {
        self.hostnames
            .iter()
            .filter(|(_, g)| &g.tunnel == tunnel)
            .map(|(h, g)| (h.clone(), g.protection.clone()))
            .collect()
    }

    /// Hostnames that get no new DNS record: closed, their application not there yet.
    pub fn held(&self) -> BTreeSet<String> {
        self.hostnames
            .iter()
            .filter(|(_, g)| matches!(g.protection, Protection::Closed { .. }))
            .map(|(h, _)| h.clone())
            .collect()
    }

    /// The hostnames `policy` protects.
    pub fn of_policy<'a>(
        &'a self,
        policy: &'a PolicyKey,
    ) -> impl Iterator<Item = (&'a String, &'a Guarded)> + 'a {
        self.hostnames
            .iter()
            .filter(move |(_, g)| &g.policy == policy)
    }

    /// The targets of `policy` it does not protect.
    pub fn refused_of<'a>(&'a self, policy: &'a PolicyKey) -> impl Iterator<Item = &'a Refusal> {
        self.refused.iter().filter(move |r| &r.policy == policy)
    }
}

/// The source kind a target names, or `None` for one Access cannot protect.
fn source_kind(target: &PolicyTargetRef) -> Option<SourceKind> {
    use cftunnel_types::names::GROUP;
    match (target.group.as_str(), target.kind.as_str()) {
        (g, "TunnelBinding") if g == GROUP => Some(SourceKind::TunnelBinding),
        ("gateway.networking.k8s.io", "HTTPRoute") => Some(SourceKind::HTTPRoute),
        ("networking.k8s.io", "Ingress") => Some(SourceKind::Ingress),
        ("", "Service") => Some(SourceKind::Service),
        _ => None,
    }
}

/// The application a policy's status records for `hostname`: (AUD, team).
fn recorded<'a>(policy: &'a AccessPolicy, hostname: &str) -> Option<(&'a str, &'a str)> {
    let targets = policy.status.as_ref()?.targets.as_ref()?;
    targets
        .iter()
        .flat_map(|t| &t.hostnames)
        .find(|h| h.hostname.eq_ignore_ascii_case(hostname))
        .filter(|h| !h.aud.is_empty() && !h.team.is_empty())
        .map(|h| (h.aud.as_str(), h.team.as_str()))
}

/// What the live `policies` protect in `table`.
pub fn guard(policies: &[Arc<AccessPolicy>], table: &RouteTable) -> AccessGuard {
    let mut live: Vec<&AccessPolicy> = policies
        .iter()
        .map(|p| &**p)
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect();
    live.sort_by(|a, b| {
        let key = |p: &AccessPolicy| {
            (
                p.metadata.creation_timestamp.as_ref().map(|t| t.0),
                p.namespace(),
                p.name_any(),
            )
        };
        key(a).cmp(&key(b))
    });
    let mut out = AccessGuard::default();
    let mut claimed: BTreeMap<Arc<SourceRef>, PolicyKey> = BTreeMap::new();
    for policy in live {
        let key = PolicyKey::of(policy);
        for target in &policy.spec.target_refs {
            let target_key = TargetKey::of(target);
            let refuse = |reason: &'static str, message: String| Refusal {
                policy: key.clone(),
                target: target_key.clone(),
                reason,
                message,
            };
            if target
                .namespace
                .as_deref()
                .is_some_and(|ns| ns != key.namespace)
            {
                out.refused.push(refuse(
                    REASON_TARGET_NOT_FOUND,
                    format!(
                        "targetRefs names namespace {:?}: a policy protects objects of its own namespace {:?} only; create the policy in that namespace",
                        target.namespace.as_deref().unwrap_or_default(),
                        key.namespace
                    ),
                ));
                continue;
            }
            let Some(kind) = source_kind(target) else {
                let message = if target.kind == "GRPCRoute" {
                    format!(
                        "GRPCRoute {}: Cloudflare Access does not apply to gRPC traffic, so this target cannot be protected; serve it through an HTTPRoute to protect it, or remove it from targetRefs",
                        target.name
                    )
                } else {
                    format!(
                        "{} {:?} {}: not a kind an AccessPolicy protects; name a TunnelBinding, HTTPRoute, Ingress or Service",
                        target.kind, target.group, target.name
                    )
                };
                out.refused.push(refuse(REASON_UNSUPPORTED_KIND, message));
                continue;
            };
            let sources: Vec<(&Arc<SourceRef>, _)> = table
                .sources
                .iter()
                .filter(|(s, _)| {
                    s.kind == kind && s.namespace == key.namespace && s.name == target.name
                })
                .collect();
            if sources.is_empty() {
                out.refused.push(refuse(
                    REASON_TARGET_NOT_FOUND,
                    format!(
                        "{} {}/{} is not a route of cftunnel's (it does not exist, or routes nothing through a tunnel)",
                        target.kind, key.namespace, target.name
                    ),
                ));
                continue;
            }
            for (source, status) in sources {
                if let Some(owner) = claimed.get(source) {
                    out.refused.push(refuse(
                        REASON_TARGET_CONFLICT,
                        format!(
                            "{} {}/{} is protected by the older AccessPolicy {owner}; name it in one policy only",
                            target.kind, key.namespace, target.name
                        ),
                    ));
                    continue;
                }
                claimed.insert(source.clone(), key.clone());
                let Some(tunnel) = &status.tunnel else {
                    continue;
                };
                for entry in status.routes.iter().filter(|e| e.reason.is_served()) {
                    let hostname = entry.hostname.to_ascii_lowercase();
                    if let Some(owner) = out.hostnames.get(&hostname) {
                        // One owner per protected hostname: the older policy's allow list
                        // decides; a newer one naming it through another source is refused
                        // for it, not ignored.
                        if owner.policy != key {
                            let message = format!(
                                "{hostname} ({} {}/{}) is protected by the older AccessPolicy {}; protect a hostname with one policy only",
                                target.kind, key.namespace, target.name, owner.policy
                            );
                            if !out
                                .refused
                                .iter()
                                .any(|r| r.policy == key && r.message == message)
                            {
                                out.refused.push(refuse(REASON_TARGET_CONFLICT, message));
                            }
                        }
                        continue;
                    }
                    let protection = if hostname == ANY_HOST {
                        Protection::Closed {
                            why: "a rule for every host cannot be put behind an Access application; give the route a hostname".into(),
                        }
                    } else {
                        match recorded(policy, &hostname) {
                            Some((aud, team)) => Protection::Open {
                                team: team.to_string(),
                                aud: aud.to_string(),
                            },
                            None => Protection::Closed {
                                why: WAITING.into(),
                            },
                        }
                    };
                    out.hostnames.insert(
                        hostname,
                        Guarded {
                            policy: key.clone(),
                            target: target_key.clone(),
                            source: source.clone(),
                            tunnel: tunnel.clone(),
                            protection,
                        },
                    );
                }
            }
        }
    }
    out
}

#[cfg(test)]
#[path = "guard_tests.rs"]
mod tests;
