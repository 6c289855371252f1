//! The edge certificate preflight: each routed hostname of a tunnel's zone is checked against
//! the zone's certificate packs (`cftunnel_policy::edge_certificates`), read through the
//! budget at background priority once per zone per drift interval, and again when a hostname
//! appears that the last read does not cover (a pack ordered for it may be there by now).
//! A failed read (the token lacks "SSL and Certificates Read": 403) means "cannot check", never
//! "not covered": no finding until the next read. Hostnames the DNS sync placed in other zones
//! of the account are not checked.
use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use tokio::time::Instant;

use cftunnel_cloudflare::CloudflareClient;
use cftunnel_policy::edge_certificates::{Pack, finding};

/// What the last read of each zone's packs said.
#[derive(Default)]
pub(super) struct Packs {
    zones: HashMap<String, Read>,
}

struct Read {
    at: Instant,
    /// `None`: the read failed; nothing is known until the next one.
    packs: Option<Vec<Pack>>,
    /// Hostnames found uncovered since this read: seeing them again reads nothing.
    uncovered: BTreeSet<String>,
}

/// A hostname no active pack covers, and what to do about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub hostname: String,
    pub message: String,
}

impl Packs {
    /// The findings of `hostnames` in zone `zone_name` (`zone_id`); `max_age`: the oldest read
    /// that still answers.
    pub(super) async fn check(
        &mut self,
        cf: &CloudflareClient,
        zone_id: &str,
        zone_name: &str,
        hostnames: &[String],
        max_age: Duration,
    ) -> Vec<Finding> {
        let stale = self.zones.get(zone_id).is_none_or(|read| {
            read.at.elapsed() > max_age
                || read.packs.as_ref().is_some_and(|packs| {
                    hostnames.iter().any(|h| {
                        !read.uncovered.contains(h) && finding(packs, h, zone_name).is_some()
                    })
                })
        });
        if stale {
            let packs = match cf.list_certificate_packs(zone_id).await {
                Ok(packs) => Some(
                    packs
                        .into_iter()
                        .map(|p| Pack {
                            hosts: p.hosts,
                            status: p.status,
                        })
                        .collect(),
                ),
                Err(error) => {
                    tracing::debug!(zone = %zone_name, %error, "edge certificates not read; not checked");
                    None
                }
            };
            let read = Read {
                at: Instant::now(),
                packs,
                uncovered: BTreeSet::new(),
            };
            self.zones.insert(zone_id.to_string(), read);
        }
        let Some(read) = self.zones.get_mut(zone_id) else {
            return Vec::new();
        };
        let Some(packs) = &read.packs else {
            return Vec::new();
        };
        let found: Vec<Finding> = hostnames
            .iter()
            .filter_map(|h| {
                let message = finding(packs, h, zone_name)?;
                Some(Finding {
                    hostname: h.clone(),
                    message,
                })
            })
            .collect();
        read.uncovered
            .extend(found.iter().map(|f| f.hostname.clone()));
        found
    }

    /// Forgets the zones no tunnel routes into any more.
    pub(super) fn keep_only(&mut self, zones: &BTreeSet<String>) {
        self.zones.retain(|id, _| zones.contains(id));
    }
}

/// The hostnames of `routes` served in `zone` (the zone itself or below it).
pub(super) fn in_zone(routes: &[cftunnel_types::RouteStatus], zone: &str) -> Vec<String> {
    let zone = zone.trim_end_matches('.').to_ascii_lowercase();
    let suffix = format!(".{zone}");
    let mut hostnames: Vec<String> = routes
        .iter()
        .filter(|r| r.state == "Active")
        .map(|r| r.hostname.to_ascii_lowercase())
        .filter(|h| *h == zone || h.ends_with(&suffix))
        .collect();
    hostnames.sort();
    hostnames.dedup();
    hostnames
}

#[cfg(test)]
mod tests {
    use super::*;
    use cftunnel_types::RouteStatus;

    #[test]
    fn served_hostnames_of_the_zone_are_checked_once_each() {
        let route = |hostname: &str, state: &str| RouteStatus {
            hostname: hostname.into(),
            state: state.into(),
            ..RouteStatus::default()
        };
        let routes = [
            route("a.b.example.com", "Active"),
            route("A.B.example.com", "Active"),
            route("c.example.com", "Active"),
            route("x.example.com", "Conflict"),
            route("y.other.org", "Active"),
            route("notexample.com", "Active"),
        ];
        assert_eq!(
            in_zone(&routes, "example.com"),
            ["a.b.example.com", "c.example.com"]
        );
    }
}
