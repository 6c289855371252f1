//! The changes that bring an account's private routes to the desired ones.
//!
//! - create: a desired route nobody holds;
//! - update (PATCH by id): a route with this installation's marker at a desired key whose
//!   tunnel or comment differ;
//! - delete: a route with this installation's marker, for an owner it knows, that is no longer
//!   desired;
//! - conflict: a desired key held by a route without this installation's marker (made by hand,
//!   or by another cftunnel installation): left alone and reported.
//!
//! A route without this installation's marker is never changed or deleted. One with its marker
//! for an owner it does not know is left alone too (listed in `unknown_owners`), and so are the
//! routes of a held owner. Routes of all kinds share one limit per account, counted after the
//! plan.
use std::collections::{BTreeMap, BTreeSet};

use super::conflict::{Conflict, HeldBy};
use super::desired::{DesiredRoute, DesiredRoutes, IpKey};
use super::listed::{Listed, hostname_key};
use super::marker::{OwnerDigest, Ownership, ownership};
use crate::dns::ClusterId;

/// The most private routes (IP and hostname routes together) an account holds.
pub const ACCOUNT_ROUTE_LIMIT: usize = 1000;

/// One change to one route; `K` is an [`IpKey`] or a normalised hostname.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change<K> {
    /// Create the route at `key` (an IP route without a virtual network goes to the default).
    Create {
        key: K,
        tunnel_id: String,
        comment: String,
    },
    /// PATCH the route `id` at `key`: only the fields that differ are set.
    Update {
        id: String,
        key: K,
        tunnel_id: Option<String>,
        comment: Option<String>,
    },
    /// Delete the route `id`, listed as `route` (its network or hostname).
    Delete { id: String, route: String },
}

/// What to do to one account's private routes: deletes first, then updates, then creates.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PrivatePlan {
    pub ip: Vec<Change<IpKey>>,
    pub hostnames: Vec<Change<String>>,
    /// Desired routes held at Cloudflare by a route that is not this installation's.
    pub conflicts: Vec<Conflict>,
    /// Ids of routes with this installation's marker for an owner it does not know.
    pub unknown_owners: Vec<String>,
    /// Routes of the account once the plan is carried out.
    pub routes_after: usize,
}

impl PrivatePlan {
    /// True when nothing is to be created, changed or deleted.
    pub fn is_empty(&self) -> bool {
        self.ip.is_empty() && self.hostnames.is_empty()
    }

    /// The warning to give when the account would hold more routes than Cloudflare allows.
    pub fn over_limit(&self) -> Option<String> {
        (self.routes_after > ACCOUNT_ROUTE_LIMIT).then(|| {
            format!(
                "the account would hold {} private routes, more than Cloudflare's limit of {ACCOUNT_ROUTE_LIMIT}",
                self.routes_after
            )
        })
    }
}

/// A listed route as the planner compares it, whatever its kind.
struct Found<'a, K> {
    id: &'a str,
    key: Option<K>,
    tunnel_id: &'a str,
    comment: &'a str,
    route: &'a str,
}

/// What the planner reads besides the routes of one kind.
struct Context<'a> {
    cluster: &'a ClusterId,
    owners: &'a BTreeSet<OwnerDigest>,
    held: &'a BTreeSet<OwnerDigest>,
}

/// The plan that brings `listed` (one account's routes) to `desired`, for the installation
/// `cluster`.
pub fn plan_private(cluster: &ClusterId, desired: &DesiredRoutes, listed: &Listed) -> PrivatePlan {
    let mut plan = PrivatePlan::default();
    let ip_found = listed
        .ip_routes
        .iter()
        .map(|r| Found {
            id: &r.id,
            key: listed.ip_key(r),
            tunnel_id: &r.tunnel_id,
            comment: &r.comment,
            route: &r.network,
        })
        .collect();
    let context = Context {
        cluster,
        owners: &desired.owners,
        held: &desired.held_ip,
    };
    plan.ip = plan_kind(&context, &desired.ip, ip_found, &mut plan);
    let hostname_found = listed
        .hostname_routes
        .iter()
        .map(|r| Found {
            id: &r.id,
            key: Some(hostname_key(r)),
            tunnel_id: &r.tunnel_id,
            comment: &r.comment,
            route: &r.hostname,
        })
        .collect();
    let context = Context {
        held: &desired.held_hostnames,
        ..context
    };
    plan.hostnames = plan_kind(&context, &desired.hostnames, hostname_found, &mut plan);
    let changes = plan
        .ip
        .iter()
        .map(count)
        .chain(plan.hostnames.iter().map(count));
    let (created, deleted) = changes.fold((0, 0), |(c, d), (dc, dd)| (c + dc, d + dd));
    plan.routes_after = (listed.len() + created).saturating_sub(deleted);
    plan
}

/// The changes to routes of one kind; conflicts and unknown owners go into `plan`.
fn plan_kind<K: Ord + Clone>(
    context: &Context<'_>,
    desired: &BTreeMap<K, DesiredRoute>,
    found: Vec<Found<'_, K>>,
    plan: &mut PrivatePlan,
) -> Vec<Change<K>> {
    let mut at_key: BTreeMap<&K, Vec<&Found<'_, K>>> = BTreeMap::new();
    for route in &found {
        if let Some(key) = &route.key {
            at_key.entry(key).or_default().push(route);
        }
    }
    let ours = |route: &Found<'_, K>| match ownership(route.comment, context.cluster) {
        Ownership::Ours(digest) => Some(digest),
        _ => None,
    };
    let mut handled: BTreeSet<&str> = BTreeSet::new();
    let (mut updates, mut creates) = (Vec::new(), Vec::new());
    for (key, want) in desired {
        let listed = at_key.get(key).map(Vec::as_slice).unwrap_or_default();
        let held = listed.iter().find(|r| ours(r).is_some()).or(listed.first());
        match (held, &want.tunnel_id) {
            (Some(route), _) if ours(route).is_none() => plan.conflicts.push(Conflict {
                owner: want.owner.clone(),
                entry: want.entry.clone(),
                held_by: HeldBy::Route {
                    id: route.id.to_string(),
                    comment: route.comment.to_string(),
                },
            }),
            // The owner's tunnel is not known yet: what is there stays.
            (_, None) => handled.extend(listed.iter().filter(|r| ours(r).is_some()).map(|r| r.id)),
            (None, Some(tunnel_id)) => creates.push(Change::Create {
                key: key.clone(),
                tunnel_id: tunnel_id.clone(),
                comment: want.comment.clone(),
            }),
            (Some(route), Some(tunnel_id)) => {
                handled.insert(route.id);
                let tunnel_id = (route.tunnel_id != tunnel_id).then(|| tunnel_id.clone());
                let comment = (route.comment != want.comment).then(|| want.comment.clone());
                if tunnel_id.is_some() || comment.is_some() {
                    updates.push(Change::Update {
                        id: route.id.to_string(),
                        key: key.clone(),
                        tunnel_id,
                        comment,
                    });
                }
            }
        }
    }
    let mut changes = Vec::new();
    for route in found.iter().filter(|r| !handled.contains(r.id)) {
        match ours(route) {
            Some(digest) if context.held.contains(&digest) => {}
            Some(digest) if context.owners.contains(&digest) => changes.push(Change::Delete {
                id: route.id.to_string(),
                route: route.route.to_string(),
            }),
            Some(_) => plan.unknown_owners.push(route.id.to_string()),
            None => {}
        }
    }
    changes.extend(updates);
    changes.extend(creates);
    changes
}

/// Routes a change adds and removes.
fn count<K>(change: &Change<K>) -> (usize, usize) {
    match change {
        Change::Create { .. } => (1, 0),
        Change::Update { .. } => (0, 0),
        Change::Delete { .. } => (0, 1),
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
