//! The route world built from input documents, as `cftunnel render` and `cftunnel validate`
//! read them.
//!
//! Objects without `metadata.creationTimestamp` count as created in input order, before any
//! object that carries one: the earlier one owns a contested hostname.
use std::sync::Arc;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use super::decode::{Decoded, GatewayObject};
use crate::routes::RouteWorld;
use crate::rules::facts::tunnel_facts;

/// Collects the route world document by document.
#[derive(Default)]
pub struct WorldBuilder {
    world: RouteWorld,
    /// Objects given an input-order creation time so far.
    undated: i64,
}

impl WorldBuilder {
    /// Learns what `decoded` tells about routes: a tunnel, a binding, a labelled Service, an
    /// Ingress or IngressClass, or a Namespace's labels.
    pub fn add(&mut self, decoded: &Decoded) {
        match decoded {
            Decoded::Tunnel(t) => {
                self.world
                    .tunnels
                    .push(tunnel_facts(t.kind, &t.namespace, &t.name, &t.spec))
            }
            Decoded::Binding { namespace, binding } => {
                let mut binding = binding.clone();
                self.date(&mut binding.metadata, namespace);
                self.world.bindings.push(Arc::new(binding));
            }
            Decoded::Service { namespace, service } => self.add_service(service.clone(), namespace),
            Decoded::Ingress { namespace, ingress } => {
                let mut ingress = ingress.clone();
                self.date(&mut ingress.metadata, namespace);
                self.world.ingresses.push(Arc::new(ingress));
            }
            Decoded::IngressClass(class) => {
                self.world.ingress_classes.push(Arc::new(class.clone()))
            }
            Decoded::Gateway(object) => self.add_gateway(object),
            // An AccessTunnel declares no route.
            Decoded::Access(_) => {}
            // An AccessPolicy protects routes, it declares none.
            Decoded::AccessPolicy { .. } => {}
            // Private routes are not routes of a tunnel's ingress rules.
            Decoded::NetworkRoute { .. } | Decoded::VirtualNetwork(_) => {}
            Decoded::Namespace { name, labels } => {
                self.world
                    .namespace_labels
                    .insert(name.clone(), labels.clone());
            }
        }
    }

    fn add_gateway(&mut self, object: &GatewayObject) {
        let world = &mut self.world;
        match object {
            GatewayObject::Class(c) => world.gateway_classes.push(Arc::new(c.clone())),
            GatewayObject::Gateway(g) => world.gateways.push(Arc::new(g.clone())),
            GatewayObject::HTTPRoute(r) => {
                let mut r = r.clone();
                let ns = r.metadata.namespace.clone().unwrap_or_default();
                self.date(&mut r.metadata, &ns);
                self.world.http_routes.push(Arc::new(r));
            }
            GatewayObject::GRPCRoute(r) => {
                let mut r = r.clone();
                let ns = r.metadata.namespace.clone().unwrap_or_default();
                self.date(&mut r.metadata, &ns);
                self.world.grpc_routes.push(Arc::new(r));
            }
            GatewayObject::ReferenceGrant(g) => world.reference_grants.push(Arc::new(g.clone())),
        }
    }

    /// A Service that binding subjects may name (labelled ones come through [`Self::add`]).
    pub fn add_service(&mut self, mut service: Service, namespace: &str) {
        self.date(&mut service.metadata, namespace);
        self.world.services.push(Arc::new(service.into()));
    }

    /// Fills in the namespace and, when missing, an input-order creation time.
    fn date(&mut self, metadata: &mut ObjectMeta, namespace: &str) {
        metadata.namespace = Some(namespace.to_string());
        if metadata.creation_timestamp.is_none() {
            let at =
                jiff::Timestamp::from_second(self.undated).unwrap_or(jiff::Timestamp::UNIX_EPOCH);
            metadata.creation_timestamp = Some(Time(at));
            self.undated += 1;
        }
    }

    /// The world, with later copies of the same object replacing earlier ones (as a second
    /// `kubectl apply` would).
    pub fn finish(mut self) -> RouteWorld {
        fn dedup<T>(items: &mut Vec<Arc<T>>, key: impl Fn(&T) -> (Option<String>, Option<String>)) {
            let mut seen = std::collections::BTreeSet::new();
            let mut kept: Vec<Arc<T>> = Vec::with_capacity(items.len());
            for item in items.drain(..).rev() {
                if seen.insert(key(&item)) {
                    kept.push(item);
                }
            }
            kept.reverse();
            *items = kept;
        }
        dedup(&mut self.world.bindings, |b| {
            (b.metadata.namespace.clone(), b.metadata.name.clone())
        });
        dedup(&mut self.world.services, |s| {
            (s.metadata.namespace.clone(), s.metadata.name.clone())
        });
        dedup(&mut self.world.ingresses, |i| {
            (i.metadata.namespace.clone(), i.metadata.name.clone())
        });
        dedup(&mut self.world.ingress_classes, |c| {
            (None, c.metadata.name.clone())
        });
        let mut seen = std::collections::BTreeSet::new();
        self.world.tunnels.reverse();
        self.world
            .tunnels
            .retain(|t| seen.insert(t.identity.clone()));
        self.world.tunnels.reverse();
        crate::rules::facts::link_account_zones(&mut self.world.tunnels);
        self.world
    }
}
