//! The AccessPolicy watch (docs/design.md §3.7). Its CRD ships with cftunnel, but a cluster
//! upgraded without applying the new CRDs does not serve it yet: a probe (a one-item list)
//! runs at start and every [`PROBE_INTERVAL`] while the kind is not served, and the watch
//! starts once it is, without a restart.
//!
//! Fail-closed: until the probe has answered, the caches are not synced, so no tunnel renders
//! before the policies that protect its routes are known (one rendered without them would
//! serve protected hostnames in the open). "Not installed" (404) is safe to render without:
//! no AccessPolicy can exist then. A 403 (RBAC without AccessPolicies) is reported at error
//! level, since the policies that may exist are then invisible.
use std::sync::Arc;

use kube::api::ListParams;
use kube::{Api, Client};
use tokio::sync::watch;

use super::decode;
use super::gateway::PROBE_INTERVAL;
use super::scope::config;
use super::shared::{Shared, keep};
use crate::metrics::Metrics;
use crate::scope::Scope;
use cftunnel_types::access_policy::AccessPolicy;

#[derive(Clone)]
enum State {
    Probing,
    Absent,
    Watching(Shared<AccessPolicy>),
}

/// The AccessPolicies of the watched namespaces, once their CRD is served.
#[derive(Clone)]
pub struct AccessPolicies {
    state: watch::Receiver<State>,
}

impl AccessPolicies {
    /// Every policy (none while the kind is not served).
    pub fn all(&self) -> Vec<Arc<AccessPolicy>> {
        match &*self.state.borrow() {
            State::Watching(shared) => shared.store().state(),
            _ => Vec::new(),
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

    /// Starts probing on a task of `scope`; the watch it starts runs there too.
    pub(super) fn start(
        scope: &Scope,
        client: &Client,
        namespace: Option<&str>,
        labels: &str,
        metrics: &Arc<Metrics>,
        generation: Arc<watch::Sender<u64>>,
    ) -> AccessPolicies {
        let (tx, state) = watch::channel(State::Probing);
        let (client, namespace, labels, metrics) = (
            client.clone(),
            namespace.map(str::to_string),
            labels.to_string(),
            metrics.clone(),
        );
        let watches = scope.clone();
        scope.spawn("access-policy-probe", async move {
            let mut told = false;
            loop {
                let api: Api<AccessPolicy> = match namespace.as_deref() {
                    Some(ns) => Api::namespaced(client.clone(), ns),
                    None => Api::all(client.clone()),
                };
                match api.list(&ListParams::default().limit(1)).await {
                    Ok(_) => {
                        let ns = namespace.clone();
                        let watch_client = client.clone();
                        let shared = Shared::start(
                            &watches,
                            &metrics,
                            "accesspolicies",
                            |store| {
                                decode::tolerant::<AccessPolicy, _>(
                                    &watch_client,
                                    ns.as_deref(),
                                    config(&labels),
                                    store,
                                )
                            },
                            keep,
                            generation.clone(),
                        );
                        tx.send_replace(State::Watching(shared));
                        generation.send_modify(|n| *n = n.wrapping_add(1));
                        return;
                    }
                    Err(kube::Error::Api(e)) if e.code == 404 || e.code == 403 => {
                        if !told {
                            if e.code == 403 {
                                tracing::error!(
                                    "cannot list AccessPolicies: the RBAC does not allow it, so routes they protect would be served without Access; apply the ClusterRole of this cftunnel release"
                                );
                            } else {
                                tracing::info!(
                                    "the AccessPolicy CRD is not installed; looking again every {}s",
                                    PROBE_INTERVAL.as_secs()
                                );
                            }
                            told = true;
                        }
                        if matches!(*tx.borrow(), State::Probing) {
                            tx.send_replace(State::Absent);
                            generation.send_modify(|n| *n = n.wrapping_add(1));
                        }
                    }
                    Err(error) => {
                        tracing::debug!(%error, "AccessPolicy probe failed; retrying");
                    }
                }
                let wait = match *tx.borrow() {
                    State::Probing => std::time::Duration::from_secs(2),
                    _ => PROBE_INTERVAL,
                };
                tokio::time::sleep(wait).await;
            }
        });
        AccessPolicies { state }
    }
}
