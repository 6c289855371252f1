//! The statuses cftunnel writes on the objects that declare routes, as pure functions of the
//! route table and policy-level facts (tunnel ids, the DNS sync's notes): a TunnelBinding's
//! status and labels, an Ingress's `status.loadBalancer`, a tunnel's `status.routes`. The status
//! writer and the tunnel reconciler call them with what they learned; [`super::plan`] calls
//! them with the facts it is given.
use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::networking::v1::{IngressLoadBalancerIngress, IngressLoadBalancerStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::ResourceExt;
use serde_json::json;

use crate::render::labels::binding_labels;
use crate::routes::gateway::status::DnsNote;
use crate::routes::{RouteEntry, RouteReason, SourceStatus};
use cftunnel_types::binding::ServiceInfo;
use cftunnel_types::{RouteStatus, TunnelBinding, TunnelBindingStatus, TunnelIdentity, TunnelKind};

/// The type of the condition every source and tunnel carries.
const READY: &str = "Ready";

/// The tunnel a binding names (kind in any case; a Tunnel in the binding's namespace).
pub fn binding_tunnel(binding: &TunnelBinding) -> Option<TunnelIdentity> {
    let kind = TunnelKind::parse(&binding.spec.tunnel_ref.kind)?;
    Some(TunnelIdentity {
        kind,
        namespace: match kind {
            TunnelKind::ClusterTunnel => String::new(),
            _ => binding.namespace().unwrap_or_default(),
        },
        name: binding.spec.tunnel_ref.name.clone(),
    })
}

/// The `Ready` reason, message and status: the route model's, unless DNS has notes about a
/// served hostname (or about every hostname of the tunnel).
pub fn ready_of(source: &SourceStatus, notes: &[DnsNote]) -> (String, String, &'static str) {
    let hostnames = source.hostnames();
    let dns: Vec<&DnsNote> = notes
        .iter()
        .filter(|p| {
            p.hostname
                .as_deref()
                .is_none_or(|h| hostnames.iter().any(|mine| mine.eq_ignore_ascii_case(h)))
        })
        .collect();
    if source.ready_status() == "True" && !dns.is_empty() {
        let reason = dns[0].reason.clone();
        let message = dns
            .iter()
            .map(|p| p.message.as_str())
            .collect::<Vec<_>>()
            .join("; ");
        return (reason, message, "False");
    }
    let message = if source.message.is_empty() {
        format!("routed: {}", hostnames.join(", "))
    } else {
        source.message.clone()
    };
    (
        source.reason.as_str().to_string(),
        message,
        source.ready_status(),
    )
}

fn find_ready(conditions: Option<&Vec<Condition>>) -> Option<&Condition> {
    conditions?.iter().find(|c| c.type_ == READY)
}

/// `conditions` with `ready` first in place of any `Ready` they hold.
fn with_ready(conditions: Option<&Vec<Condition>>, ready: Condition) -> Vec<Condition> {
    let mut out: Vec<Condition> = conditions
        .map(|c| c.iter().filter(|c| c.type_ != READY).cloned().collect())
        .unwrap_or_default();
    out.insert(0, ready);
    out
}

/// The status a binding should carry; `lastTransitionTime` moves only when `status` flips.
pub fn binding_status(
    binding: &TunnelBinding,
    source: &SourceStatus,
    notes: &[DnsNote],
    now: Time,
) -> TunnelBindingStatus {
    let (reason, message, status) = ready_of(source, notes);
    let current = binding.status.as_ref();
    let previous = find_ready(current.and_then(|s| s.conditions.as_ref()));
    let last_transition_time = match previous {
        Some(p) if p.status == status => p.last_transition_time.clone(),
        _ => now,
    };
    let ready = Condition {
        type_: READY.to_string(),
        status: status.to_string(),
        reason,
        message,
        observed_generation: binding.metadata.generation,
        last_transition_time,
    };
    let served = source.routes.iter().filter(|r| r.reason.is_served());
    TunnelBindingStatus {
        hostnames: Some(source.hostnames().join(",")),
        services: Some(
            served
                .map(|r| ServiceInfo {
                    hostname: r.hostname.clone(),
                    target: r.service.clone(),
                })
                .collect(),
        ),
        observed_generation: binding.metadata.generation,
        conditions: Some(with_ready(
            current.and_then(|s| s.conditions.as_ref()),
            ready,
        )),
    }
}

/// The Go operator's binding labels (`render::labels::binding_labels`) that a stored binding
/// lacks or carries with another value, as a merge patch of `metadata.labels` (a `null` removes a
/// name label that can no longer name the tunnel); `None` when it carries them.
pub fn missing_labels(
    binding: &TunnelBinding,
) -> Option<serde_json::Map<String, serde_json::Value>> {
    let current = binding.labels();
    let mut patch = serde_json::Map::new();
    for (key, wanted) in binding_labels(&binding.spec.tunnel_ref.name) {
        if current.get(key) != wanted.as_ref() {
            patch.insert(key.to_string(), json!(wanted));
        }
    }
    (!patch.is_empty()).then_some(patch)
}

/// The public name of a Cloudflare tunnel, which every routed hostname is a CNAME to.
pub fn tunnel_hostname(tunnel_id: &str) -> String {
    format!("{tunnel_id}.cfargotunnel.com")
}

/// The `status.loadBalancer` an Ingress should carry: its tunnel's hostname while some route of
/// it is served and the tunnel has an id in `tunnel_ids` (live tunnels only); empty otherwise.
pub fn load_balancer(
    source: &SourceStatus,
    tunnel_ids: &BTreeMap<TunnelIdentity, String>,
) -> IngressLoadBalancerStatus {
    let served = source.routes.iter().any(|r| r.reason.is_served());
    let id = source
        .tunnel
        .as_ref()
        .and_then(|tunnel| tunnel_ids.get(tunnel))
        .filter(|id| !id.is_empty());
    IngressLoadBalancerStatus {
        ingress: id.filter(|_| served).map(|id| {
            vec![IngressLoadBalancerIngress {
                hostname: Some(tunnel_hostname(id)),
                ..IngressLoadBalancerIngress::default()
            }]
        }),
    }
}

/// `have` without the entries naming one of `ours` (every id, current or previous, of
/// cftunnel's tunnels): what an Ingress moved to another controller's class keeps.
pub fn without_ours(
    have: &IngressLoadBalancerStatus,
    ours: &BTreeSet<String>,
) -> IngressLoadBalancerStatus {
    let ours: BTreeSet<String> = ours.iter().map(|id| tunnel_hostname(id)).collect();
    let kept: Vec<IngressLoadBalancerIngress> = have
        .ingress
        .iter()
        .flatten()
        .filter(|i| !i.hostname.as_ref().is_some_and(|h| ours.contains(h)))
        .cloned()
        .collect();
    IngressLoadBalancerStatus {
        ingress: (!kept.is_empty()).then_some(kept),
    }
}

/// A tunnel's `status.routes[]`: every route declared against it and what became of it.
pub fn route_statuses(entries: &[std::sync::Arc<RouteEntry>]) -> Vec<RouteStatus> {
    entries
        .iter()
        .map(|e| RouteStatus {
            hostname: e.hostname.clone(),
            path: e.path.clone(),
            target: e.service.clone(),
            source: e.source.to_string(),
            state: match e.reason {
                RouteReason::Routed | RouteReason::LegacyRoute | RouteReason::UdpPort => "Active",
                RouteReason::ServiceNotFound | RouteReason::PortNotFound => "Pending",
                RouteReason::HostnameConflict => "Conflict",
                _ => "Error",
            }
            .to_string(),
            reason: (e.reason != RouteReason::Routed).then(|| {
                if e.message.is_empty() {
                    e.reason.as_str().to_string()
                } else {
                    format!("{}: {}", e.reason.as_str(), e.message)
                }
            }),
        })
        .collect()
}

#[cfg(test)]
#[path = "statuses_tests.rs"]
mod tests;
