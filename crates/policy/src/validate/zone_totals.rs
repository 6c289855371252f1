//! Every hostname of the input that gets DNS records, per tunnel domain, against what a Free
//! zone holds. `cftunnel validate` sees every object at once, so it adds up what no single
//! object shows. The account's zones are not known offline: a hostname counts toward the
//! longest tunnel domain of the input it ends in (a tunnel's domain is a zone of its account;
//! a child zone of it would take part of them). The warning goes on the first tunnel of that
//! domain in the input.
use std::collections::BTreeMap;

use super::decode::Decoded;
use super::world::WorldBuilder;
use crate::dns::normalize_name;
use crate::routes::compute_routes;
use crate::rules::zone_quota::beyond_a_free_zone;
use cftunnel_types::TunnelIdentity;

/// The warning of each tunnel whose domain the input's hostnames would overfill as a Free zone.
pub(crate) fn domain_warnings<'a>(
    objects: impl IntoIterator<Item = &'a Decoded>,
) -> BTreeMap<TunnelIdentity, String> {
    let mut builder = WorldBuilder::default();
    for object in objects {
        builder.add(object);
    }
    let world = builder.finish();
    if world.tunnels.is_empty() {
        return BTreeMap::new();
    }
    let table = compute_routes(&world);
    let hostnames: std::collections::BTreeSet<String> = table
        .tunnels
        .values()
        .flat_map(|t| t.dns.iter())
        .filter(|d| !d.dns_updates_disabled)
        .map(|d| normalize_name(&d.fqdn))
        .collect();
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for host in &hostnames {
        let domain = world
            .tunnels
            .iter()
            .map(|t| normalize_name(&t.domain))
            .filter(|d| !d.is_empty() && (host == d || host.ends_with(&format!(".{d}"))))
            .max_by_key(String::len);
        if let Some(domain) = domain {
            *counts.entry(domain).or_default() += 1;
        }
    }
    let mut out = BTreeMap::new();
    for (domain, count) in counts {
        let Some(advice) = beyond_a_free_zone(count) else {
            continue;
        };
        let first = world
            .tunnels
            .iter()
            .find(|t| normalize_name(&t.domain) == domain);
        if let Some(tunnel) = first {
            out.insert(
                tunnel.identity.clone(),
                format!(
                    "spec.cloudflare.domain: {count} hostnames of the input get DNS records in \
                     {domain} (or zones under it): {advice}"
                ),
            );
        }
    }
    out
}
