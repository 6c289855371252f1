//! The plan (docs/design.md §3.9): everything cftunnel does for one world, as one pure function
//! composing the rules of the other modules — the route model ([`compute_routes`]), the Access
//! guard ([`guard`]), the renderer's ingress rules, the DNS planner, what Access wants, the
//! Gateway API statuses ([`gateway_statuses`]) and the statuses of [`statuses`]. Time is an
//! input (`now`), so equal inputs give equal plans; `tests/data/plan/` holds golden plans.
mod access;
mod dns;
mod input;
mod output;
pub mod statuses;
mod tunnels;

use std::collections::{BTreeMap, BTreeSet};

pub use input::{PlanInput, PlanTunnel};
pub use output::{
    AccessPlan, ApplicationPlan, BindingPlan, IngressRulePlan, Plan, ProtectionPlan, RecordPlan,
    RefusalPlan, SourcePlan, Statuses, TunnelPlan, ZonePlan,
};

use crate::access::guard;
use crate::routes::gateway::status::{DnsNote, StatusInput, gateway_statuses};
use crate::routes::{RouteTable, SourceKind, compute_routes};
use cftunnel_types::TunnelIdentity;

/// What cftunnel renders, wants at Cloudflare and writes as statuses for `input`.
pub fn plan(input: &PlanInput) -> Plan {
    let table = compute_routes(&input.world);
    let guard = guard(&input.access_policies, &table);
    let mut out = Plan::default();
    for tunnel in &input.tunnels {
        out.tunnels.insert(
            tunnel.identity.to_string(),
            tunnels::tunnel_plan(tunnel, &table, &guard),
        );
    }
    let wanted = dns::dns_wanted(input, &table, &guard.held());
    out.dns = wanted.zones;
    let mut notes = wanted.notes;
    for (tunnel, found) in &input.dns_notes {
        notes
            .entry(tunnel.clone())
            .or_default()
            .extend(found.iter().cloned());
    }
    out.access = access::access_plan(&input.access_policies, &guard, &input.cluster_id);
    out.statuses = source_statuses(input, &table, &notes);
    out
}

/// The live tunnels' ids.
fn tunnel_ids(input: &PlanInput) -> BTreeMap<TunnelIdentity, String> {
    input
        .tunnels
        .iter()
        .filter_map(|t| {
            let id = t.tunnel_id.clone().filter(|id| !id.is_empty())?;
            Some((t.identity.clone(), id))
        })
        .collect()
}

/// The DNS notes of `tunnel`.
fn notes_of<'n>(
    notes: &'n BTreeMap<TunnelIdentity, Vec<DnsNote>>,
    tunnel: Option<&TunnelIdentity>,
) -> &'n [DnsNote] {
    tunnel
        .and_then(|t| notes.get(t))
        .map(Vec::as_slice)
        .unwrap_or_default()
}

fn source_statuses(
    input: &PlanInput,
    table: &RouteTable,
    notes: &BTreeMap<TunnelIdentity, Vec<DnsNote>>,
) -> Statuses {
    let ids = tunnel_ids(input);
    let mut out = Statuses::default();
    for (source, status) in &table.sources {
        let found = notes_of(notes, status.tunnel.as_ref());
        let (reason, message, ready) = statuses::ready_of(status, found);
        out.sources.insert(
            source.to_string(),
            SourcePlan {
                tunnel: status.tunnel.as_ref().map(ToString::to_string),
                ready: ready.to_string(),
                reason,
                message,
            },
        );
        let key = format!("{}/{}", source.namespace, source.name);
        if source.kind == SourceKind::Ingress {
            out.ingresses
                .insert(key, statuses::load_balancer(status, &ids));
        }
    }
    for binding in &input.world.bindings {
        let source = crate::routes::SourceRef::of(SourceKind::TunnelBinding, &binding.metadata);
        let Some(status) = table.sources.get(&source) else {
            continue;
        };
        let found = notes_of(notes, status.tunnel.as_ref());
        out.bindings.insert(
            format!("{}/{}", source.namespace, source.name),
            BindingPlan {
                status: statuses::binding_status(binding, status, found, input.now.clone()),
                labels: statuses::missing_labels(binding),
            },
        );
    }
    let gateway = gateway_statuses(
        &input.world,
        table,
        &StatusInput {
            tunnel_ids: &ids,
            dns: notes,
            now: input.now.clone(),
            changed_routes_only: false,
        },
    );
    out.gateway_classes = gateway.classes;
    out.gateways = gateway
        .gateways
        .into_iter()
        .map(|((ns, name), s)| (format!("{ns}/{name}"), s))
        .collect();
    out.route_parents = gateway
        .routes
        .into_iter()
        .map(|((kind, ns, name), s)| (format!("{} {ns}/{name}", kind.as_str()), s))
        .collect();
    let known: BTreeSet<&TunnelIdentity> = input.tunnels.iter().map(|t| &t.identity).collect();
    for (tunnel, routes) in &table.tunnels {
        if known.contains(tunnel) {
            out.tunnel_routes.insert(
                tunnel.to_string(),
                statuses::route_statuses(&routes.entries),
            );
        }
    }
    out
}
