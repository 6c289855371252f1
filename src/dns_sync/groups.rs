//! Which hostnames go to which zone and group (docs/design.md §3.3): a routed hostname is placed
//! in the zone of the tunnel's Cloudflare account that is its longest suffix ([`place`]), so one
//! tunnel may have records in several zones; `spec.cloudflare.domain` is only the tunnel's own
//! zone (its default hostnames, and where its deletion always looks).
//!
//! The account's zones come from one zone list per credential, kept in
//! [`crate::term::zones::ZoneLists`] and here per API Secret reference, so a route change
//! reads neither the Secret nor Cloudflare again. A hostname in no listed zone lists again at
//! most once a minute (a zone just added to the account), then is reported on its route with
//! the zones it could have been in. While the list is unknown (the credential may not list
//! zones), hostnames inside the tunnel's own zone still go there and others wait.
//!
//! Which other zones may still hold a tunnel's records is kept in memory ([`Elsewhere`], and
//! `TunnelZones` for deletions, which also place the hostnames of `status.routes`): records in
//! another zone of a route removed while cftunnel was down are not found by a drift sync after
//! a restart, only those in the tunnel's own zone. The zones of an earlier
//! `spec.cloudflare.domain` are kept in `status.previousZones` instead (they survive a
//! restart): each is one more group of the tunnel, like an [`Elsewhere`] zone, until a clean
//! sync there leaves nothing of it (`super::previous_zones`).
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Instant;

use crate::dns_sync::TunnelRecord;
use crate::dns_sync::credentials::{CredentialKey, CredentialRef, Resolved};
use crate::dns_sync::problem::{DnsProblem, REASON_DNS_ERROR};
use crate::term::Context;
use crate::term::ReadyReason;
use crate::term::conditions::find_ready;
use crate::term::zones::{ZONE_LIST_MAX_AGE, ZONE_LIST_MIN_REFRESH, list_account_zones};
use cftunnel_cloudflare::{Priority, Work};
use cftunnel_policy::dns::{
    AccountZone, TunnelDns, ZoneDns, no_zone_message, normalize_name, pending_zone, place,
};
use cftunnel_policy::routes::RouteTable;
use cftunnel_policy::rules::route::in_domain;
use cftunnel_types::TunnelIdentity;

pub(crate) use cftunnel_policy::dns::REASON_DNS_NO_ZONE;

/// Tunnels sharing one zone and one API credential are synced together
/// (`crate::dns_sync::credentials`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) struct GroupKey {
    pub zone_id: String,
    pub credential: CredentialKey,
}

/// The zones of each (credential, lower-case account id), as last listed.
pub(super) type Directory = BTreeMap<(CredentialRef, String), Arc<Vec<AccountZone>>>;

/// Zones other than its own where a tunnel may still have records (its hostnames were placed
/// there during this process's life): they stay in its groups, with the hostnames it has there
/// now, until a clean sync leaves nothing of it there.
pub(super) type Elsewhere = BTreeMap<TunnelIdentity, BTreeSet<AccountZone>>;

/// Every group's input, and the hostnames that could not be placed in any zone.
#[derive(Debug, Default)]
pub(super) struct Wanted {
    pub groups: BTreeMap<GroupKey, ZoneDns>,
    pub unplaced: BTreeMap<TunnelIdentity, Vec<DnsProblem>>,
    /// Hostnames written into a parent zone while their own zone is not active yet:
    /// (pending zone, hostname, zone written into).
    pub pending: BTreeMap<TunnelIdentity, BTreeSet<(String, String, String)>>,
}

impl Wanted {
    /// Marks the routed hostnames of `held` in each group: they keep their records but get no
    /// new one (an AccessPolicy protects them and their application does not exist yet).
    pub fn hold(mut self, held: &BTreeSet<String>) -> Wanted {
        for zone in self.groups.values_mut() {
            zone.held = zone
                .tunnels
                .iter()
                .flat_map(|t| &t.hostnames)
                .map(|h| normalize_name(h))
                .filter(|h| held.contains(h))
                .collect();
        }
        self
    }
}

/// The tunnel's own zone and account, from its status (`None`: it has no DNS yet).
fn own_zone(r: &TunnelRecord) -> Option<(String, AccountZone)> {
    let s = &r.status;
    let (Some(_), Some(id), Some(name)) = (
        s.tunnel_id.as_deref().filter(|v| !v.is_empty()),
        s.zone_id.as_deref().filter(|v| !v.is_empty()),
        s.zone_domain.as_deref().filter(|v| !v.is_empty()),
    ) else {
        return None;
    };
    let account = s
        .account_id
        .clone()
        .unwrap_or_default()
        .to_ascii_lowercase();
    Some((
        account,
        AccountZone::active(id.to_string(), name.to_string()),
    ))
}

/// Another object runs the tunnel this one names (`term/claims.rs`): its records go.
fn runs_another_objects_tunnel(r: &TunnelRecord) -> bool {
    find_ready(r.status.conditions.as_ref())
        .is_some_and(|c| c.reason == ReadyReason::TunnelIdConflict.as_str())
}

/// The hostnames routed to `r` that get DNS records, lower-case (none for an object that does
/// not run its tunnel).
fn dns_hostnames(table: &RouteTable, r: &TunnelRecord) -> BTreeSet<String> {
    table
        .tunnels
        .get(&r.identity)
        .filter(|_| !runs_another_objects_tunnel(r))
        .map(|t| {
            t.dns
                .iter()
                .filter(|d| !d.dns_updates_disabled)
                .map(|d| d.fqdn.to_ascii_lowercase())
                .collect()
        })
        .unwrap_or_default()
}

/// The hostnames placed in `zone` so far (a new, empty set the first time).
fn slot<'p>(
    placed: &'p mut BTreeMap<String, (String, BTreeSet<String>)>,
    zone: &AccountZone,
) -> &'p mut BTreeSet<String> {
    &mut placed
        .entry(zone.id.clone())
        .or_insert_with(|| (zone.name.clone(), BTreeSet::new()))
        .1
}

/// The input of every group, from the route table, the tunnels' status and the zone lists.
pub(super) fn wanted(
    table: &RouteTable,
    records: &[TunnelRecord],
    txt_records: bool,
    directory: &Directory,
    elsewhere: &Elsewhere,
    resolved: &Resolved,
) -> Wanted {
    let mut out = Wanted::default();
    for r in records.iter().filter(|r| !r.deleting) {
        let Some((account, own)) = own_zone(r) else {
            continue;
        };
        let reference = CredentialRef::of(r);
        let credential = resolved.key(&reference);
        // The tunnel's own zone was found by name: it counts even if the list left it out.
        let zones = directory.get(&(reference, account)).map(|listed| {
            let mut zones = listed.to_vec();
            if !zones.iter().any(|z| z.id == own.id) {
                zones.push(own.clone());
            }
            zones
        });
        let zones = zones.as_deref();
        // By zone id (a name may differ in case between the spec and the list).
        let mut placed: BTreeMap<String, (String, BTreeSet<String>)> = BTreeMap::new();
        slot(&mut placed, &own);
        for zone in elsewhere.get(&r.identity).into_iter().flatten() {
            slot(&mut placed, zone);
        }
        // Zones of an earlier `spec.cloudflare.domain` whose records are not removed yet.
        let previous = r.status.previous_zones.iter().flatten();
        for z in previous.filter(|z| !z.zone_id.is_empty()) {
            slot(
                &mut placed,
                &AccountZone::active(z.zone_id.clone(), z.zone_domain.clone()),
            );
        }
        for host in dns_hostnames(table, r) {
            let zone = match zones {
                Some(zones) => place(&host, zones).cloned(),
                None => in_domain(&host, &own.name).then(|| own.clone()),
            };
            match zone {
                Some(zone) => {
                    if let Some(pending) = zones.and_then(|zones| pending_zone(&host, zones)) {
                        out.pending.entry(r.identity.clone()).or_default().insert((
                            pending.name.clone(),
                            host.clone(),
                            zone.name.clone(),
                        ));
                    }
                    slot(&mut placed, &zone).insert(host);
                }
                None => {
                    let message = match zones {
                        Some(zones) => no_zone_message(&host, zones),
                        None => format!(
                            "{host} is outside the tunnel's domain {} and the zones of its Cloudflare account could not be listed yet (the credential needs Zone Read on them); its DNS record waits for that list",
                            own.name
                        ),
                    };
                    out.unplaced
                        .entry(r.identity.clone())
                        .or_default()
                        .push(DnsProblem {
                            hostname: Some(host),
                            reason: if zones.is_some() {
                                REASON_DNS_NO_ZONE
                            } else {
                                REASON_DNS_ERROR
                            },
                            message,
                        });
                }
            }
        }
        let ages = table.tunnels.get(&r.identity).map(|t| &t.dns_since);
        for (zone_id, (zone_name, hostnames)) in placed {
            let key = GroupKey {
                zone_id,
                credential: credential.clone(),
            };
            let s = &r.status;
            let group = out.groups.entry(key).or_insert_with(|| ZoneDns {
                zone_name,
                ..ZoneDns::default()
            });
            for host in &hostnames {
                let Some(age) = ages.and_then(|a| a.get(host)) else {
                    continue;
                };
                let oldest = group
                    .since
                    .entry(normalize_name(host))
                    .or_insert_with(|| age.clone());
                if age < oldest {
                    *oldest = age.clone();
                }
            }
            group.tunnels.push(TunnelDns {
                identity: r.identity.clone(),
                tunnel_id: s.tunnel_id.clone().unwrap_or_default(),
                previous_tunnel_ids: s.previous_tunnel_ids.clone().unwrap_or_default(),
                tunnel_name: s.tunnel_name.clone().unwrap_or_default(),
                hostnames,
                txt_records,
                sweep: false,
            });
        }
    }
    for zone in out.groups.values_mut() {
        zone.tunnels.sort_by(|a, b| a.identity.cmp(&b.identity));
    }
    hand_over_between_credentials(&mut out.groups);
    out
}

/// Tells each group which hostnames this cluster routes through the same zone's other groups
/// (other credentials), so a hostname moving between them is taken over, never deleted first.
fn hand_over_between_credentials(groups: &mut BTreeMap<GroupKey, ZoneDns>) {
    let mut by_zone: BTreeMap<&str, Vec<&GroupKey>> = BTreeMap::new();
    for key in groups.keys() {
        by_zone.entry(key.zone_id.as_str()).or_default().push(key);
    }
    // Most zones are written with one credential: their hostnames are not gathered at all.
    let mut handed: Vec<(GroupKey, BTreeSet<String>)> = Vec::new();
    for siblings in by_zone.values().filter(|s| s.len() > 1) {
        let hostnames: Vec<BTreeSet<String>> = siblings
            .iter()
            .map(|key| {
                groups[*key]
                    .tunnels
                    .iter()
                    .flat_map(|t| t.hostnames.iter().map(|h| normalize_name(h)))
                    .collect()
            })
            .collect();
        for (i, key) in siblings.iter().enumerate() {
            let elsewhere = hostnames
                .iter()
                .enumerate()
                .filter(|(j, _)| *j != i)
                .flat_map(|(_, set)| set.iter().cloned())
                .collect();
            handed.push(((*key).clone(), elsewhere));
        }
    }
    for (key, elsewhere) in handed {
        if let Some(zone) = groups.get_mut(&key) {
            zone.routed_elsewhere = elsewhere;
        }
    }
}

/// A zone list of the directory, with when it was read.
pub(super) type Listed = BTreeMap<(CredentialRef, String), (Arc<Vec<AccountZone>>, Instant)>;

/// Brings the zone lists up to date for every (credential, account) that routes a hostname:
/// kept while younger than an hour and holding every hostname; otherwise the process-wide list
/// is asked with the credential the round resolved (it lists on Cloudflare only if its own copy
/// is stale). A credential whose list cannot be had is left out (its hostnames fall back, see above).
pub(super) async fn refresh(
    ctx: &Context,
    table: &RouteTable,
    records: &[TunnelRecord],
    resolved: &Resolved,
    listed: &mut Listed,
) {
    let mut needed: BTreeMap<(CredentialRef, String), BTreeSet<String>> = BTreeMap::new();
    for r in records.iter().filter(|r| !r.deleting) {
        let Some((account, _)) = own_zone(r) else {
            continue;
        };
        if account.is_empty() {
            continue;
        }
        let hostnames = dns_hostnames(table, r);
        if hostnames.is_empty() {
            continue;
        }
        needed
            .entry((CredentialRef::of(r), account))
            .or_default()
            .extend(hostnames);
    }
    listed.retain(|key, _| needed.contains_key(key));
    for (key, hostnames) in needed {
        let missed = |zones: &[AccountZone]| hostnames.iter().any(|h| place(h, zones).is_none());
        if let Some((zones, at)) = listed.get(&key) {
            let age = at.elapsed();
            if age < ZONE_LIST_MAX_AGE && (age < ZONE_LIST_MIN_REFRESH || !missed(zones)) {
                continue;
            }
        }
        let Some(credentials) = resolved.of(&key.0) else {
            continue;
        };
        // The DNS sync waits for this list: it goes in the sync's lane (docs/design.md §3.8),
        // not behind every new tunnel of a burst.
        let Ok(client) = ctx
            .cloudflare
            .client_at(credentials.clone(), Priority::Interactive)
        else {
            continue;
        };
        let client = client.for_work(Work::starting());
        let account = key.1.clone();
        let previous = listed.get(&key).map(|(z, _)| z.clone());
        let missed_now = previous.as_deref().is_some_and(|z| missed(z));
        let result = ctx
            .cloudflare
            .zone_lists
            .get(credentials, &account, missed_now, || {
                list_account_zones(&client, &account)
            })
            .await;
        match result {
            Ok(zones) => {
                listed.insert(key, (zones, Instant::now()));
            }
            Err(error) => {
                tracing::warn!(%error, account = %account, "listing the zones of the account failed");
            }
        }
    }
}

/// The directory [`wanted`] reads, from what [`refresh`] kept.
pub(super) fn directory(listed: &Listed) -> Directory {
    listed
        .iter()
        .map(|(k, (zones, _))| (k.clone(), zones.clone()))
        .collect()
}

/// Is `tunnel` in `zone`'s group with no hostname there (its records there are removed)?
pub(super) fn wants_nothing(zone: &ZoneDns, tunnel: &TunnelIdentity) -> bool {
    zone.tunnels
        .iter()
        .any(|t| &t.identity == tunnel && t.hostnames.is_empty())
}
