//! The NetworkRoute and VirtualNetwork watches of a leadership term. Their CRDs ship with
//! cftunnel, but a cluster upgraded without applying them does not serve them yet: a probe (a
//! one-item list) runs at the term's start and every [`PROBE_INTERVAL`] while NetworkRoute is
//! not served, and both watches start once it is. Only the leader reads them (no admission
//! rule reads them yet), so they live and end with the term. `--watch-selector` applies to
//! both, as to tunnels and bindings.
use std::sync::Arc;

use kube::Api;
use kube::api::ListParams;
use tokio::sync::watch;

use crate::caches::gateway::PROBE_INTERVAL;
use crate::caches::{Shared, config, decode, keep};
use crate::term::Context;
use cftunnel_types::{NetworkRoute, VirtualNetwork};

/// Both watches, once NetworkRoute is served.
#[derive(Clone)]
pub(crate) struct NetworkWatches {
    pub routes: Shared<NetworkRoute>,
    pub networks: Shared<VirtualNetwork>,
    /// Bumped by every event of either watch.
    pub generation: Arc<watch::Sender<u64>>,
}

impl NetworkWatches {
    /// Waits until NetworkRoute is served (probing), then starts both watches and waits for
    /// their first lists.
    pub(crate) async fn start(ctx: &Context) -> NetworkWatches {
        let namespace = ctx.scope.namespace.clone();
        let labels = ctx.scope.label_selector.clone().unwrap_or_default();
        let mut told = false;
        loop {
            let api: Api<NetworkRoute> = match namespace.as_deref() {
                Some(ns) => Api::namespaced(ctx.client.clone(), ns),
                None => Api::all(ctx.client.clone()),
            };
            match api.list(&ListParams::default().limit(1)).await {
                Ok(_) => break,
                Err(kube::Error::Api(e)) if e.code == 404 || e.code == 403 => {
                    if !told {
                        tracing::info!(
                            code = e.code,
                            "NetworkRoutes are not served (or not readable by cftunnel's role); looking again every {}s",
                            PROBE_INTERVAL.as_secs()
                        );
                        told = true;
                    }
                    tokio::time::sleep(PROBE_INTERVAL).await;
                }
                Err(error) => {
                    tracing::debug!(%error, "NetworkRoute probe failed; retrying");
                    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
                }
            }
        }
        let generation = Arc::new(watch::channel(0u64).0);
        let client = ctx.client.clone();
        let routes = Shared::start_with_status(
            &ctx.term,
            &ctx.metrics,
            "networkroutes",
            |store| {
                decode::tolerant::<NetworkRoute, _>(
                    &client,
                    namespace.as_deref(),
                    config(&labels),
                    store,
                )
            },
            keep,
            generation.clone(),
            // The routes' own status is written here: reading it back wakes nothing.
            |_, _| false,
        );
        let networks = Shared::start_with_status(
            &ctx.term,
            &ctx.metrics,
            "virtualnetworks",
            |store| decode::tolerant::<VirtualNetwork, _>(&client, None, config(&labels), store),
            keep,
            generation.clone(),
            // A network's id in its status is what routes are placed with.
            |old, new| {
                old.status.as_ref().and_then(|s| s.id.as_ref())
                    != new.status.as_ref().and_then(|s| s.id.as_ref())
            },
        );
        routes.listed().await;
        networks.listed().await;
        NetworkWatches {
            routes,
            networks,
            generation,
        }
    }
}
