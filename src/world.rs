//! The world the route pipeline reads: the process-wide watch caches ([`crate::caches`]) as the
//! policy crate's [`RouteWorld`] (tunnels, bindings, Services stripped to ports, route labels and
//! annotations, namespace labels, Ingresses, the Gateway API kinds), the tunnel records DNS and
//! statuses need, and a change signal. The route reconciler computes from it, the status writer
//! and the Access reconciler read the objects they write.
use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::{Resource, ResourceExt};
use tokio::sync::watch;

use crate::caches::ProcessCaches;
use crate::dns_sync::TunnelRecord;
use crate::term::TunnelKindAdapter;
use cftunnel_policy::routes::RouteWorld;
use cftunnel_policy::rules::facts::tunnel_facts;
use cftunnel_types::TunnelBinding;
use cftunnel_types::{TunnelIdentity, TunnelKind};

/// A reading of the process-wide caches, with a change signal.
pub struct RouteCache {
    caches: ProcessCaches,
    changes: watch::Receiver<u64>,
    cluster_resource_namespace: String,
}

impl RouteCache {
    /// Reads `caches`; [`ProcessCaches::synced`] says when they have listed.
    pub fn new(caches: &ProcessCaches, cluster_resource_namespace: &str) -> RouteCache {
        RouteCache {
            caches: caches.clone(),
            changes: caches.subscribe(),
            cluster_resource_namespace: cluster_resource_namespace.to_string(),
        }
    }

    /// Waits for the next watch event (returns at once if one arrived since the last call).
    pub async fn changed(&mut self) {
        if self.changes.changed().await.is_err() {
            // Every watch task ended (the runtime is shutting down): never wake again.
            std::future::pending::<()>().await;
        }
    }

    /// Marks everything seen so far as handled.
    pub(crate) fn mark_seen(&mut self) {
        self.changes.borrow_and_update();
    }

    /// The snapshot routes are computed from. Objects being deleted are left out: a deleted
    /// binding's routes and a deleted tunnel's routes go away at once.
    pub fn world(&self) -> RouteWorld {
        let mut tunnels = Vec::new();
        for t in self
            .caches
            .tunnels
            .store()
            .state()
            .iter()
            .filter(|t| !is_deleting(&***t))
        {
            let ns = t.namespace().unwrap_or_default();
            tunnels.push(tunnel_facts(
                TunnelKind::Tunnel,
                &ns,
                &t.name_any(),
                &t.spec,
            ));
        }
        for t in self
            .caches
            .cluster_tunnels
            .store()
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
        cftunnel_policy::rules::facts::link_account_zones(&mut tunnels);
        let namespace_labels: BTreeMap<String, BTreeMap<String, String>> = self
            .caches
            .namespaces
            .store()
            .state()
            .iter()
            .map(|n| (n.name_any(), n.labels().clone()))
            .collect();
        let mut world = RouteWorld {
            tunnels,
            namespace_labels,
            bindings: self
                .caches
                .bindings
                .store()
                .state()
                .into_iter()
                .filter(|b| !is_deleting(&**b))
                .collect(),
            services: self.caches.services.store().state(),
            ingresses: self
                .caches
                .ingresses
                .store()
                .state()
                .into_iter()
                .filter(|i| !is_deleting(&**i))
                .collect(),
            ingress_classes: self.caches.ingress_classes.store().state(),
            ..RouteWorld::default()
        };
        if let Some(gateway) = self.caches.gateway_api.caches() {
            world.gateway_classes = gateway.classes.store().state();
            world.gateways = live(gateway.gateways.store().state());
            world.http_routes = live(gateway.http_routes.store().state());
            if let Some(grpc) = &gateway.grpc_routes {
                world.grpc_routes = live(grpc.store().state());
            }
            if let Some(grants) = &gateway.reference_grants {
                world.reference_grants = grants.store().state();
            }
        }
        world
    }

    /// A digest of what routes are computed from, so a wake that changed none of it (a status
    /// written, a tunnel's id recorded) computes nothing. Objects whose status cftunnel writes
    /// (bindings, Ingresses, the Gateway API kinds) count by what routes read of them: identity,
    /// `generation` (the API server moves it on every change outside `metadata` and `status`),
    /// labels, annotations and whether they are being deleted; tunnels the same without labels
    /// and annotations (routes read only their spec). The others (Services,
    /// namespaces, IngressClasses, ReferenceGrants) count by `resourceVersion`: any change.
    /// Independent of the stores' order.
    pub(crate) fn route_inputs(&self) -> u64 {
        let mut digest = Digest::default();
        digest.tunnels("Tunnel", self.caches.tunnels.store().state());
        digest.tunnels("ClusterTunnel", self.caches.cluster_tunnels.store().state());
        digest.specs("TunnelBinding", self.caches.bindings.store().state());
        digest.specs("Ingress", self.caches.ingresses.store().state());
        digest.versions("Service", self.caches.services.store().state());
        digest.versions("Namespace", self.caches.namespaces.store().state());
        digest.versions("IngressClass", self.caches.ingress_classes.store().state());
        if let Some(gateway) = self.caches.gateway_api.caches() {
            digest.specs("GatewayClass", gateway.classes.store().state());
            digest.specs("Gateway", gateway.gateways.store().state());
            digest.specs("HTTPRoute", gateway.http_routes.store().state());
            if let Some(grpc) = &gateway.grpc_routes {
                digest.specs("GRPCRoute", grpc.store().state());
            }
            if let Some(grants) = &gateway.reference_grants {
                digest.versions("ReferenceGrant", grants.store().state());
            }
        }
        digest.finish()
    }

    /// The tunnels routes would be computed for now: every one not being deleted.
    pub(crate) fn live_tunnels(&self) -> Vec<TunnelIdentity> {
        let tunnels = self.caches.tunnels.store().state();
        let cluster_tunnels = self.caches.cluster_tunnels.store().state();
        tunnels
            .iter()
            .filter(|t| !is_deleting(&***t))
            .map(|t| t.route_identity())
            .chain(
                cluster_tunnels
                    .iter()
                    .filter(|t| !is_deleting(&***t))
                    .map(|t| t.route_identity()),
            )
            .collect()
    }

    /// Every tunnel object, with what DNS needs.
    pub(crate) fn tunnel_records(&self) -> Vec<TunnelRecord> {
        let mut out = Vec::new();
        for t in self.caches.tunnels.store().state() {
            out.push(TunnelRecord::new(
                t.route_identity(),
                t.namespace().unwrap_or_default(),
                &t.spec.cloudflare,
                t.status.as_ref(),
                is_deleting(&*t),
            ));
        }
        for t in self.caches.cluster_tunnels.store().state() {
            out.push(TunnelRecord::new(
                t.route_identity(),
                self.cluster_resource_namespace.clone(),
                &t.spec.cloudflare,
                t.status.as_ref(),
                is_deleting(&*t),
            ));
        }
        out
    }

    /// Every Ingress (the route table says which are cftunnel's).
    pub(crate) fn ingresses(&self) -> Vec<Arc<k8s_openapi::api::networking::v1::Ingress>> {
        self.caches.ingresses.store().state()
    }

    /// Whether any GatewayClass is known (Gateway API statuses are written only then).
    pub(crate) fn has_gateway_classes(&self) -> bool {
        self.caches
            .gateway_api
            .caches()
            .is_some_and(|gateway| !gateway.classes.store().state().is_empty())
    }

    /// Every TunnelBinding, those being deleted included.
    pub fn bindings(&self) -> Vec<Arc<TunnelBinding>> {
        self.caches.bindings.store().state()
    }
}

/// An order-independent digest of objects: the sum of one hash per object, and their count.
#[derive(Default)]
struct Digest {
    sum: u64,
    count: u64,
}

impl Digest {
    /// Adds each object by its kind and identity, and what `read` hashes of its metadata.
    fn each<K: Resource>(
        &mut self,
        kind: &str,
        objects: Vec<Arc<K>>,
        read: impl Fn(&ObjectMeta, &mut DefaultHasher),
    ) {
        for object in objects {
            let meta = object.meta();
            let mut hasher = DefaultHasher::new();
            (kind, &meta.namespace, &meta.name, &meta.uid).hash(&mut hasher);
            read(meta, &mut hasher);
            self.sum = self.sum.wrapping_add(hasher.finish());
            self.count += 1;
        }
    }

    /// Objects by what routes read of those whose status cftunnel writes.
    fn specs<K: Resource>(&mut self, kind: &str, objects: Vec<Arc<K>>) {
        self.each(kind, objects, |meta, hasher| {
            let deleting = meta.deletion_timestamp.is_some();
            (meta.generation, deleting, &meta.labels, &meta.annotations).hash(hasher);
        });
    }

    /// Tunnels by their spec alone (routes read nothing else of them): the labels and
    /// annotations their reconciler writes (the tunnel id's label on each) compute nothing.
    fn tunnels<K: Resource>(&mut self, kind: &str, objects: Vec<Arc<K>>) {
        self.each(kind, objects, |meta, hasher| {
            (meta.generation, meta.deletion_timestamp.is_some()).hash(hasher);
        });
    }

    /// Objects by their version: any change counts.
    fn versions<K: Resource>(&mut self, kind: &str, objects: Vec<Arc<K>>) {
        self.each(kind, objects, |meta, hasher| {
            meta.resource_version.hash(hasher)
        });
    }

    fn finish(&self) -> u64 {
        let mut hasher = DefaultHasher::new();
        (self.sum, self.count).hash(&mut hasher);
        hasher.finish()
    }
}

/// The objects not being deleted: a deleted route's rules go at once.
fn live<K: Resource>(objects: Vec<Arc<K>>) -> Vec<Arc<K>> {
    objects.into_iter().filter(|o| !is_deleting(&**o)).collect()
}

fn is_deleting<K: Resource>(object: &K) -> bool {
    object.meta().deletion_timestamp.is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use cftunnel_types::Tunnel;

    fn tunnel(name: &str, generation: i64, labels: serde_json::Value) -> Arc<Tunnel> {
        let object = serde_json::json!({
            "apiVersion": "networking.cfargotunnel.com/v1alpha2",
            "kind": "Tunnel",
            "metadata": {"name": name, "namespace": "shop", "uid": name, "generation": generation,
                "labels": labels},
            "spec": {"cloudflare": {"domain": "example.com", "secret": "cf"},
                "newTunnel": {"name": name}},
        });
        Arc::new(serde_json::from_value(object).unwrap_or_else(|e| panic!("{e}")))
    }

    fn digest_of(f: impl FnOnce(&mut Digest)) -> u64 {
        let mut digest = Digest::default();
        f(&mut digest);
        digest.finish()
    }

    #[test]
    fn the_digest_ignores_order_and_a_tunnels_labels_but_not_its_generation() {
        let (a, b) = (tunnel("a", 1, json_labels()), tunnel("b", 1, json_labels()));
        let both = digest_of(|d| d.tunnels("Tunnel", vec![a.clone(), b.clone()]));
        assert_eq!(
            both,
            digest_of(|d| d.tunnels("Tunnel", vec![b.clone(), a.clone()]))
        );
        // The tunnel id's label, written by its reconciler: no route changes.
        let labelled = tunnel("a", 1, serde_json::json!({"cfargotunnel.com/id": "x"}));
        assert_eq!(
            both,
            digest_of(|d| d.tunnels("Tunnel", vec![labelled, b.clone()]))
        );
        // A spec change moves the generation.
        let edited = tunnel("a", 2, json_labels());
        assert_ne!(
            both,
            digest_of(|d| d.tunnels("Tunnel", vec![edited, b.clone()]))
        );
        // One fewer.
        assert_ne!(both, digest_of(|d| d.tunnels("Tunnel", vec![b.clone()])));
        // Objects read by their labels (bindings, routes) do count a label.
        let with = digest_of(|d| d.specs("Tunnel", vec![a.clone()]));
        let relabelled = tunnel("a", 1, serde_json::json!({"team": "x"}));
        assert_ne!(with, digest_of(|d| d.specs("Tunnel", vec![relabelled])));
    }

    fn json_labels() -> serde_json::Value {
        serde_json::json!({})
    }
}
