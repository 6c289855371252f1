//! One account's private routes brought to what its NetworkRoutes ask: list them (every IP
//! route and hostname route of the account, the largest pages, and the default network),
//! plan, then carry out the deletes, updates and creates through the credential's pacer. What
//! each NetworkRoute's entries became is the outcome its status is written from.
use std::collections::BTreeMap;

use cftunnel_cloudflare::{
    CloudflareClient, CloudflareError, HostnameRouteFilter, HostnameRouteUpdate, IpRouteFilter,
    IpRouteUpdate, NewHostnameRoute, NewIpRoute, VirtualNetworkFilter,
};
use cftunnel_policy::dns::ClusterId;
use cftunnel_policy::private::{
    Change, DesiredRoutes, Entry, IpKey, Listed, ListedHostnameRoute, ListedIpRoute, OwnerDigest,
    hostname_key, plan_private,
};

/// What became of one entry of a NetworkRoute.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct EntryOutcome {
    pub id: Option<String>,
    /// `Programmed`, `Pending`, `Conflict` or `Error`.
    pub state: &'static str,
    pub message: Option<String>,
}

/// The outcome of one account's sync: each entry by owner and route text, and what failed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct AccountOutcome {
    pub entries: BTreeMap<OwnerDigest, BTreeMap<Entry, EntryOutcome>>,
    /// The call that failed, if one did (its entries are `Error`).
    pub failure: Option<String>,
    /// Owners none of whose routes is left at Cloudflare (their deletion may finish).
    pub cleared: Vec<OwnerDigest>,
    /// The warning when the account would pass its route limit.
    pub over_limit: Option<String>,
    /// The account could not be reached at all: its API Secret could not be read.
    pub unreachable: bool,
}

/// Lists the account's private routes and its default network.
pub(crate) async fn list(cf: &CloudflareClient, account: &str) -> Result<Listed, CloudflareError> {
    let ip = cf
        .list_ip_routes(account, &IpRouteFilter::default())
        .await?;
    let hostnames = cf
        .list_hostname_routes(account, &HostnameRouteFilter::default())
        .await?;
    let default = cf
        .list_virtual_networks(
            account,
            &VirtualNetworkFilter {
                is_default: Some(true),
                ..VirtualNetworkFilter::default()
            },
        )
        .await?;
    Ok(Listed {
        ip_routes: ip
            .into_iter()
            .filter(|r| !r.is_deleted())
            .map(|r| ListedIpRoute {
                id: r.id,
                network: r.network,
                tunnel_id: r.tunnel_id,
                virtual_network_id: r.virtual_network_id,
                comment: r.comment,
            })
            .collect(),
        hostname_routes: hostnames
            .into_iter()
            .filter(|r| !r.is_deleted())
            .map(|r| ListedHostnameRoute {
                id: r.id,
                hostname: r.hostname,
                tunnel_id: r.tunnel_id,
                comment: r.comment,
            })
            .collect(),
        default_network_id: default.into_iter().next().map(|n| n.id),
    })
}

/// Plans and carries out one account's changes; `listed` is what Cloudflare holds now.
pub(crate) async fn sync(
    cf: &CloudflareClient,
    account: &str,
    cluster: &ClusterId,
    desired: &DesiredRoutes,
    listed: &Listed,
) -> AccountOutcome {
    let plan = plan_private(cluster, desired, listed);
    let mut out = AccountOutcome {
        over_limit: plan.over_limit(),
        ..AccountOutcome::default()
    };
    // Ids of the routes at each key once the plan is carried out.
    let mut ip_ids: BTreeMap<IpKey, String> = listed
        .ip_routes
        .iter()
        .filter_map(|r| Some((listed.ip_key(r)?, r.id.clone())))
        .collect();
    let mut host_ids: BTreeMap<String, String> = listed
        .hostname_routes
        .iter()
        .map(|r| (hostname_key(r), r.id.clone()))
        .collect();
    let mut failed: BTreeMap<String, String> = BTreeMap::new();
    for change in &plan.ip {
        let (route, result) = match change {
            Change::Delete { id, route } => {
                let result = cf.delete_ip_route(account, id).await;
                if result.is_ok() {
                    ip_ids.retain(|_, v| v != id);
                }
                (route.clone(), result.map(|_| ()))
            }
            Change::Update {
                id,
                key,
                tunnel_id,
                comment,
            } => {
                let update = IpRouteUpdate {
                    tunnel_id: tunnel_id.clone(),
                    comment: comment.clone(),
                    ..IpRouteUpdate::default()
                };
                let result = cf.update_ip_route(account, id, &update).await;
                (key.cidr.to_string(), result.map(|_| ()))
            }
            Change::Create {
                key,
                tunnel_id,
                comment,
            } => {
                let mut new = NewIpRoute::new(key.cidr.to_string(), tunnel_id.clone())
                    .with_comment(comment.clone());
                if let Some(network) = key.virtual_network_id.as_ref() {
                    new = new.in_virtual_network(network.clone());
                }
                let result = cf.create_ip_route(account, &new).await;
                let done = result.map(|r| {
                    ip_ids.insert(key.clone(), r.id);
                });
                (key.cidr.to_string(), done)
            }
        };
        if let Err(error) = result {
            tracing::warn!(account, %route, %error, "a private route was not changed");
            out.failure.get_or_insert_with(|| error.to_string());
            failed.insert(route, error.to_string());
        }
    }
    for change in &plan.hostnames {
        let (route, result) = match change {
            Change::Delete { id, route } => {
                let result = cf.delete_hostname_route(account, id).await;
                if result.is_ok() {
                    host_ids.retain(|_, v| v != id);
                }
                (route.clone(), result.map(|_| ()))
            }
            Change::Update {
                id,
                key,
                tunnel_id,
                comment,
            } => {
                let update = HostnameRouteUpdate {
                    tunnel_id: tunnel_id.clone(),
                    comment: comment.clone(),
                    ..HostnameRouteUpdate::default()
                };
                let result = cf.update_hostname_route(account, id, &update).await;
                (key.clone(), result.map(|_| ()))
            }
            Change::Create {
                key,
                tunnel_id,
                comment,
            } => {
                let new = NewHostnameRoute::new(key.clone(), tunnel_id.clone())
                    .with_comment(comment.clone());
                let result = cf.create_hostname_route(account, &new).await;
                let done = result.map(|r| {
                    host_ids.insert(key.clone(), r.id);
                });
                (key.clone(), done)
            }
        };
        if let Err(error) = result {
            tracing::warn!(account, %route, %error, "a private hostname route was not changed");
            out.failure.get_or_insert_with(|| error.to_string());
            failed.insert(route, error.to_string());
        }
    }
    // Each desired route: programmed with its id, pending while held, or the error.
    let routes = desired
        .ip
        .iter()
        .map(|(key, r)| (key.cidr.to_string(), ip_ids.get(key), r))
        .chain(
            desired
                .hostnames
                .iter()
                .map(|(key, r)| (key.clone(), host_ids.get(key), r)),
        );
    for (text, id, route) in routes {
        let outcome = match (failed.get(&text), route.tunnel_id.as_ref(), id) {
            (Some(error), _, _) => EntryOutcome {
                id: id.cloned(),
                state: "Error",
                message: Some(error.clone()),
            },
            (None, None, _) => EntryOutcome {
                id: None,
                state: "Pending",
                message: Some("waiting for the tunnel's id (or the VirtualNetwork's)".into()),
            },
            (None, Some(_), Some(id)) => EntryOutcome {
                id: Some(id.clone()),
                state: "Programmed",
                message: None,
            },
            (None, Some(_), None) => EntryOutcome {
                id: None,
                state: "Pending",
                message: None,
            },
        };
        out.entries
            .entry(route.owner.digest())
            .or_default()
            .insert(route.entry.clone(), outcome);
    }
    for conflict in desired.conflicts.iter().chain(&plan.conflicts) {
        out.entries
            .entry(conflict.owner.digest())
            .or_default()
            .insert(
                conflict.entry.clone(),
                EntryOutcome {
                    id: None,
                    state: "Conflict",
                    message: Some(conflict.to_string()),
                },
            );
    }
    for refusal in &desired.refusals {
        out.entries
            .entry(refusal.owner.digest())
            .or_default()
            .insert(
                refusal.entry.clone(),
                EntryOutcome {
                    id: None,
                    state: "Error",
                    message: Some(refusal.reason.clone()),
                },
            );
    }
    // Owners that want nothing and of whose routes none is left.
    let left = |digest: &OwnerDigest| {
        let ours = |comment: &str| {
            cftunnel_policy::private::ownership(comment, cluster)
                == cftunnel_policy::private::Ownership::Ours(digest.clone())
        };
        let ip_left = listed
            .ip_routes
            .iter()
            .filter(|r| ours(&r.comment))
            .any(|r| ip_ids.values().any(|id| id == &r.id));
        let host_left = listed
            .hostname_routes
            .iter()
            .filter(|r| ours(&r.comment))
            .any(|r| host_ids.values().any(|id| id == &r.id));
        ip_left || host_left
    };
    out.cleared = desired
        .owners
        .iter()
        .filter(|d| !out.entries.contains_key(*d) && !left(d))
        .cloned()
        .collect();
    out
}
