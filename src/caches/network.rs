//! The NetworkRoute and VirtualNetwork watches of every replica (docs/design.md §3.11): the
//! admission view reads the CIDRs and private hostnames NetworkRoutes claim and the network
//! names VirtualNetworks take. Their CRDs ship with cftunnel, but a cluster upgraded without
//! applying them does not serve them yet: each kind is probed (a one-item list) at start and
//! every [`PROBE_INTERVAL`] while it is not served, and its watch starts once it is, without a
//! restart.
//!
//! Fail-open, unlike AccessPolicies: a kind not served (404) or not readable under the
//! installed RBAC (403, logged once) holds nothing, so admission knows no claims of it and
//! answers everything else as before; the network reconciler settles whatever admission did
//! not see (the older route keeps a contested one). Until each probe has answered, and a
//! served kind has listed, the caches are not synced.
//!
//! `--watch-namespace` and `--watch-selector` apply as to bindings: the NetworkRoutes of the
//! watched namespace, and (cluster-scoped) the VirtualNetworks, with the selected labels. A
//! status write wakes no reader, except a VirtualNetwork's new id.
use std::fmt::Debug;
use std::sync::Arc;

use kube::api::ListParams;
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::watch;

use super::decode;
use super::gateway::PROBE_INTERVAL;
use super::scope::config;
use super::shared::{Shared, keep};
use crate::metrics::Metrics;
use crate::scope::Scope;
use cftunnel_types::{NetworkRoute, VirtualNetwork};

/// A kind cftunnel reads: its own, so it decodes object by object, and has no dynamic type.
pub trait ProbedKind:
    Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned + Send + Sync + 'static
{
}

impl<K> ProbedKind for K where
    K: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned + Send + Sync + 'static
{
}

/// Where one kind stands in this process.
enum State<K: ProbedKind> {
    /// No answer yet.
    Probing,
    /// Not served, or not readable: probed again every [`PROBE_INTERVAL`].
    Absent,
    Watching(Shared<K>),
}

impl<K: ProbedKind> Clone for State<K> {
    fn clone(&self) -> Self {
        match self {
            State::Probing => State::Probing,
            State::Absent => State::Absent,
            State::Watching(shared) => State::Watching(shared.clone()),
        }
    }
}

/// One kind, watched once it is served.
pub struct Probed<K: ProbedKind> {
    state: watch::Receiver<State<K>>,
}

impl<K: ProbedKind> Clone for Probed<K> {
    fn clone(&self) -> Self {
        Probed {
            state: self.state.clone(),
        }
    }
}

impl<K: ProbedKind> Probed<K> {
    /// Every object (none while the kind is not served).
    pub fn all(&self) -> Vec<Arc<K>> {
        self.watch().map(|s| s.store().state()).unwrap_or_default()
    }

    /// The watch, once the kind is served.
    pub fn watch(&self) -> Option<Shared<K>> {
        match &*self.state.borrow() {
            State::Watching(shared) => Some(shared.clone()),
            _ => None,
        }
    }

    /// Resolves once the probe answered and, when the kind is served, the watch listed.
    pub async fn synced(&self) {
        let mut state = self.state.clone();
        let shared = loop {
            match &*state.borrow_and_update() {
                State::Probing => {}
                State::Absent => return,
                State::Watching(shared) => break shared.clone(),
            }
            if state.changed().await.is_err() {
                return;
            }
        };
        shared.listed().await;
    }
}

/// The NetworkRoutes and VirtualNetworks, each once its CRD is served.
#[derive(Clone)]
pub struct PrivateNetworks {
    pub routes: Probed<NetworkRoute>,
    pub networks: Probed<VirtualNetwork>,
}

impl PrivateNetworks {
    /// Starts probing both kinds on tasks of `scope`; the watches they start run there too.
    pub(super) fn start(
        scope: &Scope,
        client: &Client,
        namespace: Option<&str>,
        labels: &str,
        metrics: &Arc<Metrics>,
        generation: Arc<watch::Sender<u64>>,
    ) -> PrivateNetworks {
        let start = Start {
            scope,
            client,
            labels,
            metrics,
            generation,
        };
        let routes_api: Api<NetworkRoute> = match namespace {
            Some(ns) => Api::namespaced(client.clone(), ns),
            None => Api::all(client.clone()),
        };
        let routes = start.probed(
            "networkroutes",
            routes_api,
            namespace.map(str::to_string),
            // Their status is the network reconciler's report: no reader of these caches reads it.
            |_, _| false,
        );
        let networks = start.probed(
            "virtualnetworks",
            Api::all(client.clone()),
            None,
            // A network's id in its status is what routes are placed with.
            |old: &VirtualNetwork, new: &VirtualNetwork| {
                old.status.as_ref().and_then(|s| s.id.as_ref())
                    != new.status.as_ref().and_then(|s| s.id.as_ref())
            },
        );
        PrivateNetworks { routes, networks }
    }

    /// Resolves once both probes answered and the served kinds listed.
    pub async fn synced(&self) {
        self.routes.synced().await;
        self.networks.synced().await;
    }
}

/// What starting a probe and its watch needs.
struct Start<'a> {
    scope: &'a Scope,
    client: &'a Client,
    labels: &'a str,
    metrics: &'a Arc<Metrics>,
    generation: Arc<watch::Sender<u64>>,
}

impl Start<'_> {
    /// Probes `api` until the kind is served, then watches it (in `namespace`; `None`: all,
    /// or a cluster-scoped kind). `read_status`: whether a status write changes what readers
    /// read.
    fn probed<K: ProbedKind>(
        &self,
        what: &'static str,
        api: Api<K>,
        namespace: Option<String>,
        read_status: fn(&K, &K) -> bool,
    ) -> Probed<K> {
        let (tx, state) = watch::channel(State::Probing);
        let (client, labels, metrics, generation) = (
            self.client.clone(),
            self.labels.to_string(),
            self.metrics.clone(),
            self.generation.clone(),
        );
        let watches = self.scope.clone();
        self.scope.spawn("private-network-probe", async move {
            let mut told = false;
            loop {
                match api.list(&ListParams::default().limit(1)).await {
                    Ok(_) => {
                        let shared = Shared::start_with_status(
                            &watches,
                            &metrics,
                            what,
                            |store| {
                                decode::tolerant::<K, _>(
                                    &client,
                                    namespace.as_deref(),
                                    config(&labels),
                                    store,
                                )
                            },
                            keep,
                            generation.clone(),
                            read_status,
                        );
                        tx.send_replace(State::Watching(shared));
                        generation.send_modify(|n| *n = n.wrapping_add(1));
                        return;
                    }
                    Err(kube::Error::Api(e)) if e.code == 404 || e.code == 403 => {
                        if !told {
                            let message = absent_message(what, e.code);
                            if e.code == 403 {
                                tracing::warn!("{message}");
                            } else {
                                tracing::info!("{message}");
                            }
                            told = true;
                        }
                        if matches!(*tx.borrow(), State::Probing) {
                            tx.send_replace(State::Absent);
                        }
                    }
                    Err(error) => {
                        tracing::debug!(kind = what, %error, "probe failed; retrying");
                    }
                }
                let wait = match *tx.borrow() {
                    State::Probing => std::time::Duration::from_secs(2),
                    _ => PROBE_INTERVAL,
                };
                tokio::time::sleep(wait).await;
            }
        });
        Probed { state }
    }
}

/// What is logged, once, while `what` cannot be watched: not served (404) or not readable
/// under the installed RBAC (403).
fn absent_message(what: &str, code: u16) -> String {
    let why = if code == 403 {
        "cftunnel's role may not list them; apply the ClusterRole of this release"
    } else {
        "their CRD is not installed; apply the CRDs of this release"
    };
    format!(
        "{what}.networking.cfargotunnel.com cannot be watched ({why}): admission knows no claims of them; looking again every {}s",
        PROBE_INTERVAL.as_secs()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_of_a_kind_not_watched_says_why_and_what_to_do() {
        let forbidden = absent_message("networkroutes", 403);
        assert!(
            forbidden.starts_with("networkroutes.networking.cfargotunnel.com cannot be watched (cftunnel's role may not list them; apply the ClusterRole"),
            "{forbidden}"
        );
        let missing = absent_message("virtualnetworks", 404);
        assert!(
            missing.contains("(their CRD is not installed; apply the CRDs of this release)"),
            "{missing}"
        );
        assert!(missing.ends_with("looking again every 20s"), "{missing}");
    }
}
