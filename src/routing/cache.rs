//! The route reconciler's watch caches: tunnels, bindings, Services and namespace labels, with a
//! change signal. Services are stripped to what routes need (ports, route labels and
//! annotations) before they are stored: memory grows with the number of Services, not with
//! their size.
use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Namespace, Service, ServiceSpec};
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::sync::watch;

use crate::admission::facts::tunnel_facts;
use crate::admission::{TunnelIdentity, TunnelKind};
use crate::api::{CloudflareDetails, ClusterTunnel, Tunnel, TunnelBinding, TunnelStatus};
use crate::controller::TunnelKindAdapter;
use crate::routes::RouteWorld;
use crate::view_cache::{WatchScope, config, drive, namespaced};

/// What DNS and finalizers need to know of one tunnel object.
#[derive(Clone, Debug)]
pub struct TunnelRecord {
    pub identity: TunnelIdentity,
    /// Namespace of the API Secret (the tunnel's own, or the cluster-resource namespace).
    pub secret_namespace: String,
    pub cloudflare: CloudflareDetails,
    pub status: TunnelStatus,
    /// `deletionTimestamp` is set: its records are removed by its own deletion.
    pub deleting: bool,
}

/// Reflector stores plus a counter bumped on every watch event.
pub struct RouteCache {
    tunnels: Store<Tunnel>,
    cluster_tunnels: Store<ClusterTunnel>,
    bindings: Store<TunnelBinding>,
    services: Store<Service>,
    namespaces: Store<PartialObjectMeta<Namespace>>,
    changes: watch::Receiver<u64>,
    cluster_resource_namespace: String,
}

impl RouteCache {
    /// Starts the watches; `synced` resolves once every store has listed.
    pub fn start(
        client: &Client,
        scope: &WatchScope,
        cluster_resource_namespace: &str,
    ) -> (
        RouteCache,
        impl std::future::Future<Output = ()> + Send + use<>,
    ) {
        let (tx, changes) = watch::channel(0u64);
        let tx = Arc::new(tx);
        let labels = scope.label_selector.clone().unwrap_or_default();
        let ns = scope.namespace.as_deref();
        let tunnels = spawn(namespaced::<Tunnel>(client, ns), config(&labels), &tx, keep);
        let cluster_tunnels = spawn(
            Api::<ClusterTunnel>::all(client.clone()),
            config(&labels),
            &tx,
            keep,
        );
        let bindings = spawn(
            namespaced::<TunnelBinding>(client, ns),
            config(&labels),
            &tx,
            keep,
        );
        let services = spawn(
            namespaced::<Service>(client, ns),
            config(""),
            &tx,
            strip_service,
        );
        let namespaces = spawn(
            Api::<PartialObjectMeta<Namespace>>::all(client.clone()),
            config(""),
            &tx,
            keep,
        );
        let waiting = (
            tunnels.clone(),
            cluster_tunnels.clone(),
            bindings.clone(),
            services.clone(),
            namespaces.clone(),
        );
        let synced = async move {
            let _ = waiting.0.wait_until_ready().await;
            let _ = waiting.1.wait_until_ready().await;
            let _ = waiting.2.wait_until_ready().await;
            let _ = waiting.3.wait_until_ready().await;
            let _ = waiting.4.wait_until_ready().await;
        };
        let cache = RouteCache {
            tunnels,
            cluster_tunnels,
            bindings,
            services,
            namespaces,
            changes,
            cluster_resource_namespace: cluster_resource_namespace.to_string(),
        };
        (cache, synced)
    }

    /// Waits for the next watch event (returns at once if one arrived since the last call).
    pub async fn changed(&mut self) {
        if self.changes.changed().await.is_err() {
            // Every watch task ended (the runtime is shutting down): never wake again.
            std::future::pending::<()>().await;
        }
    }

    /// Marks everything seen so far as handled.
    pub fn mark_seen(&mut self) {
        self.changes.borrow_and_update();
    }

    /// The snapshot routes are computed from. Objects being deleted are left out: a deleted
    /// binding's routes and a deleted tunnel's routes go away at once.
    pub fn world(&self) -> RouteWorld {
        let mut tunnels = Vec::new();
        for t in self.tunnels.state().iter().filter(|t| !is_deleting(&***t)) {
            let ns = t.namespace().unwrap_or_default();
            tunnels.push(tunnel_facts(
                TunnelKind::Tunnel,
                &ns,
                &t.name_any(),
                &t.tunnel_spec(),
            ));
        }
        for t in self
            .cluster_tunnels
            .state()
            .iter()
            .filter(|t| !is_deleting(&***t))
        {
            tunnels.push(tunnel_facts(
                TunnelKind::ClusterTunnel,
                "",
                &t.name_any(),
                &t.tunnel_spec(),
            ));
        }
        let namespace_labels: BTreeMap<String, BTreeMap<String, String>> = self
            .namespaces
            .state()
            .iter()
            .map(|n| (n.name_any(), n.labels().clone()))
            .collect();
        RouteWorld {
            tunnels,
            namespace_labels,
            bindings: self
                .bindings
                .state()
                .into_iter()
                .filter(|b| !is_deleting(&**b))
                .collect(),
            services: self.services.state(),
        }
    }

    /// Every tunnel object, with what DNS needs.
    pub fn tunnel_records(&self) -> Vec<TunnelRecord> {
        let mut out = Vec::new();
        for t in self.tunnels.state() {
            let namespace = t.namespace().unwrap_or_default();
            out.push(TunnelRecord {
                identity: TunnelIdentity {
                    kind: TunnelKind::Tunnel,
                    namespace: namespace.clone(),
                    name: t.name_any(),
                },
                secret_namespace: namespace,
                cloudflare: t.spec.cloudflare.clone(),
                status: t.status.clone().unwrap_or_default(),
                deleting: is_deleting(&*t),
            });
        }
        for t in self.cluster_tunnels.state() {
            out.push(TunnelRecord {
                identity: TunnelIdentity {
                    kind: TunnelKind::ClusterTunnel,
                    namespace: String::new(),
                    name: t.name_any(),
                },
                secret_namespace: self.cluster_resource_namespace.clone(),
                cloudflare: t.spec.cloudflare.clone(),
                status: t.status.clone().unwrap_or_default(),
                deleting: is_deleting(&*t),
            });
        }
        out
    }

    /// Every TunnelBinding, those being deleted included.
    pub fn bindings(&self) -> Vec<Arc<TunnelBinding>> {
        self.bindings.state()
    }
}

/// Annotations of this prefix are cftunnel's; others are never read.
const ANNOTATION_PREFIX: &str = "cfargotunnel.com/";

fn keep<K>(_: &mut K) {}

fn is_deleting<K: Resource>(object: &K) -> bool {
    object.meta().deletion_timestamp.is_some()
}

/// Keeps what routes read of a Service: identity, labels, cftunnel's annotations, ports.
fn strip_service(service: &mut Service) {
    let meta = &mut service.metadata;
    meta.managed_fields = None;
    if let Some(annotations) = meta.annotations.as_mut() {
        annotations.retain(|k, _| k.starts_with(ANNOTATION_PREFIX));
    }
    let ports = service.spec.take().and_then(|s| s.ports);
    service.spec = Some(ServiceSpec {
        ports,
        ..ServiceSpec::default()
    });
    service.status = None;
}

fn spawn<K>(
    api: Api<K>,
    config: watcher::Config,
    changes: &Arc<watch::Sender<u64>>,
    modify: fn(&mut K),
) -> Store<K>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone,
{
    let (reader, writer) = reflector::store();
    let stream = watcher(api, config)
        .default_backoff()
        .modify(modify)
        .reflect(writer);
    let changes = changes.clone();
    let on_change = move || changes.send_modify(|n| *n = n.wrapping_add(1));
    drive(stream, on_change, std::any::type_name::<K>());
    reader
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ServicePort;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    #[test]
    fn a_stored_service_keeps_only_what_routes_read() {
        let service = Service {
            metadata: ObjectMeta {
                name: Some("web".into()),
                namespace: Some("shop".into()),
                annotations: Some(BTreeMap::from([
                    (
                        "cfargotunnel.com/fqdn".to_string(),
                        "a.example.com".to_string(),
                    ),
                    (
                        "kubectl.kubernetes.io/last-applied-configuration".to_string(),
                        "{…}".to_string(),
                    ),
                ])),
                labels: Some(BTreeMap::from([(
                    "cfargotunnel.com/expose-tunnel".to_string(),
                    "edge".to_string(),
                )])),
                ..ObjectMeta::default()
            },
            spec: Some(ServiceSpec {
                ports: Some(vec![ServicePort {
                    port: 80,
                    name: Some("http".into()),
                    ..ServicePort::default()
                }]),
                cluster_ip: Some("10.0.0.1".into()),
                selector: Some(BTreeMap::from([("app".to_string(), "web".to_string())])),
                ..ServiceSpec::default()
            }),
            ..Service::default()
        };
        let mut stripped = service;
        strip_service(&mut stripped);
        let annotations = stripped.metadata.annotations.clone().unwrap_or_default();
        assert_eq!(
            annotations.keys().collect::<Vec<_>>(),
            vec!["cfargotunnel.com/fqdn"]
        );
        assert_eq!(stripped.labels().len(), 1);
        let spec = stripped.spec.unwrap_or_default();
        assert_eq!(spec.ports.map(|p| p.len()), Some(1));
        assert!(spec.cluster_ip.is_none() && spec.selector.is_none());
    }
}
