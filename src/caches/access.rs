//! The AccessPolicy watch (docs/design.md §3.7). Its CRD ships with cftunnel, but a cluster
//! upgraded without applying the new CRDs does not serve it yet: a probe (a one-item list)
//! runs at start and every [`PROBE_INTERVAL`] while the kind is not served, and the watch
//! starts once it is, without a restart.
//!
//! Fail-closed: until the probe has answered, the caches are not synced, so no tunnel renders
//! before the policies that protect its routes are known (one rendered without them would
//! serve protected hostnames in the open). Only "not installed" (404) is safe to render
//! without: no AccessPolicy can exist then. Anything else that hides policies makes them
//! unknown ([`AccessPolicies::unknown`]): a 403 on the probe or the watch (RBAC without
//! AccessPolicies), an AccessPolicy that does not decode, a watch not listed yet, a watch that
//! failed otherwise (the API server away or timing out) until the store is known to be current
//! again (an event, or a list whose names and versions are exactly the store's). While they
//! are unknown the guard serves no hostname in the open that was not already (see
//! `cftunnel_policy::access::AccessGuard::close_unknown`), each cause is counted in
//! `cftunnel_access_policies_unknown_total` and logged once with what to fix.
use std::sync::Arc;

use futures::StreamExt;
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
    /// The probe was refused (403): the message says which permission is missing.
    Forbidden(String),
    Watching(Shared<AccessPolicy>),
}

/// What makes a running watch's policies unknown.
#[derive(Clone, Debug, Default, PartialEq)]
struct Trouble {
    /// The watch's last error, until it lists or delivers again.
    watch_error: Option<String>,
    /// AccessPolicies that do not decode now.
    undecodable: usize,
}

/// The AccessPolicies of the watched namespaces, once their CRD is served.
#[derive(Clone)]
pub struct AccessPolicies {
    state: watch::Receiver<State>,
    trouble: watch::Receiver<Trouble>,
}

/// The message of a 403 on AccessPolicies: what is missing and how to fix it.
fn forbidden_message(namespace: Option<&str>, error: &str) -> String {
    format!(
        "cftunnel may not list and watch accesspolicies.networking.cfargotunnel.com{} (RBAC: {error}): no hostname is newly served in the open until it may; apply the ClusterRole of this cftunnel release",
        namespace
            .map(|ns| format!(" in namespace {ns}"))
            .unwrap_or_default()
    )
}

/// Is `error` the API server's 403?
fn is_forbidden(error: &kube::runtime::watcher::Error) -> bool {
    use kube::runtime::watcher::Error;
    match error {
        Error::InitialListFailed(kube::Error::Api(e))
        | Error::WatchStartFailed(kube::Error::Api(e)) => e.code == 403,
        Error::WatchError(status) => status.code == 403,
        _ => false,
    }
}

impl AccessPolicies {
    /// Every policy (none while the kind is not served).
    pub fn all(&self) -> Vec<Arc<AccessPolicy>> {
        match &*self.state.borrow() {
            State::Watching(shared) => shared.store().state(),
            _ => Vec::new(),
        }
    }

    /// Why the policies cannot be known now (`None`: every AccessPolicy is known, or the kind
    /// is not installed and none can exist).
    pub fn unknown(&self) -> Option<String> {
        match &*self.state.borrow() {
            State::Forbidden(message) => return Some(message.clone()),
            // Served at last (after a 403 or while not installed): until the first list is in
            // the store an empty store is not "no policies".
            State::Watching(shared) if !shared.is_listed() => {
                return Some(
                    "the AccessPolicies are being listed: no hostname is newly served in the open until they are".into(),
                );
            }
            State::Watching(_) => {}
            _ => return None,
        }
        let trouble = self.trouble.borrow();
        if let Some(error) = &trouble.watch_error {
            return Some(error.clone());
        }
        (trouble.undecodable > 0).then(|| {
            format!(
                "{} AccessPolicies do not decode (the log names each and its field): no hostname is newly served in the open until they are fixed or deleted",
                trouble.undecodable
            )
        })
    }

    /// Resolves once the probe answered and, when the kind is served, the watch listed.
    pub async fn synced(&self) {
        let mut state = self.state.clone();
        let shared = loop {
            match &*state.borrow_and_update() {
                State::Probing => {}
                State::Absent | State::Forbidden(_) => return,
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
        let (trouble_tx, trouble) = watch::channel(Trouble::default());
        let trouble_tx = Arc::new(trouble_tx);
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
                        let shared = watch_policies(
                            &watches,
                            &client,
                            namespace.as_deref(),
                            &labels,
                            &metrics,
                            generation.clone(),
                            trouble_tx.clone(),
                        );
                        tx.send_replace(State::Watching(shared));
                        generation.send_modify(|n| *n = n.wrapping_add(1));
                        return;
                    }
                    Err(kube::Error::Api(e)) if e.code == 403 => {
                        let message = forbidden_message(namespace.as_deref(), &e.message);
                        if !matches!(*tx.borrow(), State::Forbidden(_)) {
                            tracing::error!("{message}");
                            metrics.access_policies_unknown("forbidden");
                            tx.send_replace(State::Forbidden(message));
                            generation.send_modify(|n| *n = n.wrapping_add(1));
                        }
                    }
                    Err(kube::Error::Api(e)) if e.code == 404 => {
                        if !told {
                            tracing::info!(
                                "the AccessPolicy CRD is not installed; looking again every {}s",
                                PROBE_INTERVAL.as_secs()
                            );
                            told = true;
                        }
                        if !matches!(*tx.borrow(), State::Absent) {
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
        AccessPolicies { state, trouble }
    }
}

/// The watch of the AccessPolicies, telling `trouble` what hides some of them: a failing watch
/// (a 403 named as such) until it delivers again, and how many do not decode.
fn watch_policies(
    scope: &Scope,
    client: &Client,
    namespace: Option<&str>,
    labels: &str,
    metrics: &Arc<Metrics>,
    generation: Arc<watch::Sender<u64>>,
    trouble: Arc<watch::Sender<Trouble>>,
) -> Shared<AccessPolicy> {
    let ns = namespace.map(str::to_string);
    let told = metrics.clone();
    let bump = generation.clone();
    // Their status is read: it records the applications that open their hostnames.
    let shared = Shared::start_with_status(
        scope,
        metrics,
        "accesspolicies",
        |store| {
            let counts = trouble.clone();
            let counted = told.clone();
            let bumped = bump.clone();
            let events = decode::tolerant_reporting::<AccessPolicy, _>(
                client,
                ns.as_deref(),
                config(labels),
                store,
                move |undecodable| {
                    let changed = counts.send_if_modified(|t| {
                        let was = t.undecodable;
                        t.undecodable = undecodable;
                        was != undecodable
                    });
                    if changed && undecodable > 0 {
                        counted.access_policies_unknown("undecodable");
                    }
                    if changed {
                        bumped.send_modify(|n| *n = n.wrapping_add(1));
                    }
                },
            );
            let namespace = ns.clone();
            let (trouble, told, generation) = (trouble.clone(), told.clone(), generation.clone());
            events.inspect(move |event| {
                let next = match event {
                    Ok(_) => None,
                    // 410: the watch fell out of the API server's window and relists at once,
                    // as the protocol wants; the store keeps every policy meanwhile.
                    Err(kube::runtime::watcher::Error::WatchError(status))
                        if status.code == 410 =>
                    {
                        return;
                    }
                    Err(e) if is_forbidden(e) => {
                        Some(forbidden_message(namespace.as_deref(), &e.to_string()))
                    }
                    // Any other failure (the API server away, a timeout) is retried with
                    // backoff; until the store is known to be current again (an event, or
                    // [`recover`]'s list) a policy made meanwhile could be missing from it.
                    Err(e) => Some(failed_message(&e.to_string())),
                };
                let changed = trouble.send_if_modified(|t| {
                    let was = t.watch_error.replace(next.clone().unwrap_or_default());
                    if next.is_none() {
                        t.watch_error = None;
                    }
                    was != t.watch_error
                });
                if changed {
                    if let Some(message) = &next {
                        let forbidden = matches!(event, Err(e) if is_forbidden(e));
                        if forbidden {
                            tracing::error!("{message}");
                        } else {
                            tracing::warn!("{message}");
                        }
                        told.access_policies_unknown(if forbidden {
                            "forbidden"
                        } else {
                            "watch_failed"
                        });
                    }
                    generation.send_modify(|n| *n = n.wrapping_add(1));
                }
            })
        },
        keep,
        bump.clone(),
        |_, _| true,
    );
    scope.spawn(
        "access-policy-recovery",
        recover(
            client.clone(),
            namespace.map(str::to_string),
            labels.to_string(),
            shared.clone(),
            trouble,
            generation,
        ),
    );
    shared
}

/// The message of a failing AccessPolicy watch (other than a 403).
fn failed_message(error: &str) -> String {
    format!(
        "the AccessPolicy watch failed ({error}): no hostname is newly served in the open until the AccessPolicies are listed again"
    )
}

/// How often a failed watch's policies are listed, to see whether the store is current again.
const RECOVERY_INTERVAL: std::time::Duration = std::time::Duration::from_secs(3);

/// Clears a watch failure once the store is current again. A watch that starts again after a
/// failure delivers nothing until a policy changes, so the failure is not cleared by an event:
/// while one is recorded, the policies' names and resource versions are listed every
/// [`RECOVERY_INTERVAL`], and when they are exactly the store's, nothing is missing from it.
async fn recover(
    client: Client,
    namespace: Option<String>,
    labels: String,
    shared: Shared<AccessPolicy>,
    trouble: Arc<watch::Sender<Trouble>>,
    generation: Arc<watch::Sender<u64>>,
) {
    let api: Api<AccessPolicy> = match namespace.as_deref() {
        Some(ns) => Api::namespaced(client, ns),
        None => Api::all(client),
    };
    let params = if labels.is_empty() {
        ListParams::default()
    } else {
        ListParams::default().labels(&labels)
    };
    let mut changes = trouble.subscribe();
    loop {
        if changes.borrow_and_update().watch_error.is_none() {
            if changes.changed().await.is_err() {
                return;
            }
            continue;
        }
        tokio::time::sleep(RECOVERY_INTERVAL).await;
        let Ok(listed) = api.list_metadata(&params).await else {
            continue;
        };
        let live = versions(listed.items.iter().map(|p| &p.metadata));
        let stored = versions(shared.store().state().iter().map(|p| &p.metadata));
        if live != stored {
            continue;
        }
        let cleared = trouble.send_if_modified(|t| t.watch_error.take().is_some());
        if cleared {
            tracing::info!("the AccessPolicies are listed again and the watch's store holds each");
            generation.send_modify(|n| *n = n.wrapping_add(1));
        }
    }
}

/// Each object's namespace, name and resource version.
fn versions<'a>(
    metadata: impl Iterator<Item = &'a kube::api::ObjectMeta>,
) -> std::collections::BTreeSet<(String, String, String)> {
    metadata
        .map(|m| {
            (
                m.namespace.clone().unwrap_or_default(),
                m.name.clone().unwrap_or_default(),
                m.resource_version.clone().unwrap_or_default(),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::Status;
    use kube::runtime::watcher::Error;

    fn api(code: u16) -> kube::Error {
        kube::Error::Api(Status::failure("m", "r").with_code(code).boxed())
    }

    #[test]
    fn only_the_api_servers_403_counts_as_forbidden() {
        assert!(is_forbidden(&Error::InitialListFailed(api(403))));
        assert!(is_forbidden(&Error::WatchStartFailed(api(403))));
        assert!(!is_forbidden(&Error::InitialListFailed(api(500))));
        assert!(!is_forbidden(&Error::WatchStartFailed(api(404))));
    }

    #[test]
    fn the_forbidden_message_names_the_kind_the_namespace_and_the_fix() {
        let message = forbidden_message(Some("shop"), "no list");
        for part in [
            "accesspolicies.networking.cfargotunnel.com in namespace shop",
            "no list",
            "apply the ClusterRole",
        ] {
            assert!(message.contains(part), "{part:?} not in {message:?}");
        }
    }
}
