//! Watch caches behind the admission view: Tunnels, ClusterTunnels, TunnelBindings, labelled
//! Services (label-selected) and namespace labels (metadata only). Memory grows with cftunnel's
//! own objects, never with unrelated Services. A snapshot is rebuilt only after a change.
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{Namespace, Service};
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;

use crate::admission::facts::{binding_claims, service_claims, tunnel_facts};
use crate::admission::{AdmissionView, TunnelKind};
use crate::api::names::{LABEL_EXPOSE_CLUSTER_TUNNEL, LABEL_EXPOSE_TUNNEL};
use crate::api::{ClusterTunnel, Tunnel, TunnelBinding, TunnelSpec};

/// Which objects this instance watches (several instances may share one API server in tests).
#[derive(Clone, Debug, Default)]
pub struct WatchScope {
    /// Watch namespaced objects only in this namespace.
    pub namespace: Option<String>,
    /// Extra label selector for Tunnels, ClusterTunnels and TunnelBindings.
    pub label_selector: Option<String>,
}

#[derive(Clone)]
struct Stores {
    tunnels: Store<Tunnel>,
    cluster_tunnels: Store<ClusterTunnel>,
    bindings: Store<TunnelBinding>,
    services_tunnel: Store<Service>,
    services_cluster_tunnel: Store<Service>,
    namespaces: Store<PartialObjectMeta<Namespace>>,
}

/// The admission view kept current by watches.
pub struct ViewCache {
    stores: Stores,
    changes: Arc<AtomicU64>,
    built: Mutex<(u64, Arc<AdmissionView>)>,
}

impl ViewCache {
    /// Starts the watches on the current runtime; `synced` resolves once every cache listed.
    pub fn start(
        client: Client,
        scope: &WatchScope,
    ) -> (
        Arc<ViewCache>,
        impl std::future::Future<Output = ()> + Send + use<>,
    ) {
        let changes = Arc::new(AtomicU64::new(1));
        let labels = scope.label_selector.clone().unwrap_or_default();
        let ns = scope.namespace.as_deref();
        let tunnels = spawn_reflector(namespaced::<Tunnel>(&client, ns), config(&labels), &changes);
        let cluster_tunnels = spawn_reflector(
            Api::<ClusterTunnel>::all(client.clone()),
            config(&labels),
            &changes,
        );
        let bindings = spawn_reflector(
            namespaced::<TunnelBinding>(&client, ns),
            config(&labels),
            &changes,
        );
        let services_tunnel = spawn_reflector(
            namespaced::<Service>(&client, ns),
            config(LABEL_EXPOSE_TUNNEL),
            &changes,
        );
        let services_cluster_tunnel = spawn_reflector(
            namespaced::<Service>(&client, ns),
            config(LABEL_EXPOSE_CLUSTER_TUNNEL),
            &changes,
        );
        let namespaces = spawn_reflector(
            Api::<PartialObjectMeta<Namespace>>::all(client),
            watcher::Config::default(),
            &changes,
        );
        let stores = Stores {
            tunnels,
            cluster_tunnels,
            bindings,
            services_tunnel,
            services_cluster_tunnel,
            namespaces,
        };
        let waiting = stores.clone();
        let synced = async move {
            let _ = waiting.tunnels.wait_until_ready().await;
            let _ = waiting.cluster_tunnels.wait_until_ready().await;
            let _ = waiting.bindings.wait_until_ready().await;
            let _ = waiting.services_tunnel.wait_until_ready().await;
            let _ = waiting.services_cluster_tunnel.wait_until_ready().await;
            let _ = waiting.namespaces.wait_until_ready().await;
        };
        let cache = ViewCache {
            stores,
            changes,
            built: Mutex::new((0, Arc::new(AdmissionView::default()))),
        };
        (Arc::new(cache), synced)
    }

    /// The current view; rebuilt from the stores only when a watch event arrived since.
    pub fn snapshot(&self) -> Arc<AdmissionView> {
        let generation = self.changes.load(Ordering::Acquire);
        let mut built = self
            .built
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if built.0 != generation {
            *built = (generation, Arc::new(self.build()));
        }
        built.1.clone()
    }

    fn build(&self) -> AdmissionView {
        let s = &self.stores;
        let mut tunnels = Vec::new();
        for t in s.tunnels.state() {
            let ns = t.meta().namespace.as_deref().unwrap_or("");
            tunnels.push(tunnel_facts(
                TunnelKind::Tunnel,
                ns,
                &name_of(t.as_ref()),
                &t.spec,
            ));
        }
        for t in s.cluster_tunnels.state() {
            if let Some(spec) = as_tunnel_spec(&t.spec) {
                tunnels.push(tunnel_facts(
                    TunnelKind::ClusterTunnel,
                    "",
                    &name_of(t.as_ref()),
                    &spec,
                ));
            }
        }
        let mut claims = Vec::new();
        for b in s.bindings.state() {
            claims.extend(binding_claims(
                &b,
                b.meta().namespace.as_deref().unwrap_or(""),
                &tunnels,
            ));
        }
        for svc in s
            .services_tunnel
            .state()
            .into_iter()
            .chain(s.services_cluster_tunnel.state())
        {
            claims.extend(service_claims(
                &svc,
                svc.meta().namespace.as_deref().unwrap_or(""),
                &tunnels,
            ));
        }
        let namespace_labels = s
            .namespaces
            .state()
            .iter()
            .map(|n| {
                (
                    name_of(n.as_ref()),
                    n.metadata.labels.clone().unwrap_or_default(),
                )
            })
            .collect();
        AdmissionView::new(tunnels, namespace_labels, claims)
    }
}

fn name_of<K: Resource>(object: &K) -> String {
    object.meta().name.clone().unwrap_or_default()
}

/// ClusterTunnel and Tunnel share one spec shape (one macro defines both).
fn as_tunnel_spec<S: serde::Serialize>(spec: &S) -> Option<TunnelSpec> {
    serde_json::to_value(spec)
        .ok()
        .and_then(|v| serde_json::from_value(v).ok())
}

/// An Api over one namespace, or all of them.
pub(crate) fn namespaced<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
    K::DynamicType: Default,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// A watch config, label-selected unless `labels` is empty; any resourceVersion on relist.
pub(crate) fn config(labels: &str) -> watcher::Config {
    let config = watcher::Config::default().any_semantic();
    if labels.is_empty() {
        config
    } else {
        config.labels(labels)
    }
}

fn spawn_reflector<K>(api: Api<K>, config: watcher::Config, changes: &Arc<AtomicU64>) -> Store<K>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone,
{
    let (reader, writer) = reflector::store();
    let stream = reflector::reflector(writer, watcher(api, config).default_backoff());
    let changes = changes.clone();
    let on_change = move || {
        changes.fetch_add(1, Ordering::AcqRel);
    };
    drive(stream, on_change, std::any::type_name::<K>());
    reader
}

/// Polls a watch stream on its own task, calling `on_change` for every event and logging errors
/// (the stream retries with backoff).
pub(crate) fn drive<S, T, E>(stream: S, on_change: impl Fn() + Send + 'static, what: &'static str)
where
    S: Stream<Item = Result<T, E>> + Send + 'static,
    T: Send,
    E: std::fmt::Display + Send,
{
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(event) = stream.next().await {
            match event {
                Ok(_) => on_change(),
                Err(e) => {
                    crate::metrics::watch_restarted(what);
                    tracing::warn!(watch = what, error = %e, "watch error; retrying with backoff")
                }
            }
        }
    });
}
