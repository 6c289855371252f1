//! One set of watch caches: one watch and one store per kind, shared by every reader.
//!
//! - [`ProcessCaches`] run in every replica, for the whole process: Tunnels, ClusterTunnels and
//!   TunnelBindings (decoded object by object, see [`decode`]), Services (stripped to what
//!   routes read), namespace labels (metadata only), Ingresses and IngressClasses, and the
//!   Gateway API kinds once their CRDs are installed ([`gateway`]), AccessPolicies once
//!   theirs is ([`access`]), and NetworkRoutes and VirtualNetworks once theirs are
//!   ([`network`]). The admission view
//!   ([`crate::admission_view`]) and, in the leader, the route table ([`crate::route_reconciler`]) and the
//!   tunnel controllers (their own kind's trigger) are built from them, so the leader watches
//!   these kinds once, not three times.
//! - [`TermCaches`] run only in a leadership term and stop with it: metadata of Secrets and
//!   ConfigMaps, Deployments and DaemonSets labelled `app=cloudflared`. Both tunnel
//!   controllers and the checksum watcher read them.
//!
//! A leader therefore runs 10 + 4 watches, Gateway API aside (one more of each term kind when
//! `--watch-namespace` differs from the cluster-resource namespace: children of ClusterTunnels
//! live there); its network reconciler still watches NetworkRoutes and VirtualNetworks a
//! second time, on its own.
//! The ConfigMap watch has no label selector: the checksum watcher follows the ConfigMaps that
//! user-managed cloudflared workloads mount, which carry no label of cftunnel's. It is
//! metadata-only (names and resourceVersions), so its memory does not grow with ConfigMap data.
pub mod access;
pub mod decode;
pub mod gateway;
pub mod network;
mod objects;
mod scope;
mod shared;
mod tunnel_status;
mod workload;

use std::sync::Arc;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use k8s_openapi::api::networking::v1::{Ingress, IngressClass};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::Store;
use kube::{Api, Client};
use tokio::sync::watch;

pub use objects::{Keep, Objects};
pub use scope::WatchScope;
pub(crate) use scope::{config, namespaced};
pub use shared::{Shared, keep, typed};
use tunnel_status::dns_status_changed;
pub use workload::Workload;
use workload::strip_workload;

use crate::metrics::Metrics;
use crate::scope::Scope;
use cftunnel_types::names::{ANNOTATION_LEGACY_INGRESS_CLASS, APP_CLOUDFLARED, GROUP, LABEL_APP};
use cftunnel_types::{ClusterTunnel, ServicePorts, Tunnel, TunnelBinding};

/// The watches every replica runs (the webhook needs them), shared with the leader's term.
#[derive(Clone)]
pub struct ProcessCaches {
    pub tunnels: Shared<Tunnel, Store<Tunnel>>,
    pub cluster_tunnels: Shared<ClusterTunnel, Store<ClusterTunnel>>,
    pub bindings: Shared<TunnelBinding>,
    /// Services of the watched namespaces: metadata and ports ([`ServicePorts`]), stripped by
    /// [`strip_service`].
    pub services: Shared<ServicePorts>,
    pub namespaces: Shared<PartialObjectMeta<Namespace>>,
    /// Ingresses of the watched namespaces, stripped by [`strip_ingress`].
    pub ingresses: Shared<Ingress>,
    /// IngressClasses (cluster-scoped): whose Ingress is whose, and its tunnel.
    pub ingress_classes: Shared<IngressClass>,
    /// Gateway API kinds, once their CRDs are installed.
    pub gateway_api: gateway::GatewayApi,
    /// AccessPolicies, once their CRD is served.
    pub access_policies: access::AccessPolicies,
    /// NetworkRoutes and VirtualNetworks, each once its CRD is served.
    pub private_networks: network::PrivateNetworks,
    generation: Arc<watch::Sender<u64>>,
}

impl ProcessCaches {
    /// Starts the ten watches (and the probes of the optional kinds) as tasks of `scope`.
    pub fn start(
        scope: &Scope,
        client: &Client,
        watch_scope: &WatchScope,
        metrics: &Arc<Metrics>,
    ) -> ProcessCaches {
        let generation = Arc::new(watch::channel(0u64).0);
        let labels = watch_scope.label_selector.clone().unwrap_or_default();
        let ns = watch_scope.namespace.as_deref();
        // The route reconciler reads the ids and zones of their status (DNS is written with
        // them): a status write that moves those wakes it.
        let tunnels = Shared::start_with_status(
            scope,
            metrics,
            "tunnels",
            |store| decode::tolerant::<Tunnel, _>(client, ns, config(&labels), store),
            keep,
            generation.clone(),
            |old, new| dns_status_changed(old.status.as_ref(), new.status.as_ref()),
        );
        let cluster_tunnels = Shared::start_with_status(
            scope,
            metrics,
            "clustertunnels",
            |store| decode::tolerant::<ClusterTunnel, _>(client, None, config(&labels), store),
            keep,
            generation.clone(),
            |old, new| dns_status_changed(old.status.as_ref(), new.status.as_ref()),
        );
        let bindings = Shared::start(
            scope,
            metrics,
            "tunnelbindings",
            |store| decode::tolerant::<TunnelBinding, _>(client, ns, config(&labels), store),
            keep,
            generation.clone(),
        );
        let services = Shared::start(
            scope,
            metrics,
            "services",
            |_| typed(namespaced::<ServicePorts>(client, ns), config("")),
            strip_service,
            generation.clone(),
        );
        let namespaces = Shared::start(
            scope,
            metrics,
            "namespaces",
            |_| {
                typed(
                    Api::<PartialObjectMeta<Namespace>>::all(client.clone()),
                    config(""),
                )
            },
            keep,
            generation.clone(),
        );
        let ingresses = Shared::start(
            scope,
            metrics,
            "ingresses",
            |_| typed(namespaced::<Ingress>(client, ns), config("")),
            strip_ingress,
            generation.clone(),
        );
        let ingress_classes = Shared::start(
            scope,
            metrics,
            "ingressclasses",
            |_| typed(Api::<IngressClass>::all(client.clone()), config("")),
            keep,
            generation.clone(),
        );
        let gateway_api =
            gateway::GatewayApi::start(scope, client, ns, metrics, generation.clone());
        let access_policies =
            access::AccessPolicies::start(scope, client, ns, &labels, metrics, generation.clone());
        let private_networks = network::PrivateNetworks::start(
            scope,
            client,
            ns,
            &labels,
            metrics,
            generation.clone(),
        );
        ProcessCaches {
            tunnels,
            cluster_tunnels,
            bindings,
            services,
            namespaces,
            ingresses,
            ingress_classes,
            gateway_api,
            access_policies,
            private_networks,
            generation,
        }
    }

    /// Resolves once every store has listed.
    pub async fn synced(&self) {
        // Not `Store::wait_until_ready`: the webhook's readiness and the leader's route
        // reconciler wait here at once, and the controllers on the same stores (see `shared`).
        self.tunnels.listed().await;
        self.cluster_tunnels.listed().await;
        self.bindings.listed().await;
        self.services.listed().await;
        self.namespaces.listed().await;
        self.ingresses.listed().await;
        self.ingress_classes.listed().await;
        self.gateway_api.synced().await;
        self.access_policies.synced().await;
        self.private_networks.synced().await;
    }

    /// A counter bumped on every event of any of these watches.
    pub fn generation(&self) -> u64 {
        *self.generation.borrow()
    }

    /// Wakes on every event of any of these watches.
    pub(crate) fn subscribe(&self) -> watch::Receiver<u64> {
        self.generation.subscribe()
    }
}

/// The watches only a leader runs, over the namespaces of managed objects.
#[derive(Clone)]
pub struct TermCaches {
    /// Secrets, metadata only: API Secrets and managed Secrets.
    pub secrets: Vec<Shared<PartialObjectMeta<Secret>>>,
    /// ConfigMaps, metadata only, unselected (see the module comment).
    pub config_maps: Vec<Shared<PartialObjectMeta<ConfigMap>>>,
    /// Deployments labelled `app=cloudflared`: managed ones and user-managed cloudflared, as
    /// [`Workload`]s.
    pub deployments: Vec<Shared<Workload<Deployment>, Store<Workload<Deployment>>>>,
    /// DaemonSets labelled `app=cloudflared` (user-managed cloudflared), as [`Workload`]s.
    pub daemon_sets: Vec<Shared<Workload<DaemonSet>, Store<Workload<DaemonSet>>>>,
}

impl TermCaches {
    /// Starts the watches as tasks of `term`, one per kind and namespace of
    /// [`child_namespaces`]. The first namespace is the watched one.
    pub fn start(
        term: &Scope,
        client: &Client,
        namespaces: &[Option<String>],
        metrics: &Arc<Metrics>,
    ) -> TermCaches {
        let generation = Arc::new(watch::channel(0u64).0);
        let cloudflared = format!("{LABEL_APP}={APP_CLOUDFLARED}");
        let mut caches = TermCaches {
            secrets: Vec::new(),
            config_maps: Vec::new(),
            deployments: Vec::new(),
            daemon_sets: Vec::new(),
        };
        for (index, ns) in namespaces.iter().map(Option::as_deref).enumerate() {
            caches.secrets.push(Shared::start(
                term,
                metrics,
                "secrets",
                |_| {
                    typed(
                        namespaced::<PartialObjectMeta<Secret>>(client, ns),
                        config(""),
                    )
                },
                keep,
                generation.clone(),
            ));
            caches.config_maps.push(Shared::start(
                term,
                metrics,
                "configmaps",
                |_| {
                    typed(
                        namespaced::<PartialObjectMeta<ConfigMap>>(client, ns),
                        config(""),
                    )
                },
                keep,
                generation.clone(),
            ));
            caches.deployments.push(Shared::start(
                term,
                metrics,
                "deployments",
                |_| {
                    typed(
                        namespaced::<Workload<Deployment>>(client, ns),
                        config(&cloudflared),
                    )
                },
                strip_workload,
                generation.clone(),
            ));
            // User-managed cloudflared DaemonSets are followed in the watched namespace only.
            if index == 0 {
                caches.daemon_sets.push(Shared::start(
                    term,
                    metrics,
                    "daemonsets",
                    |_| {
                        typed(
                            namespaced::<Workload<DaemonSet>>(client, ns),
                            config(&cloudflared),
                        )
                    },
                    strip_workload,
                    generation.clone(),
                ));
            }
        }
        caches
    }
}

/// The namespaces of managed objects: the watched one (`None`: all), and the
/// cluster-resource namespace when it is not already covered.
pub fn child_namespaces(
    scope: &WatchScope,
    cluster_resource_namespace: &str,
) -> Vec<Option<String>> {
    match &scope.namespace {
        None => vec![None],
        Some(ns) if ns == cluster_resource_namespace => vec![Some(ns.clone())],
        Some(ns) => vec![
            Some(ns.clone()),
            Some(cluster_resource_namespace.to_string()),
        ],
    }
}

/// A workload whose checksum a reconciler of cftunnel's keeps: a Tunnel's or ClusterTunnel's
/// (the tunnel reconciler renders its config and checksum together) or an AccessTunnel's (the
/// service token's). They carry the label too, since they share the term's watch; the watcher
/// neither reads their ConfigMaps nor serializes them when a ConfigMap changes.
pub(crate) fn kept_by_cftunnel(meta: &ObjectMeta) -> bool {
    meta.owner_references.iter().flatten().any(|o| {
        o.controller == Some(true)
            && o.api_version.split('/').next() == Some(GROUP)
            && matches!(o.kind.as_str(), "Tunnel" | "ClusterTunnel" | "AccessTunnel")
    })
}

/// Labels and annotations of this prefix are cftunnel's; others are never read.
const ANNOTATION_PREFIX: &str = "cfargotunnel.com/";

/// Keeps what routes and admission read of a Service's metadata: identity, cftunnel's labels
/// and annotations (the expose labels, the route annotations); its ports are all the watch
/// decodes of the rest. A map left empty goes: an empty `BTreeMap` costs nothing, but one entry
/// allocates a node for eleven, about half a kilobyte per Service, and a cluster's Services
/// carry labels cftunnel never reads.
pub(crate) fn strip_service(service: &mut ServicePorts) {
    let meta = &mut service.metadata;
    for map in [&mut meta.labels, &mut meta.annotations] {
        if let Some(entries) = map.as_mut() {
            entries.retain(|k, _| k.starts_with(ANNOTATION_PREFIX));
            if entries.is_empty() {
                *map = None;
            }
        }
    }
    meta.owner_references = None;
}

/// Keeps what routes read of an Ingress: all but managed fields and annotations that are not
/// cftunnel's or the older class annotation. Its status stays: the status writer compares it.
pub(crate) fn strip_ingress(ingress: &mut Ingress) {
    let meta = &mut ingress.metadata;
    if let Some(annotations) = meta.annotations.as_mut() {
        annotations.retain(|k, _| {
            k.starts_with(ANNOTATION_PREFIX) || k == ANNOTATION_LEGACY_INGRESS_CLASS
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    use kube::ResourceExt;
    use std::collections::BTreeMap;

    #[test]
    fn a_stored_service_keeps_only_what_routes_read() {
        let service: ServicePorts = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web", "namespace": "shop",
                "annotations": {"cfargotunnel.com/fqdn": "a.example.com",
                    "kubectl.kubernetes.io/last-applied-configuration": "{…}"},
                "labels": {"cfargotunnel.com/expose-tunnel": "edge", "app": "web"},
                "ownerReferences": [{"apiVersion": "v1", "kind": "X", "name": "x", "uid": "u"}]},
            "spec": {"ports": [{"name": "http", "port": 80}], "clusterIP": "10.0.0.1",
                "selector": {"app": "web"}}
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        let mut stripped = service;
        strip_service(&mut stripped);
        let annotations = stripped.metadata.annotations.clone().unwrap_or_default();
        assert_eq!(
            annotations.keys().collect::<Vec<_>>(),
            vec!["cfargotunnel.com/fqdn"]
        );
        assert_eq!(
            stripped.labels().keys().collect::<Vec<_>>(),
            vec!["cfargotunnel.com/expose-tunnel"]
        );
        assert!(stripped.metadata.owner_references.is_none());
        assert_eq!(stripped.ports().len(), 1);
        let mut unlabelled = ServicePorts {
            metadata: ObjectMeta {
                labels: Some(BTreeMap::from([("app".to_string(), "web".to_string())])),
                annotations: Some(BTreeMap::from([("a".to_string(), "b".to_string())])),
                ..ObjectMeta::default()
            },
            ..ServicePorts::default()
        };
        strip_service(&mut unlabelled);
        assert!(unlabelled.metadata.labels.is_none() && unlabelled.metadata.annotations.is_none());
    }

    #[test]
    fn managed_objects_are_watched_once_per_namespace() {
        let all = WatchScope::default();
        assert_eq!(child_namespaces(&all, "cftunnel-tunnels"), vec![None]);
        let same = WatchScope {
            namespace: Some("t".into()),
            label_selector: None,
        };
        assert_eq!(child_namespaces(&same, "t"), vec![Some("t".to_string())]);
        assert_eq!(
            child_namespaces(&same, "c"),
            vec![Some("t".to_string()), Some("c".to_string())]
        );
    }

    fn owned_by(api_version: &str, kind: &str, controller: bool) -> ObjectMeta {
        ObjectMeta {
            owner_references: Some(vec![OwnerReference {
                api_version: api_version.into(),
                kind: kind.into(),
                name: "edge".into(),
                uid: "u1".into(),
                controller: Some(controller),
                ..OwnerReference::default()
            }]),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn workloads_of_cftunnels_kinds_are_left_to_their_reconcilers_and_the_rest_are_stamped() {
        let ours = "networking.cfargotunnel.com/v1alpha2";
        for kind in ["Tunnel", "ClusterTunnel", "AccessTunnel"] {
            assert!(kept_by_cftunnel(&owned_by(ours, kind, true)), "{kind}");
        }
        assert!(!kept_by_cftunnel(&ObjectMeta::default()));
        assert!(!kept_by_cftunnel(&owned_by(ours, "Tunnel", false)));
        assert!(!kept_by_cftunnel(&owned_by(
            "example.com/v1",
            "Tunnel",
            true
        )));
        assert!(!kept_by_cftunnel(&owned_by("apps/v1", "ReplicaSet", true)));
    }
}
