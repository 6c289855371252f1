//! When and with what the DNS records are synced (docs/design.md §3.3): one sync per group of tunnels
//! sharing a zone and an API Secret, run when the group's routed hostnames, tunnel ids or
//! previous ids change, retried with backoff while it has problems, and repeated on the slow
//! drift interval. A group whose input did not change makes no Cloudflare call.
//!
//! Choice: after a restart, a group is synced once if it routes any hostname (its paged
//! candidate reads cost O(pages), never one call per hostname); a group with no hostname at all
//! waits for the drift interval, so restarting cftunnel with route-less tunnels costs nothing.
//! Records left by a labelled Service deleted while cftunnel was down are removed then.
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::cache::TunnelRecord;
use crate::admission::TunnelIdentity;
use crate::controller::credentials::read_api_secret;
use crate::controller::{Context, ReadyReason};
use crate::dns::{DnsOptions, TunnelDns, ZoneDns, sync_zone};
use crate::routes::RouteTable;

/// One problem of a tunnel's DNS: the hostname it concerns (`None`: all of them) and what to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DnsProblem {
    pub hostname: Option<String>,
    /// The condition reason: `DNSConflict` (a record that is not ours is in the way) or
    /// `DNSError` (Cloudflare refused or failed, or the hostname cannot have a record).
    pub reason: &'static str,
    pub message: String,
}

pub const REASON_DNS_CONFLICT: &str = "DNSConflict";
pub const REASON_DNS_ERROR: &str = "DNSError";

/// Tunnels sharing one zone and one set of API credentials are synced together: the same
/// Secret read through the same keys (two tunnels may name one Secret but read a token from
/// different keys, or a global key with different emails).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct GroupKey {
    zone_id: String,
    secret_namespace: String,
    secret: String,
    api_token_key: String,
    api_key_key: String,
    email: Option<String>,
}

struct GroupState {
    input: ZoneDns,
    clean: bool,
    failures: u32,
    /// Next retry (after problems) or drift sync.
    due: Option<Instant>,
}

/// A snapshot of the syncs for status writers: problems per tunnel, and which groups synced
/// cleanly with which input.
#[derive(Clone, Debug, Default)]
pub struct DnsView {
    txt_records: bool,
    groups: HashMap<GroupKey, (ZoneDns, bool)>,
    problems: Problems,
}

/// Problems of the last sync of each group, per tunnel: a tunnel whose domain changed is in
/// two groups (its zone, and the previous zone its records are removed from).
type Problems = BTreeMap<TunnelIdentity, BTreeMap<GroupKey, Vec<DnsProblem>>>;

impl DnsView {
    /// Every problem of `tunnel`'s DNS, in every zone it has records in.
    pub fn problems(&self, tunnel: &TunnelIdentity) -> Vec<DnsProblem> {
        self.problems
            .get(tunnel)
            .into_iter()
            .flat_map(|groups| groups.values().flatten().cloned())
            .collect()
    }

    /// Is `tunnel`'s DNS in step with `table` (its group synced cleanly with the current input,
    /// or it has no DNS at all)?
    pub fn settled(
        &self,
        tunnel: &TunnelIdentity,
        table: &RouteTable,
        records: &[TunnelRecord],
    ) -> bool {
        let Some((key, zone)) = self.group_of(tunnel, table, records) else {
            return true;
        };
        self.groups
            .get(&key)
            .is_some_and(|(input, clean)| *clean && *input == zone)
    }

    /// The group `tunnel` belongs to now, with its current input (`None`: it has no DNS).
    fn group_of(
        &self,
        tunnel: &TunnelIdentity,
        table: &RouteTable,
        records: &[TunnelRecord],
    ) -> Option<(GroupKey, ZoneDns)> {
        let zone_id = current_zone(records, tunnel)?;
        wanted(table, records, self.txt_records)
            .into_iter()
            .find(|(k, z)| k.zone_id == zone_id && z.tunnels.iter().any(|t| &t.identity == tunnel))
    }

    /// May a deleting source that routed `hostnames` let go? Its tunnel's group has synced the
    /// current input (which no longer wants them) and no problem of that sync concerns one of
    /// them: a conflict on another hostname of the zone does not hold it.
    pub fn released(
        &self,
        tunnel: &TunnelIdentity,
        hostnames: &[String],
        table: &RouteTable,
        records: &[TunnelRecord],
    ) -> bool {
        let Some((key, zone)) = self.group_of(tunnel, table, records) else {
            return true;
        };
        let synced = self
            .groups
            .get(&key)
            .is_some_and(|(input, _)| *input == zone);
        let blocked = self.problems(tunnel).iter().any(|p| {
            p.hostname
                .as_deref()
                .is_none_or(|h| hostnames.iter().any(|mine| mine.eq_ignore_ascii_case(h)))
        });
        synced && !blocked
    }
}

/// Memory of the syncs, owned by the DNS task of the route reconciler.
pub struct DnsSync {
    options: DnsOptions,
    txt_records: bool,
    drift: Option<Duration>,
    retry_base: Duration,
    retry_max: Duration,
    groups: HashMap<GroupKey, GroupState>,
    /// Problems of the last sync, per tunnel and group.
    problems: Problems,
}

impl DnsSync {
    pub fn new(ctx: &Context) -> DnsSync {
        let o = &ctx.options;
        DnsSync {
            options: DnsOptions {
                overwrite_unmanaged: o.overwrite_unmanaged_dns,
                batch: o.dns_batch,
                ..DnsOptions::default()
            },
            txt_records: o.dns_txt_records,
            drift: (!o.drift_interval.is_zero()).then_some(o.drift_interval),
            retry_base: o.retry_base,
            retry_max: o.retry_max,
            groups: HashMap::new(),
            problems: BTreeMap::new(),
        }
    }

    /// When the next retry or drift sync is due.
    pub fn next_due(&self) -> Option<Instant> {
        self.groups.values().filter_map(|g| g.due).min()
    }

    /// What statuses read of the syncs so far.
    pub fn view(&self) -> DnsView {
        DnsView {
            txt_records: self.txt_records,
            groups: self
                .groups
                .iter()
                .map(|(k, g)| (k.clone(), (g.input.clone(), g.clean)))
                .collect(),
            problems: self.problems.clone(),
        }
    }

    /// Syncs every group whose input changed or whose retry or drift time has come.
    /// `force`: tunnels whose group must be synced now even after a restart (a binding of
    /// theirs is being deleted).
    pub async fn run(
        &mut self,
        ctx: &Context,
        table: &RouteTable,
        records: &[TunnelRecord],
        force: &BTreeSet<TunnelIdentity>,
        publish: &watch::Sender<Arc<DnsView>>,
    ) {
        let wanted = wanted(table, records, self.txt_records);
        self.groups.retain(|key, _| wanted.contains_key(key));
        let live: BTreeSet<&TunnelIdentity> = wanted
            .values()
            .flat_map(|z| z.tunnels.iter().map(|t| &t.identity))
            .collect();
        self.problems.retain(|id, _| live.contains(id));
        for (id, groups) in self.problems.iter_mut() {
            groups.retain(|key, _| wanted.get(key).is_some_and(|z| in_zone(z, id)));
        }
        let now = Instant::now();
        for (key, zone) in wanted.clone() {
            let due = match self.groups.get(&key) {
                // First sight (a start): only groups with something to write or remove.
                None => zone.tunnels.iter().any(|t| {
                    !t.hostnames.is_empty()
                        || force.contains(&t.identity)
                        || current_zone(records, &t.identity) != Some(key.zone_id.as_str())
                }),
                Some(state) => state.input != zone || state.due.is_some_and(|d| d <= now),
            };
            if due {
                self.sync_group(ctx, key, zone, records).await;
                publish.send_replace(Arc::new(self.view()));
            }
        }
        self.release_previous_zones(ctx, &wanted, records).await;
    }

    /// Drops from `status.previousZones` every zone whose group synced cleanly with the
    /// tunnel in it wanting nothing: that zone holds no record of it any more.
    async fn release_previous_zones(
        &self,
        ctx: &Context,
        wanted: &BTreeMap<GroupKey, ZoneDns>,
        records: &[TunnelRecord],
    ) {
        for record in records.iter().filter(|r| !r.deleting) {
            let Some(previous) = record.status.previous_zones.as_ref() else {
                continue;
            };
            let cleared: Vec<&str> = previous
                .iter()
                .filter(|z| {
                    wanted.iter().any(|(key, zone)| {
                        key.zone_id == z.zone_id
                            && in_zone(zone, &record.identity)
                            && self
                                .groups
                                .get(key)
                                .is_some_and(|g| g.clean && g.input == *zone)
                    })
                })
                .map(|z| z.zone_id.as_str())
                .collect();
            if cleared.is_empty() {
                continue;
            }
            if let Err(error) = super::previous_zones::release(ctx, record, &cleared).await {
                tracing::warn!(tunnel = %record.identity, %error, "previous zone not released from status yet");
            }
        }
    }
}

/// Another object runs the tunnel this one names (`controller/claims.rs`): its records go.
fn runs_another_objects_tunnel(record: &TunnelRecord) -> bool {
    crate::controller::conditions::find_ready(record.status.conditions.as_ref())
        .is_some_and(|c| c.reason == ReadyReason::TunnelIdConflict.as_str())
}

fn in_zone(zone: &ZoneDns, tunnel: &TunnelIdentity) -> bool {
    zone.tunnels.iter().any(|t| &t.identity == tunnel)
}

/// The zone id `tunnel`'s status names as its own (not a previous one).
fn current_zone<'a>(records: &'a [TunnelRecord], tunnel: &TunnelIdentity) -> Option<&'a str> {
    records
        .iter()
        .find(|r| &r.identity == tunnel)
        .and_then(|r| r.status.zone_id.as_deref())
}

/// The input of every group, from the route table and the tunnels' status. A tunnel is in the
/// group of its zone with its routed hostnames, and in the group of each zone of
/// `status.previousZones` with none, so that its records there are removed.
fn wanted(
    table: &RouteTable,
    records: &[TunnelRecord],
    txt_records: bool,
) -> BTreeMap<GroupKey, ZoneDns> {
    let mut groups: BTreeMap<GroupKey, ZoneDns> = BTreeMap::new();
    for r in records.iter().filter(|r| !r.deleting) {
        let s = &r.status;
        let (Some(tunnel_id), Some(zone_id), Some(zone_name)) = (
            s.tunnel_id.as_deref().filter(|v| !v.is_empty()),
            s.zone_id.as_deref().filter(|v| !v.is_empty()),
            s.zone_domain.as_deref().filter(|v| !v.is_empty()),
        ) else {
            continue;
        };
        // An object that stopped running its tunnel (another runs it) wants no record.
        let serving = !runs_another_objects_tunnel(r);
        let hostnames: BTreeSet<String> = table
            .tunnels
            .get(&r.identity)
            .filter(|_| serving)
            .map(|t| {
                t.dns
                    .iter()
                    .filter(|d| !d.dns_updates_disabled)
                    .map(|d| d.fqdn.clone())
                    .collect()
            })
            .unwrap_or_default();
        let key = |zone_id: &str| GroupKey {
            zone_id: zone_id.to_string(),
            secret_namespace: r.secret_namespace.clone(),
            secret: r.cloudflare.secret.clone(),
            api_token_key: r.cloudflare.api_token_key.clone(),
            api_key_key: r.cloudflare.api_key_key.clone(),
            email: r.cloudflare.email.clone().filter(|e| !e.is_empty()),
        };
        let tunnel = |hostnames: BTreeSet<String>| TunnelDns {
            identity: r.identity.clone(),
            tunnel_id: tunnel_id.to_string(),
            previous_tunnel_ids: s.previous_tunnel_ids.clone().unwrap_or_default(),
            tunnel_name: s.tunnel_name.clone().unwrap_or_default(),
            hostnames,
            txt_records,
        };
        let previous = s.previous_zones.iter().flatten();
        let leaving = previous.filter(|z| !z.zone_id.is_empty() && z.zone_id != zone_id);
        let zones = std::iter::once((zone_id, zone_name, hostnames))
            .chain(leaving.map(|z| (z.zone_id.as_str(), z.zone_domain.as_str(), BTreeSet::new())));
        for (zone_id, zone_name, hostnames) in zones {
            groups
                .entry(key(zone_id))
                .or_insert_with(|| ZoneDns {
                    zone_name: zone_name.to_string(),
                    tunnels: Vec::new(),
                })
                .tunnels
                .push(tunnel(hostnames));
        }
    }
    for zone in groups.values_mut() {
        zone.tunnels.sort_by(|a, b| a.identity.cmp(&b.identity));
    }
    groups
}

impl DnsSync {
    async fn sync_group(
        &mut self,
        ctx: &Context,
        key: GroupKey,
        zone: ZoneDns,
        records: &[TunnelRecord],
    ) {
        let outcome = sync_once(ctx, &key, &zone, &self.options, records).await;
        let clean = outcome.values().all(Vec::is_empty);
        for t in &zone.tunnels {
            let problems = outcome.get(&t.identity).cloned().unwrap_or_default();
            self.problems
                .entry(t.identity.clone())
                .or_default()
                .insert(key.clone(), problems);
        }
        let failures = match self.groups.get(&key) {
            Some(state) if !clean => state.failures.saturating_add(1),
            None if !clean => 1,
            _ => 0,
        };
        let due = if clean {
            self.drift
                .map(|_| Instant::now() + ctx.jittered_drift_interval())
        } else {
            let factor = 2u32.saturating_pow(failures.saturating_sub(1).min(16));
            Some(Instant::now() + self.retry_base.saturating_mul(factor).min(self.retry_max))
        };
        self.groups.insert(
            key,
            GroupState {
                input: zone,
                clean,
                failures,
                due,
            },
        );
    }
}

/// One sync of one group; the problems per tunnel (empty: clean).
async fn sync_once(
    ctx: &Context,
    key: &GroupKey,
    zone: &ZoneDns,
    options: &DnsOptions,
    records: &[TunnelRecord],
) -> BTreeMap<TunnelIdentity, Vec<DnsProblem>> {
    let everyone = |message: String| -> BTreeMap<TunnelIdentity, Vec<DnsProblem>> {
        zone.tunnels
            .iter()
            .map(|t| {
                let problem = DnsProblem {
                    hostname: None,
                    reason: REASON_DNS_ERROR,
                    message: message.clone(),
                };
                (t.identity.clone(), vec![problem])
            })
            .collect()
    };
    let Some(details) = records
        .iter()
        .find(|r| {
            zone.tunnels
                .first()
                .is_some_and(|t| t.identity == r.identity)
        })
        .map(|r| r.cloudflare.clone())
    else {
        return BTreeMap::new();
    };
    let secret = match read_api_secret(&ctx.client, &key.secret_namespace, &details).await {
        Ok(secret) => secret,
        Err(error) => return everyone(format!("DNS records not synced: {error}")),
    };
    let client = match ctx.cloudflare(secret.credentials) {
        Ok(client) => client,
        Err(error) => return everyone(format!("DNS records not synced: {error}")),
    };
    // Tunnels being deleted are left out once their deletion has the zone (see `DnsGuard`).
    let _zone_lock = ctx.dns_guard.lock(&key.zone_id).await;
    let zone = &ZoneDns {
        zone_name: zone.zone_name.clone(),
        tunnels: zone
            .tunnels
            .iter()
            .filter(|t| !ctx.dns_guard.is_retired(&t.tunnel_id))
            .cloned()
            .collect(),
    };
    match sync_zone(&client, &key.zone_id, zone, options).await {
        Ok(report) => {
            tracing::debug!(zone = %zone.zone_name, reads = report.reads, writes = report.writes, "DNS synced");
            report
                .tunnels
                .iter()
                .map(|t| {
                    let conflicts = t.conflicts.iter().map(|c| DnsProblem {
                        hostname: Some(c.hostname.clone()),
                        reason: REASON_DNS_CONFLICT,
                        message: c.to_string(),
                    });
                    let invalid = t.invalid.iter().map(|i| DnsProblem {
                        hostname: Some(i.hostname.clone()),
                        reason: REASON_DNS_ERROR,
                        message: i.to_string(),
                    });
                    let errors = t.errors.iter().map(|e| DnsProblem {
                        hostname: Some(e.hostname.clone()),
                        reason: REASON_DNS_ERROR,
                        message: e.to_string(),
                    });
                    // A zone this tunnel left must end up holding none of its records.
                    let leaving = current_zone(records, &t.identity) != Some(key.zone_id.as_str());
                    let left = (leaving && t.records_left > 0).then(|| DnsProblem {
                        hostname: None,
                        reason: REASON_DNS_ERROR,
                        message: format!(
                            "{} DNS record(s) of this tunnel in zone {} (a previous spec.cloudflare.domain) not removed yet",
                            t.records_left, zone.zone_name
                        ),
                    });
                    (
                        t.identity.clone(),
                        conflicts.chain(invalid).chain(errors).chain(left).collect(),
                    )
                })
                .collect()
        }
        Err(error) => {
            tracing::warn!(zone = %zone.zone_name, %error, "DNS sync failed");
            everyone(format!("DNS records not synced: {error}"))
        }
    }
}

#[cfg(test)]
#[path = "dns_tests.rs"]
mod tests;
