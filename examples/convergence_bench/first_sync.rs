//! The first sync, watched once a second: samples, milestones and the probes.
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use cftunnel_sim::Simulator;
use cftunnel_types::Tunnel;
use kube::api::{DeleteParams, ListParams};
use kube::{Api, Client};
use tokio::task::JoinHandle;

use super::samples::Sample;
use super::{CONVERGE_LIMIT, Operator, POLL, Plan, ZONE, create_object};

/// The namespace and name of the tunnel the probes add.
const LATE: (&str, &str) = ("bench-0", "late");

pub struct FirstSyncOptions {
    /// Wait for every route in a pushed configuration too (`configSource: Cloudflare`).
    pub remote: bool,
    pub probes: bool,
}

/// When the first sync reached each milestone, from the first create.
pub struct FirstSync {
    pub created: Duration,
    pub ready: Duration,
    pub dns: Duration,
    pub routed: Duration,
    pub pushed: Option<Duration>,
    pub samples: Vec<Sample>,
    /// Requests Cloudflare answered (429s left out) by the time every tunnel was Ready and every
    /// DNS record existed.
    pub calls_to_converge: u64,
    /// Tunnels and hostnames expected at the end (after the probes).
    pub tunnels: usize,
    pub hostnames: usize,
    pub probes: Option<Probes>,
}

pub struct Probes {
    /// When they were made, from the first create.
    pub at: Duration,
    /// `namespace/name` of the deleted tunnel.
    pub gone: String,
    /// From the probes until `late` was Ready and each of its hostnames had its record.
    pub late_ready: Duration,
    /// From the probes until `gone` was deleted at Cloudflare.
    pub gone_deleted: Duration,
}

struct Pending {
    started: Instant,
    at: Duration,
    gone: String,
    gone_cloudflare_name: String,
    late_hostnames: Vec<String>,
    late_tunnel_ready: Option<Duration>,
    late_records: Option<Duration>,
    late_ready: Option<Duration>,
    gone_deleted: Option<Duration>,
}

struct TunnelState {
    namespace: String,
    name: String,
    ready: bool,
    deleting: bool,
    routes: usize,
}

#[derive(Default)]
struct Milestones {
    created: Option<Duration>,
    ready: Option<Duration>,
    dns: Option<Duration>,
    routed: Option<Duration>,
    pushed: Option<Duration>,
    calls: Option<u64>,
}

pub async fn first_sync(
    sim: &Simulator,
    client: &Client,
    plan: &Plan,
    operator: &mut Operator,
    creating: JoinHandle<anyhow::Result<Duration>>,
    started: Instant,
    options: FirstSyncOptions,
) -> anyhow::Result<FirstSync> {
    let tunnels = plan.tunnel_count();
    let mut creating = Some(creating);
    let mut expected_hostnames = plan.hostnames.clone();
    let mut expected_routes = plan.hostnames.len();
    let mut at = Milestones::default();
    let mut pending: Option<Pending> = None;
    let mut samples = Vec::new();
    let mut ticker = tokio::time::interval(POLL);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        ticker.tick().await;
        operator.check()?;
        if creating.as_ref().is_some_and(JoinHandle::is_finished)
            && let Some(handle) = creating.take()
        {
            at.created = Some(handle.await??);
        }
        let states = tunnel_states(client).await?;
        let now = started.elapsed();
        let live = || states.iter().filter(|t| !t.deleting);
        let ready = live().filter(|t| t.ready).count();
        let routes: usize = live().map(|t| t.routes).sum();
        let (cnames, txts) = dns_names(sim);
        let dns = expected_hostnames
            .iter()
            .filter(|h| cnames.contains(h.as_str()))
            .count();
        samples.push(Sample {
            at: now.as_secs_f64(),
            ready,
            dns,
            rss_kib: operator.rss_kib(),
        });

        if options.probes && pending.is_none() && ready * 2 >= tunnels {
            let gone = live()
                .find(|t| t.ready)
                .context("no Ready tunnel to delete")?;
            // The late tunnel comes with its routes, as a user's new application would.
            create_object(client, plan.tunnel(LATE.0, LATE.1)).await?;
            for object in plan.routes_of(LATE.0, LATE.1) {
                create_object(client, object).await?;
            }
            let late_hostnames = plan.hostnames_of(LATE.0, LATE.1);
            expected_hostnames.extend(late_hostnames.iter().cloned());
            expected_routes += late_hostnames.len();
            Api::<Tunnel>::namespaced(client.clone(), &gone.namespace)
                .delete(&gone.name, &DeleteParams::default())
                .await?;
            for hostname in plan.hostnames_of(&gone.namespace, &gone.name) {
                expected_hostnames.remove(&hostname);
            }
            expected_routes = expected_routes.saturating_sub(plan.routes_per_tunnel);
            let name = format!("{}/{}", gone.namespace, gone.name);
            println!(
                "  probes after {:.1}s ({ready} Ready): created {}/{}, deleted {name}",
                now.as_secs_f64(),
                LATE.0,
                LATE.1
            );
            pending = Some(Pending {
                started: Instant::now(),
                at: now,
                gone_cloudflare_name: format!("{}-{}", gone.namespace, gone.name),
                gone: name,
                late_hostnames,
                late_tunnel_ready: None,
                late_records: None,
                late_ready: None,
                gone_deleted: None,
            });
            continue;
        }
        if let Some(p) = pending.as_mut() {
            let tunnel_ready = states
                .iter()
                .any(|t| t.namespace == LATE.0 && t.name == LATE.1 && t.ready);
            if p.late_tunnel_ready.is_none() && tunnel_ready {
                p.late_tunnel_ready = Some(p.started.elapsed());
                println!(
                    "  late tunnel Ready {:.1}s after the probes",
                    p.started.elapsed().as_secs_f64()
                );
            }
            let records = p.late_hostnames.iter().all(|h| cnames.contains(h.as_str()));
            if p.late_records.is_none() && records {
                p.late_records = Some(p.started.elapsed());
                println!(
                    "  late tunnel's records all published {:.1}s after the probes",
                    p.started.elapsed().as_secs_f64()
                );
            }
            if p.late_ready.is_none() && tunnel_ready && records {
                p.late_ready = Some(p.started.elapsed());
            }
            if p.gone_deleted.is_none()
                && sim
                    .tunnels()
                    .iter()
                    .any(|t| t.name == p.gone_cloudflare_name && t.deleted_at.is_some())
            {
                p.gone_deleted = Some(p.started.elapsed());
            }
        }

        let dns_complete = expected_hostnames
            .iter()
            .all(|h| cnames.contains(h.as_str()) && txts.contains(h.as_str()));
        if at.ready.is_none() && ready == tunnels {
            at.ready = Some(now);
        }
        if at.dns.is_none() && dns_complete {
            at.dns = Some(now);
        }
        if at.routed.is_none() && routes == expected_routes {
            at.routed = Some(now);
        }
        if options.remote && at.pushed.is_none() && expected_hostnames.is_subset(&pushed(sim)) {
            at.pushed = Some(now);
        }
        if at.calls.is_none() && at.ready.is_some() && at.dns.is_some() {
            at.calls = Some(sim.total_calls().saturating_sub(sim.budget_refusals()));
        }
        let probes_done = pending
            .as_ref()
            .is_some_and(|p| p.late_ready.is_some() && p.gone_deleted.is_some());
        if let (Some(created), Some(ready), Some(dns), Some(routed), Some(calls)) =
            (at.created, at.ready, at.dns, at.routed, at.calls)
            && (!options.remote || at.pushed.is_some())
            && (!options.probes || probes_done)
        {
            let probes = pending.map(|p| Probes {
                at: p.at,
                gone: p.gone,
                late_ready: p.late_ready.unwrap_or_default(),
                gone_deleted: p.gone_deleted.unwrap_or_default(),
            });
            return Ok(FirstSync {
                created,
                ready,
                dns,
                routed,
                pushed: at.pushed,
                samples,
                calls_to_converge: calls,
                tunnels,
                hostnames: expected_hostnames.len(),
                probes,
            });
        }
        if now > CONVERGE_LIMIT {
            bail!(
                "gave up after {:.0}s: {ready}/{tunnels} Ready, {dns}/{} hostnames with DNS, \
                 {routes}/{expected_routes} routes in status",
                now.as_secs_f64(),
                expected_hostnames.len()
            );
        }
    }
}

async fn tunnel_states(client: &Client) -> anyhow::Result<Vec<TunnelState>> {
    let tunnels = Api::<Tunnel>::all(client.clone())
        .list(&ListParams::default())
        .await?;
    Ok(tunnels
        .items
        .into_iter()
        .map(|t| {
            let status = t.status.as_ref();
            TunnelState {
                ready: status
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True")),
                routes: status.and_then(|s| s.routes.as_ref()).map_or(0, Vec::len),
                deleting: t.metadata.deletion_timestamp.is_some(),
                namespace: t.metadata.namespace.unwrap_or_default(),
                name: t.metadata.name.unwrap_or_default(),
            }
        })
        .collect())
}

/// Hostnames with a CNAME, and hostnames with their `_managed` TXT.
fn dns_names(sim: &Simulator) -> (BTreeSet<String>, BTreeSet<String>) {
    let mut cnames = BTreeSet::new();
    let mut txts = BTreeSet::new();
    for record in sim.dns_records(ZONE) {
        match record.record_type.as_str() {
            "CNAME" => {
                cnames.insert(record.name);
            }
            "TXT" => {
                if let Some(hostname) = record.name.strip_prefix("_managed.") {
                    txts.insert(hostname.to_string());
                }
            }
            _ => {}
        }
    }
    (cnames, txts)
}

/// The hostnames of every rule of every live tunnel's configuration at Cloudflare.
fn pushed(sim: &Simulator) -> BTreeSet<String> {
    sim.tunnels()
        .into_iter()
        .filter(|t| t.deleted_at.is_none())
        .filter_map(|t| t.config)
        .flat_map(|config| {
            config["ingress"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|r| r["hostname"].as_str().map(str::to_string))
                .collect::<Vec<_>>()
        })
        .collect()
}
