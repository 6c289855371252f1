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
    /// Every tunnel serving it, through any object: protection follows the hostname, so each
    /// of them renders it closed or behind the application (a route with parents on two
    /// tunnels is protected on both).
    pub tunnels: BTreeSet<TunnelIdentity>,
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
    /// While the AccessPolicies cannot be known: per tunnel, the hostnames it serves closed
    /// for that reason alone ([`AccessGuard::close_unknown`]).
    pub unknown: BTreeMap<TunnelIdentity, BTreeSet<String>>,
    /// Why the AccessPolicies cannot be known (empty when they can).
    pub unknown_why: String,
}

impl AccessGuard {
    /// The protection of each hostname `tunnel` serves that a policy protects, or that is
    /// closed because the policies cannot be known.
    pub fn of_tunnel(&self, tunnel: &TunnelIdentity) -> BTreeMap<String, Protection> {
        let mut out: BTreeMap<String, Protection> = self
            .hostnames
            .iter()
            .filter(|(_, g)| g.tunnels.contains(tunnel))
            .map(|(h, g)| (h.clone(), g.protection.clone()))
            .collect();
        for hostname in self.unknown.get(tunnel).into_iter().flatten() {
            out.entry(hostname.clone())
                .or_insert_with(|| Protection::Closed {
                    why: self.unknown_why.clone(),
                });
        }
        out
    }

    /// Hostnames that get no new DNS record: closed, their application not there yet, or
    /// closed while the policies cannot be known.
    pub fn held(&self) -> BTreeSet<String> {
        self.hostnames
            .iter()
            .filter(|(_, g)| matches!(g.protection, Protection::Closed { .. }))
            .map(|(h, _)| h.clone())
            .chain(self.unknown.values().flatten().cloned())
            .collect()
    }

    /// The AccessPolicies cannot be known now (`why`): every hostname a tunnel serves in `table`
    /// that it did not serve in the open in `baseline` (the last table and guard computed while
    /// they could be known; `None`: none since the process started) is closed, besides what the
    /// last known policies protect. What was open stays open (a route working before is not
    /// taken down over an RBAC change), and nothing new is opened: a policy that cannot be read
    /// may protect it.
    pub fn close_unknown(
        &mut self,
        table: &RouteTable,
        baseline: Option<(&RouteTable, &AccessGuard)>,
        why: &str,
    ) {
        self.unknown_why = why.to_string();
        for (tunnel, routes) in &table.tunnels {
            // Open means served with no protection at all: a hostname behind Access then is
            // not public now because its policy can no longer be seen protecting it.
            let was_open: BTreeSet<String> = match baseline {
                Some((old_table, old_guard)) => {
                    let protected = old_guard.of_tunnel(tunnel);
                    old_table
                        .tunnels
                        .get(tunnel)
                        .into_iter()
                        .flat_map(|r| r.entries.iter())
                        .filter(|e| e.reason.is_served())
                        .map(|e| e.hostname.to_ascii_lowercase())
                        .filter(|h| !protected.contains_key(h))
                        .collect()
                }
                None => BTreeSet::new(),
            };
            let closing: BTreeSet<String> = routes
                .entries
                .iter()
                .filter(|e| e.reason.is_served())
                .map(|e| e.hostname.to_ascii_lowercase())
                .filter(|h| !was_open.contains(h))
                .filter(|h| {
                    self.hostnames
                        .get(h)
                        .is_none_or(|g| !g.tunnels.contains(tunnel))
                })
                .collect();
            if !closing.is_empty() {
                self.unknown.insert(tunnel.clone(), closing);
            }
        }
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

/// The application a policy's status records for `hostname`: (AUD, team). Only the
/// applications under its targets open a hostname; `status.retiring` lists those to delete.
fn recorded<'a>(policy: &'a AccessPolicy, hostname: &str) -> Option<(&'a str, &'a str)> {
    let targets = policy.status.as_ref()?.targets.as_ref()?;
    targets
        .iter()
        // An earlier release listed a removed target's applications under it, to delete.
        .filter(|t| t.reason.as_deref() != Some("Retiring"))
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
    let served_by = tunnels_serving(table);
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
                let Some(own_tunnel) = &status.tunnel else {
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
                    let tunnels = served_by
                        .get(&hostname)
                        .cloned()
                        .unwrap_or_else(|| BTreeSet::from([own_tunnel.clone()]));
                    out.hostnames.insert(
                        hostname,
                        Guarded {
                            policy: key.clone(),
                            target: target_key.clone(),
                            source: source.clone(),
                            tunnels,
                            protection,
                        },
                    );
                }
            }
        }
    }
    out
}

/// Lowercase hostname → every tunnel with a served rule for it. A source's status names one
/// tunnel (an HTTPRoute with parents on two tunnels keeps the first), so the tunnels come
/// from the tunnels' own entries.
fn tunnels_serving(table: &RouteTable) -> BTreeMap<String, BTreeSet<TunnelIdentity>> {
    let mut out: BTreeMap<String, BTreeSet<TunnelIdentity>> = BTreeMap::new();
    for (tunnel, routes) in &table.tunnels {
        for entry in routes.entries.iter().filter(|e| e.reason.is_served()) {
            out.entry(entry.hostname.to_ascii_lowercase())
                .or_default()
                .insert(tunnel.clone());
        }
    }
    out
}

#[cfg(test)]
#[path = "guard_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "invariant_props.rs"]
mod invariant_props;
