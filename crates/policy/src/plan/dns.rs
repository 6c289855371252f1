//! The DNS records wanted per zone, and the DNS notes the plan itself finds: each routed
//! hostname is placed in the account's zone that is its longest suffix ([`place`]); one in no
//! zone is noted `DNSZoneNotFound` on its tunnel; each zone is planned by the DNS planner
//! ([`plan_zone`]) as if it held no record, so its creates are the records wanted.
use std::collections::{BTreeMap, BTreeSet};

use super::input::PlanInput;
use super::output::{RecordPlan, ZonePlan};
use crate::dns::{
    AccountZone, DnsAction, DnsOptions, REASON_DNS_ERROR, REASON_DNS_NO_ZONE, TunnelDns, ZoneDns,
    no_zone_message, normalize_name, place, plan_zone,
};
use crate::routes::RouteTable;
use crate::routes::gateway::status::DnsNote;
use cftunnel_types::TunnelIdentity;

/// The zones and the notes found placing and planning them.
pub(super) struct DnsWanted {
    pub zones: BTreeMap<String, ZonePlan>,
    pub notes: BTreeMap<TunnelIdentity, Vec<DnsNote>>,
}

/// The records `table` wants, with `held` hostnames (lower-case) getting none.
pub(super) fn dns_wanted(
    input: &PlanInput,
    table: &RouteTable,
    held: &BTreeSet<String>,
) -> DnsWanted {
    let mut notes: BTreeMap<TunnelIdentity, Vec<DnsNote>> = BTreeMap::new();
    // By zone id: (zone, its tunnels' wishes).
    let mut zones: BTreeMap<String, ZoneDns> = BTreeMap::new();
    let mut tunnels: Vec<_> = input.tunnels.iter().collect();
    tunnels.sort_by(|a, b| a.identity.cmp(&b.identity));
    for tunnel in tunnels {
        let Some(tunnel_id) = tunnel.tunnel_id.as_deref().filter(|id| !id.is_empty()) else {
            continue;
        };
        let Some(routes) = table.tunnels.get(&tunnel.identity) else {
            continue;
        };
        let domain = normalize_name(&tunnel.spec.cloudflare.domain);
        let mut account = input.zones.clone();
        if !account.iter().any(|z| normalize_name(&z.name) == domain) {
            account.push(AccountZone::active(domain.clone(), domain.clone()));
        }
        let mut placed: BTreeMap<String, (String, BTreeSet<String>)> = BTreeMap::new();
        for name in routes.dns.iter().filter(|d| !d.dns_updates_disabled) {
            let host = name.fqdn.to_ascii_lowercase();
            match place(&host, &account) {
                Some(zone) => {
                    placed
                        .entry(zone.id.clone())
                        .or_insert_with(|| (zone.name.clone(), BTreeSet::new()))
                        .1
                        .insert(host);
                }
                None => notes
                    .entry(tunnel.identity.clone())
                    .or_default()
                    .push(DnsNote {
                        message: no_zone_message(&host, &account),
                        hostname: Some(host),
                        reason: REASON_DNS_NO_ZONE.to_string(),
                    }),
            }
        }
        for (zone_id, (zone_name, hostnames)) in placed {
            let zone = zones.entry(zone_id).or_insert_with(|| ZoneDns {
                zone_name,
                ..ZoneDns::default()
            });
            for host in &hostnames {
                if let Some(age) = routes.dns_since.get(host) {
                    let oldest = zone
                        .since
                        .entry(host.clone())
                        .or_insert_with(|| age.clone());
                    if age < oldest {
                        *oldest = age.clone();
                    }
                }
                if held.contains(host) {
                    zone.held.insert(host.clone());
                }
            }
            zone.tunnels.push(TunnelDns {
                identity: tunnel.identity.clone(),
                tunnel_id: tunnel_id.to_string(),
                previous_tunnel_ids: tunnel.previous_tunnel_ids.clone(),
                tunnel_name: tunnel.tunnel_name.clone(),
                hostnames,
                txt_records: input.txt_records,
                sweep: false,
            });
        }
    }
    let options = DnsOptions {
        cluster_id: Some(input.cluster_id.clone()),
        ..DnsOptions::default()
    };
    let mut out = BTreeMap::new();
    for (zone_id, zone) in zones {
        let planned = plan_zone(&zone, &[], &options);
        let records = planned
            .changes
            .iter()
            .filter_map(|change| match &change.action {
                DnsAction::Create(desired) => {
                    let body = desired.body_in_batch();
                    Some(RecordPlan {
                        tunnel: change.tunnel.to_string(),
                        record_type: desired.record_type().as_str().to_string(),
                        name: desired.name().to_string(),
                        content: desired.to_ref().content,
                        comment: body.comment.unwrap_or_default(),
                    })
                }
                _ => None,
            })
            .collect();
        for invalid in planned.invalid {
            notes
                .entry(invalid.tunnel.clone())
                .or_default()
                .push(DnsNote {
                    hostname: Some(invalid.hostname.clone()),
                    reason: REASON_DNS_ERROR.to_string(),
                    message: invalid.to_string(),
                });
        }
        let plan = ZonePlan {
            zone_id,
            records,
            held: zone.held.iter().cloned().collect(),
        };
        out.insert(zone.zone_name.clone(), plan);
    }
    DnsWanted { zones: out, notes }
}
