//! Ingresses in `cftunnel validate`: judged by the route model itself over every object given
//! (tunnels, IngressClasses, bindings, labelled Services, Namespaces), the objects counting as
//! created in input order, so an Ingress is refused for what the reconciler would refuse to
//! serve: an invalid field, class parameters that name no tunnel, a tunnel that is not given or
//! does not admit its namespace, a hostname an earlier object owns. A missing Service is not a
//! violation: Services are often applied from elsewhere (the route answers 404 until it exists).
use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use super::decode::Decoded;
use super::view::tunnel_facts;
use crate::routes::{RouteWorld, SourceKind, compute_routes};
use crate::rules::{Verdict, Violation};

/// The verdict on each Ingress of cftunnel's classes, by (namespace, name).
pub(crate) fn ingress_verdicts<'a>(
    objects: impl IntoIterator<Item = &'a Decoded>,
) -> BTreeMap<(String, String), Verdict> {
    let mut world = RouteWorld::default();
    let mut order = 0;
    let mut dated = |metadata: &mut ObjectMeta| {
        let at = jiff::Timestamp::from_second(order).unwrap_or(jiff::Timestamp::UNIX_EPOCH);
        metadata.creation_timestamp = Some(Time(at));
        order += 1;
    };
    for object in objects {
        match object {
            Decoded::Tunnel(t) => world.tunnels.push(tunnel_facts(t)),
            Decoded::Namespace { name, labels } => {
                world.namespace_labels.insert(name.clone(), labels.clone());
            }
            Decoded::Binding { namespace, binding } => {
                let mut binding = binding.clone();
                binding.metadata.namespace = Some(namespace.clone());
                dated(&mut binding.metadata);
                world.bindings.push(Arc::new(binding));
            }
            Decoded::Service { namespace, service } => {
                let mut service = service.clone();
                service.metadata.namespace = Some(namespace.clone());
                dated(&mut service.metadata);
                world.services.push(Arc::new(service));
            }
            Decoded::Ingress { ingress, .. } => {
                let mut ingress = ingress.clone();
                dated(&mut ingress.metadata);
                world.ingresses.push(Arc::new(ingress));
            }
            Decoded::IngressClass(class) => world.ingress_classes.push(Arc::new(class.clone())),
            Decoded::Access(_) => {}
        }
    }
    if world.ingresses.is_empty() {
        return BTreeMap::new();
    }
    crate::rules::facts::link_account_zones(&mut world.tunnels);
    let table = compute_routes(&world);
    let mut out = BTreeMap::new();
    for (source, status) in &table.sources {
        if source.kind != SourceKind::Ingress {
            continue;
        }
        let mut verdict = Verdict::default();
        let mut messages: Vec<&str> = status
            .routes
            .iter()
            .filter(|e| !e.reason.is_served() && !e.message.is_empty())
            .map(|e| e.message.as_str())
            .collect();
        if messages.is_empty() && !status.reason.is_served() {
            messages.push(&status.message);
        }
        messages.dedup();
        for message in messages {
            verdict.violations.push(Violation::from_message(message));
        }
        out.insert((source.namespace.clone(), source.name.clone()), verdict);
    }
    out
}
