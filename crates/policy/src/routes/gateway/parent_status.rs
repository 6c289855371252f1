//! One `status.parents[]` entry of an HTTPRoute or GRPCRoute, judged from that parent alone:
//! its Gateway's tunnel, its listeners and the hostnames it serves there. A working parent is
//! `Accepted` while another of the same route has no tunnel, and a hostname lost on one tunnel
//! marks only the parents that serve that hostname there.
//!
//! RouteParentStatus.conditions: "the status of the route with respect to the Gateway"; a Route
//! "MUST be considered Accepted if at least one of the Route's rules is implemented by the
//! Gateway".
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use super::attach::ParentOutcome;
use super::conditions::{DNS_CONDITION, DnsNote, conditions};
use super::rules::RouteAnalysis;
use crate::routes::table::{RouteEntry, RouteReason, RouteTable};
use crate::routes::world::SourceRef;
use cftunnel_types::gateway::RouteParentStatus;
use cftunnel_types::names::CONTROLLER_NAME;

/// One parent of a route with what the route model made of it.
pub(super) struct Judged<'a, 'w> {
    pub parent: &'a ParentOutcome<'w>,
    pub analysis: &'a RouteAnalysis<'w>,
    /// The route model's entries for this parent: those of the route on the parent's tunnel,
    /// for the hostnames the parent serves (see [`served_entries`]).
    pub served: Vec<&'a RouteEntry>,
    /// The DNS sync's problems on the parent's tunnel.
    pub dns: &'a [DnsNote],
}

/// The entries of `source` in `table` that the parent serves: on its own tunnel, for its own
/// hostnames. Entries of another parent's refused source on that tunnel (`TunnelNotFound`,
/// `NamespaceNotAllowed`) are that parent's business, not this one's.
pub(super) fn served_entries<'a>(
    parent: &ParentOutcome<'_>,
    table: &'a RouteTable,
    source: &SourceRef,
) -> Vec<&'a RouteEntry> {
    let Some((tunnel, hosts)) = parent.served() else {
        return Vec::new();
    };
    table
        .tunnels
        .get(tunnel)
        .map(|t| t.entries.as_slice())
        .unwrap_or_default()
        .iter()
        .filter(|e| *e.source == *source)
        .filter(|e| {
            !matches!(
                e.reason,
                RouteReason::TunnelNotFound | RouteReason::NamespaceNotAllowed
            )
        })
        .filter(|e| {
            hosts
                .iter()
                .any(|(_, h)| h.eq_ignore_ascii_case(&e.hostname))
        })
        .map(|e| &**e)
        .collect()
}

/// The entry of cftunnel's for one parent: `Accepted` (with the spec's reasons: the parent's
/// Gateway, listeners and hostnames), `ResolvedRefs` (the route's backends) and, while an
/// older object owns some of the hostnames this parent serves, `PartiallyInvalid`.
pub(super) fn parent_status(
    judged: &Judged<'_, '_>,
    previous: &[RouteParentStatus],
    metadata: &ObjectMeta,
    now: &Time,
) -> RouteParentStatus {
    let Judged {
        parent,
        analysis,
        served,
        dns,
    } = judged;
    let previous = previous
        .iter()
        .find(|p| p.parent_ref == *parent.reference && p.controller_name == CONTROLLER_NAME)
        .map(|p| p.conditions.as_slice())
        .unwrap_or_default();
    let mut c = conditions(previous, metadata, now);
    let lost: Vec<&str> = served
        .iter()
        .filter(|e| e.reason == RouteReason::HostnameConflict)
        .map(|e| e.message.as_str())
        .collect();
    let refused: Vec<&str> = served
        .iter()
        .filter(|e| e.reason == RouteReason::InvalidRoute)
        .map(|e| e.message.as_str())
        .collect();
    let gateway = &parent.gateway.metadata;
    let gateway = format!(
        "Gateway {}/{}",
        gateway.namespace.as_deref().unwrap_or(""),
        gateway.name.as_deref().unwrap_or("")
    );
    let tunnel_problem = match &parent.tunnel {
        Err(problem) => Some(problem),
        Ok(_) => parent.tunnel_problem.as_ref(),
    };
    let mut partially = None;
    match (tunnel_problem, &parent.hostnames) {
        _ if !analysis.unsupported.is_empty() => c.set(
            "Accepted",
            false,
            "UnsupportedValue",
            analysis.unsupported.join("; "),
        ),
        // The Gateway itself is not accepted: no listener of it matches anything.
        (Some(problem), _) => c.set(
            "Accepted",
            false,
            "NoMatchingParent",
            format!("{gateway} cannot serve routes: {problem}"),
        ),
        (None, Err((reason, message))) => c.set("Accepted", false, reason, message.clone()),
        _ if !refused.is_empty() => c.set("Accepted", false, "UnsupportedValue", dedup(&refused)),
        _ if !lost.is_empty() && lost.len() == served.len() => {
            c.set("Accepted", false, "HostnameConflict", dedup(&lost))
        }
        _ => {
            c.set("Accepted", true, "Accepted", "");
            if !lost.is_empty() {
                partially = Some(dedup(&lost));
            }
        }
    }
    match analysis.unresolved.first() {
        Some((reason, _)) => {
            let messages: Vec<&str> = analysis
                .unresolved
                .iter()
                .map(|(_, m)| m.as_str())
                .collect();
            c.set("ResolvedRefs", false, reason, messages.join("; "))
        }
        None => c.set("ResolvedRefs", true, "ResolvedRefs", ""),
    }
    if let Some(message) = partially {
        c.set("PartiallyInvalid", true, "HostnameConflict", message);
    }
    let problems: Vec<&DnsNote> = dns
        .iter()
        .filter(|note| {
            served.iter().any(|e| {
                e.reason.is_served()
                    && note
                        .hostname
                        .as_deref()
                        .is_none_or(|h| h.eq_ignore_ascii_case(&e.hostname))
            })
        })
        .collect();
    if let Some(first) = problems.first() {
        let messages: Vec<&str> = problems.iter().map(|n| n.message.as_str()).collect();
        c.set(DNS_CONDITION, false, &first.reason, dedup(&messages));
    }
    RouteParentStatus {
        parent_ref: parent.reference.clone(),
        controller_name: CONTROLLER_NAME.to_string(),
        conditions: c.out,
    }
}

/// `messages` joined by `; `, each once, in order.
fn dedup(messages: &[&str]) -> String {
    let mut out: Vec<&str> = Vec::new();
    for m in messages {
        if !out.contains(m) {
            out.push(m);
        }
    }
    out.join("; ")
}
