//! One route added to a converged tunnel at rest (after the restart settled): the time from its
//! create until its CNAME exists, and for a remotely-managed tunnel until its rule is in the
//! tunnel's configuration too. The latency a user sees for a new application on a quiet
//! operator.
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use cftunnel_sim::{Operation, Simulator};
use cftunnel_types::TunnelBinding;
use cftunnel_types::gateway::HTTPRoute;
use kube::Client;
use serde_json::json;

use super::{Operator, POLL, Plan, ZONE, calls_by_operation, create_object, object};

/// How long the route may take before the benchmark gives up on it.
const GIVE_UP: Duration = Duration::from_secs(300);

/// After the route is at Cloudflare, its calls are counted once none came for this long (its
/// TXT's `DnsId` patch follows its records).
const ROUTE_QUIET: Duration = Duration::from_secs(5);

/// The longest wait for that quiet: a drift check may keep calls coming.
const COUNT_LIMIT: Duration = Duration::from_secs(60);

pub struct SingleRoute {
    pub hostname: String,
    /// From the create until its CNAME existed.
    pub dns: Duration,
    /// From the create until its rule was in the pushed configuration (remote tunnels).
    pub pushed: Option<Duration>,
    /// The Cloudflare calls from the create until they stopped (see [`ROUTE_QUIET`]).
    pub calls: BTreeMap<Operation, u64>,
    /// The operator's resident memory (KiB) at rest: before the route (the restart settled and
    /// the webhook's requests at rest answered), and once the route's calls stopped. What the
    /// operator keeps between syncs (the records each DNS group's last sync left for its next,
    /// docs/design.md §3.12) is in both.
    pub resident_kib: (u64, u64),
}

/// Adds one route to the plan's last tunnel and waits for it at Cloudflare.
pub async fn measure(
    client: &Client,
    sim: &Simulator,
    plan: &Plan,
    operator: &Operator,
) -> anyhow::Result<SingleRoute> {
    let (ns, tunnel) = plan
        .tunnels()
        .pop()
        .ok_or_else(|| anyhow::anyhow!("no tunnel to add a route to"))?;
    let service = plan
        .services(&tunnel)
        .into_iter()
        .next()
        .map(|(name, _)| name)
        .ok_or_else(|| anyhow::anyhow!("tunnel {tunnel} has no Service"))?;
    let hostname = format!("{ns}-single.{ZONE}");
    let route = match plan.gateway_api {
        true => object::<HTTPRoute>(
            json!({"name": "single", "namespace": ns}),
            json!({"spec": {"parentRefs": [{"name": tunnel}], "hostnames": [hostname],
                "rules": [{"backendRefs": [{"name": service, "port": 80}]}]}}),
        ),
        false => object::<TunnelBinding>(
            json!({"name": "single", "namespace": ns}),
            json!({"subjects": [{"name": service, "spec": {"fqdn": hostname}}],
                "tunnelRef": {"kind": "Tunnel", "name": tunnel}}),
        ),
    };
    let remote = plan.config_source == "Cloudflare";
    let cloudflare_name = format!("{ns}-{tunnel}");
    let resident_before = operator.rss_kib();
    let before = calls_by_operation(sim);
    let started = Instant::now();
    create_object(client, route).await?;
    let (mut dns, mut pushed) = (None, None);
    while started.elapsed() < GIVE_UP {
        if dns.is_none()
            && sim
                .dns_records(ZONE)
                .iter()
                .any(|r| r.record_type == "CNAME" && r.name == hostname)
        {
            dns = Some(started.elapsed());
        }
        if remote && pushed.is_none() && is_pushed(sim, &cloudflare_name, &hostname) {
            pushed = Some(started.elapsed());
        }
        if dns.is_some() && (!remote || pushed.is_some()) {
            break;
        }
        tokio::time::sleep(POLL).await;
    }
    let dns = dns.ok_or_else(|| anyhow::anyhow!("{hostname} got no CNAME in {GIVE_UP:?}"))?;
    if remote && pushed.is_none() {
        anyhow::bail!("{hostname} was not pushed in {GIVE_UP:?}");
    }
    let calls = calls_since(sim, &before).await;
    Ok(SingleRoute {
        hostname,
        dns,
        pushed,
        calls,
        resident_kib: (resident_before, operator.rss_kib()),
    })
}

/// The calls made since `before`, once none came for [`ROUTE_QUIET`] (or after
/// [`COUNT_LIMIT`]).
async fn calls_since(
    sim: &Simulator,
    before: &BTreeMap<Operation, u64>,
) -> BTreeMap<Operation, u64> {
    let started = Instant::now();
    let (mut last, mut last_change) = (sim.total_calls(), Instant::now());
    while last_change.elapsed() < ROUTE_QUIET && started.elapsed() < COUNT_LIMIT {
        tokio::time::sleep(POLL).await;
        let now = sim.total_calls();
        if now != last {
            (last, last_change) = (now, Instant::now());
        }
    }
    calls_by_operation(sim)
        .into_iter()
        .map(|(op, n)| (op, n.saturating_sub(before.get(&op).copied().unwrap_or(0))))
        .filter(|(_, n)| *n > 0)
        .collect()
}

/// Is `hostname` in the configuration of the live tunnel named `name`?
fn is_pushed(sim: &Simulator, name: &str, hostname: &str) -> bool {
    sim.tunnels()
        .into_iter()
        .filter(|t| t.name == name && t.deleted_at.is_none())
        .filter_map(|t| t.config)
        .any(|config| {
            config["ingress"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|rule| rule["hostname"].as_str() == Some(hostname))
        })
}
