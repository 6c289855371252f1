//! Following the tunnel objects as they change, for what outlives a reconcile:
//! - a tunnel id handed over (`claims`): when an object records a tunnel id, the objects that
//!   claim it too and rank after it are re-run (they must stop); when one is deleted, every
//!   other claimant is re-run at once (the next in line takes over);
//! - per-object memory (`memory`): when an object leaves its store (deleted, or out of the
//!   watch's scope), the failure counts and drift schedules of objects no longer in either
//!   store are dropped.
use std::collections::HashSet;
use std::sync::Arc;

use futures::StreamExt;
use kube::ResourceExt;
use kube::runtime::reflector::{ObjectRef, Store};
use tokio::sync::mpsc;

use super::context::TunnelContext;
use crate::term::adapters::TunnelKindAdapter;
use crate::term::claims::{self, Rank};
use cftunnel_types::{ClusterTunnel, Tunnel};
use cftunnel_types::{TunnelIdentity, TunnelKind};

/// Where objects to re-run are sent, per kind.
pub(crate) struct Rerun {
    pub tunnels: mpsc::UnboundedSender<ObjectRef<Tunnel>>,
    pub cluster_tunnels: mpsc::UnboundedSender<ObjectRef<ClusterTunnel>>,
}

impl Rerun {
    fn send(&self, tunnel: &TunnelIdentity) {
        let _ = match tunnel.kind {
            TunnelKind::ClusterTunnel => self
                .cluster_tunnels
                .send(ObjectRef::new(&tunnel.name))
                .is_ok(),
            TunnelKind::Tunnel => self
                .tunnels
                .send(ObjectRef::new(&tunnel.name).within(&tunnel.namespace))
                .is_ok(),
        };
    }
}

/// What one change of an object means here.
enum Change {
    /// Live, claiming `ids` at `rank`: claimants ranking after it are re-run.
    Claims {
        identity: TunnelIdentity,
        rank: Rank,
        ids: Vec<String>,
    },
    /// Being deleted or gone: every claimant of `ids` is re-run.
    Departs { ids: Vec<String>, gone: bool },
}

fn change<K: TunnelKindAdapter>(store: &Store<K>, obj: &K) -> Change {
    let uid = obj.uid();
    let present = uid.is_some()
        && store
            .get(&ObjectRef::from_obj(obj))
            .is_some_and(|o| o.uid() == uid);
    if present && obj.meta().deletion_timestamp.is_none() {
        return Change::Claims {
            identity: obj.route_identity(),
            rank: Rank::of(obj),
            ids: claims::claimed_ids(obj),
        };
    }
    Change::Departs {
        ids: claims::named_ids(obj),
        gone: !present,
    }
}

/// Runs until the term ends.
pub async fn follow(
    ctx: Arc<TunnelContext>,
    tunnels: impl futures::Stream<Item = Arc<Tunnel>> + Send,
    cluster_tunnels: impl futures::Stream<Item = Arc<ClusterTunnel>> + Send,
    stores: (Store<Tunnel>, Store<ClusterTunnel>),
    rerun: Rerun,
) {
    let (tunnel_store, cluster_store) = stores;
    let tunnels = tunnels.map(move |t| change(&tunnel_store, &*t));
    let cluster_tunnels = cluster_tunnels.map(move |t| change(&cluster_store, &*t));
    let mut changes = std::pin::pin!(futures::stream::select(tunnels, cluster_tunnels));
    while let Some(change) = changes.next().await {
        let Some(claims) = ctx.claims.get() else {
            continue;
        };
        match change {
            Change::Claims {
                identity,
                rank,
                ids,
            } => {
                if ids.is_empty() {
                    continue;
                }
                for (claimant, _) in claims
                    .claimants(&ids)
                    .into_iter()
                    .filter(|(c, r)| *c != identity && *r > rank)
                {
                    rerun.send(&claimant);
                }
            }
            Change::Departs { ids, gone } => {
                for (claimant, _) in claims.claimants(&ids) {
                    rerun.send(&claimant);
                }
                if gone {
                    forget_departed(&ctx);
                }
            }
        }
    }
}

/// Drops the failure counts and drift schedules of objects no longer in either store.
pub(crate) fn forget_departed(ctx: &TunnelContext) {
    let Some(claims) = ctx.claims.get() else {
        return;
    };
    let mut keys = HashSet::new();
    let mut uids = HashSet::new();
    for t in claims.tunnels.state() {
        keys.insert(t.display());
        uids.extend(t.uid());
    }
    for t in claims.cluster_tunnels.state() {
        keys.insert(t.display());
        uids.extend(t.uid());
    }
    ctx.forget_all_but(&keys, &uids);
}

#[cfg(test)]
#[path = "departures_tests.rs"]
mod tests;
