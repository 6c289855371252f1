//! One sync of one group (a zone and an API credential): the client for the group's
//! credential, the zone lock, the sync, and its outcome in the terms statuses read.
use std::collections::BTreeMap;
use std::time::Instant;

use crate::dns_sync::credentials::Resolved;
use crate::dns_sync::groups::{GroupKey, wants_nothing};
use crate::dns_sync::known::KnownRecords;
use crate::dns_sync::problem::{
    DnsProblem, REASON_DNS_CONFLICT, REASON_DNS_ERROR, REASON_DNS_OTHER_CLUSTER,
    REASON_QUOTA_EXCEEDED,
};
use crate::dns_sync::sync_zone_from;
use crate::term::Context;
use crate::term::dns_guard::DnsGuard;
use cftunnel_cloudflare::Priority;
use cftunnel_policy::dns::{DnsOptions, SharedHostname, ZoneDns};
use cftunnel_types::TunnelIdentity;

/// What one sync of a group found.
pub(super) struct GroupOutcome {
    /// The problems per tunnel (empty: clean).
    pub problems: BTreeMap<TunnelIdentity, Vec<DnsProblem>>,
    /// Other clusters' hostnames on the group's tunnels; `None` when the zone was not read.
    pub shared: Option<Vec<SharedHostname>>,
    /// The records the sync left for the group's next (see `known.rs`).
    pub known: Option<KnownRecords>,
    /// `DnsId` patches or creates left to the group's next sync (`batched.rs`).
    pub deferred: bool,
    /// Creates left to the group's next sync: the group is not in step with its input yet.
    pub unfinished: bool,
}

/// What a group's sync reads besides the group: the term's DNS options, the resolved
/// credentials, each tunnel's recorded zone, and where its calls queue at the pacer.
pub(super) struct GroupReading<'a> {
    pub options: &'a DnsOptions,
    pub resolved: &'a Resolved,
    pub owners: &'a BTreeMap<TunnelIdentity, String>,
    pub priority: Priority,
    /// Is another round of the DNS task on its way (its input changed since this began)?
    pub more_coming: &'a (dyn Fn() -> bool + Sync),
}

/// The records the group's last sync left, if they serve this one (see `known.rs`).
pub(super) fn known_serving(
    ctx: &Context,
    known: Option<KnownRecords>,
    zone: &ZoneDns,
) -> Option<KnownRecords> {
    let created = |id: &str| ctx.cloudflare.created.contains(id);
    known.filter(|k| k.serves(zone, created, ctx.options.drift_interval, Instant::now()))
}

/// One sync of one group.
pub(super) async fn sync_once(
    ctx: &Context,
    guard: &DnsGuard,
    key: &GroupKey,
    zone: &ZoneDns,
    reading: &GroupReading<'_>,
    known: Option<KnownRecords>,
) -> GroupOutcome {
    let GroupReading {
        options,
        resolved,
        owners,
        priority,
        more_coming,
    } = *reading;
    let everyone = |message: String| -> GroupOutcome {
        let problems = zone
            .tunnels
            .iter()
            .map(|t| {
                let problem = DnsProblem {
                    hostname: None,
                    reason: REASON_DNS_ERROR,
                    message: message.clone(),
                };
                (t.identity.clone(), vec![problem])
            })
            .collect();
        GroupOutcome {
            problems,
            shared: None,
            known: None,
            deferred: false,
            unfinished: false,
        }
    };
    if zone.tunnels.is_empty() {
        return GroupOutcome {
            problems: BTreeMap::new(),
            shared: Some(Vec::new()),
            known: None,
            deferred: false,
            unfinished: false,
        };
    }
    let credentials = match resolved.for_group(&key.credential) {
        Ok(credentials) => credentials.clone(),
        Err(error) => return everyone(format!("DNS records not synced: {error}")),
    };
    // Each call is dated when it is made, so it takes its lane's newest turn: the sync holds the
    // zone's lock from its first read to its last write, and a deletion of a tunnel of the zone
    // (Urgent) waits for that lock. Dated once at its start, a sync was overtaken by every newer
    // request of its lane and the oldest in turn, and held a deletion for 50 s at 20 requests
    // per 15 s.
    let client = match ctx.cloudflare.client_at(credentials, priority) {
        Ok(client) => client,
        Err(error) => return everyone(format!("DNS records not synced: {error}")),
    };
    // Tunnels being deleted are left out once their deletion has the zone (see `DnsGuard`).
    let _zone_lock = guard.lock(&key.zone_id).await;
    // A copy only when a tunnel must be left out (the input is the whole zone's).
    let retiring = zone.tunnels.iter().any(|t| guard.is_retired(&t.tunnel_id));
    let without_retired;
    let zone = if retiring {
        without_retired = ZoneDns {
            zone_name: zone.zone_name.clone(),
            tunnels: zone
                .tunnels
                .iter()
                .filter(|t| !guard.is_retired(&t.tunnel_id))
                .cloned()
                .collect(),
            routed_elsewhere: zone.routed_elsewhere.clone(),
            since: zone.since.clone(),
            held: zone.held.clone(),
        };
        &without_retired
    } else {
        zone
    };
    // A tunnel left out (retiring) is a tunnel lost: the records known do not serve.
    let known = known_serving(ctx, known, zone);
    match sync_zone_from(&client, &key.zone_id, zone, options, known, more_coming).await {
        Ok((report, known)) => {
            report.count_writes(&ctx.metrics);
            tracing::debug!(zone = %zone.zone_name, reads = report.reads, writes = report.writes, "DNS synced");
            let shared = report
                .tunnels
                .iter()
                .flat_map(|t| t.shared.iter().cloned())
                .collect();
            let problems = report
                .tunnels
                .iter()
                .map(|t| {
                    let conflicts = t.conflicts.iter().map(|c| DnsProblem {
                        hostname: Some(c.hostname.clone()),
                        reason: if c.reason.is_other_cluster() {
                            REASON_DNS_OTHER_CLUSTER
                        } else {
                            REASON_DNS_CONFLICT
                        },
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
                    let over = t.over_quota.iter().map(|o| DnsProblem {
                        hostname: Some(o.hostname.clone()),
                        reason: REASON_QUOTA_EXCEEDED,
                        message: o.to_string(),
                    });
                    // A zone other than its own where it wants nothing (one it left, by a domain
                    // change or a route change) must end up holding none of its records.
                    let leaving = owners.get(&t.identity) != Some(&key.zone_id)
                        && wants_nothing(zone, &t.identity);
                    let left = (leaving && t.records_left > 0).then(|| DnsProblem {
                        hostname: None,
                        reason: REASON_DNS_ERROR,
                        message: format!(
                            "{} DNS record(s) of this tunnel in zone {}, where it routes no hostname now, not removed yet",
                            t.records_left, zone.zone_name
                        ),
                    });
                    (
                        t.identity.clone(),
                        conflicts
                            .chain(invalid)
                            .chain(errors)
                            .chain(over)
                            .chain(left)
                            .collect(),
                    )
                })
                .collect();
            GroupOutcome {
                problems,
                shared: Some(shared),
                deferred: (report.deferred_dns_ids > 0 || report.left_to_next > 0)
                    && known.is_some(),
                unfinished: report.left_to_next > 0,
                known,
            }
        }
        Err(error) => {
            tracing::warn!(zone = %zone.zone_name, %error, "DNS sync failed");
            everyone(format!("DNS records not synced: {error}"))
        }
    }
}
