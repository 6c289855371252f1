//! Tunnels that other clusters share with this one while routing other hostnames.
//!
//! Cloudflare sends each request to a nearby connector of the tunnel, with no steering by
//! hostname: when two clusters run connectors of one tunnel, each gets requests for every
//! hostname of that tunnel. A tunnel shared by clusters therefore works for replicas that route
//! the same hostnames; one whose zone holds records of another cluster pointing at it, for
//! hostnames this cluster does not route, has some of those requests answered here by the
//! catch-all. The DNS task finds such records (`DnsPlan::shared`); the route reconciler
//! publishes them here and re-runs the tunnels whose set changed; the tunnel reconciler, the
//! one writer of a tunnel's conditions, turns them into the `SharedTunnel` condition.
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use cftunnel_policy::dns::SharedHostname;
use cftunnel_types::TunnelIdentity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// The condition type; present (status `True`) only while the layout is broken.
pub(crate) const SHARED_TUNNEL: &str = "SharedTunnel";
/// Its one reason.
const REASON: &str = "OtherClustersHostnames";
/// Hostnames named in the message; the rest are counted.
const NAMED: usize = 10;

/// What the DNS task last found, per tunnel.
#[derive(Debug, Default)]
pub struct SharedTunnels(Mutex<BTreeMap<TunnelIdentity, BTreeSet<SharedHostname>>>);

impl SharedTunnels {
    /// Replaces what is known; returns the tunnels whose set changed.
    pub(crate) fn replace(
        &self,
        next: &BTreeMap<TunnelIdentity, BTreeSet<SharedHostname>>,
    ) -> Vec<TunnelIdentity> {
        let mut current = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let changed: BTreeSet<TunnelIdentity> = current
            .keys()
            .chain(next.keys())
            .filter(|t| current.get(*t) != next.get(*t))
            .cloned()
            .collect();
        *current = next.clone();
        changed.into_iter().collect()
    }

    /// Other clusters' hostnames on `tunnel`.
    pub(crate) fn of(&self, tunnel: &TunnelIdentity) -> BTreeSet<SharedHostname> {
        let current = self.0.lock().unwrap_or_else(|p| p.into_inner());
        current.get(tunnel).cloned().unwrap_or_default()
    }
}

/// The message of the condition and its Event: which clusters route which hostnames, and what
/// their requests get here.
pub(crate) fn shared_message(hostnames: &BTreeSet<SharedHostname>, catch_all: &str) -> String {
    let clusters: BTreeSet<&str> = hostnames.iter().map(|h| h.cluster.as_str()).collect();
    let names: BTreeSet<&str> = hostnames.iter().map(|h| h.hostname.as_str()).collect();
    let mut listed: Vec<&str> = names.iter().copied().take(NAMED).collect();
    let more = names.len().saturating_sub(NAMED);
    let and_more = match more {
        0 => String::new(),
        n => format!(" and {n} more"),
    };
    listed.sort_unstable();
    format!(
        "cluster(s) {} route {}{and_more} through this tunnel, which this cluster does not route: Cloudflare sends requests to any connector of a tunnel, so those reaching this cluster's connectors are answered by its catch-all ({catch_all}); clusters sharing a tunnel should route the same hostnames, and a cluster routing other hostnames should run a tunnel of its own in the same zone",
        clusters.into_iter().collect::<Vec<_>>().join(", "),
        listed.join(", "),
    )
}

/// `conditions` with the `SharedTunnel` entry set from `hostnames` (removed when empty);
/// `lastTransitionTime` is kept while it stays present.
pub(crate) fn with_shared(
    conditions: Vec<Condition>,
    hostnames: &BTreeSet<SharedHostname>,
    catch_all: &str,
    generation: Option<i64>,
    now: Time,
) -> Vec<Condition> {
    let previous = conditions
        .iter()
        .find(|c| c.type_ == SHARED_TUNNEL)
        .cloned();
    let mut out: Vec<Condition> = conditions
        .into_iter()
        .filter(|c| c.type_ != SHARED_TUNNEL)
        .collect();
    if !hostnames.is_empty() {
        let message = shared_message(hostnames, catch_all);
        let condition = match previous {
            Some(p) if p.message == message && p.observed_generation == generation => p,
            Some(p) => Condition {
                message,
                observed_generation: generation,
                ..p
            },
            None => Condition {
                type_: SHARED_TUNNEL.to_string(),
                status: "True".to_string(),
                reason: REASON.to_string(),
                message,
                observed_generation: generation,
                last_transition_time: now,
            },
        };
        out.push(condition);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use cftunnel_types::TunnelKind;

    fn edge() -> TunnelIdentity {
        TunnelIdentity {
            kind: TunnelKind::Tunnel,
            namespace: "shop".into(),
            name: "edge".into(),
        }
    }

    fn shared(hostname: &str, cluster: &str) -> SharedHostname {
        SharedHostname {
            tunnel: edge(),
            hostname: hostname.into(),
            cluster: cluster.into(),
        }
    }

    fn at(secs: i64) -> Time {
        Time(jiff::Timestamp::from_second(secs).unwrap_or(jiff::Timestamp::UNIX_EPOCH))
    }

    #[test]
    fn the_condition_names_the_hostnames_and_the_catch_all_and_goes_when_they_do() {
        let set = BTreeSet::from([shared("b.example.com", "us"), shared("a.example.com", "us")]);
        let conditions = with_shared(Vec::new(), &set, "http_status:404", Some(1), at(10));
        assert_eq!(conditions.len(), 1);
        let c = &conditions[0];
        assert_eq!(
            (c.type_.as_str(), c.status.as_str()),
            ("SharedTunnel", "True")
        );
        assert!(
            c.message.starts_with(
                "cluster(s) us route a.example.com, b.example.com through this tunnel"
            ),
            "{}",
            c.message
        );
        assert!(
            c.message.contains("catch-all (http_status:404)"),
            "{}",
            c.message
        );
        let again = with_shared(conditions.clone(), &set, "http_status:404", Some(1), at(20));
        assert_eq!(again[0].last_transition_time, at(10), "kept while it holds");
        assert!(with_shared(again, &BTreeSet::new(), "x", Some(1), at(30)).is_empty());
    }

    #[test]
    fn only_tunnels_whose_set_changed_are_named() {
        let registry = SharedTunnels::default();
        let one = BTreeMap::from([(edge(), BTreeSet::from([shared("a.example.com", "us")]))]);
        assert_eq!(registry.replace(&one), vec![edge()]);
        assert!(registry.replace(&one).is_empty());
        assert_eq!(registry.of(&edge()).len(), 1);
        assert_eq!(registry.replace(&BTreeMap::new()), vec![edge()]);
        assert!(registry.of(&edge()).is_empty());
    }
}
