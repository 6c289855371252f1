//! Ingresses, HTTPRoutes and GRPCRoutes in `cftunnel validate`: judged by the route model
//! itself over every object given (tunnels, classes, Gateways, bindings, labelled Services,
//! Namespaces, ReferenceGrants; objects without a creation time count as created in input
//! order), so one is refused for what the reconciler would refuse to serve: an invalid field,
//! class parameters that name no tunnel, a tunnel that is not given or does not admit it, a
//! hostname an earlier object owns, a match or filter a tunnel cannot express. A backend
//! Service that is not given is not a violation (Services are often applied from elsewhere): an
//! HTTPRoute's unresolved backend is a warning.
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::decode::Decoded;
use super::world::WorldBuilder;
use crate::routes::gateway::status::{StatusInput, gateway_statuses};
use crate::routes::{SourceKind, compute_routes};
use crate::rules::zone_quota::check_hostname_count;
use crate::rules::{Verdict, Violation};

/// The verdict on each route source the model judges, by (kind, namespace, name).
pub(crate) fn model_verdicts<'a>(
    objects: impl IntoIterator<Item = &'a Decoded>,
    plain_services: impl IntoIterator<Item = Service>,
) -> BTreeMap<(SourceKind, String, String), Verdict> {
    let mut builder = WorldBuilder::default();
    for object in objects {
        builder.add(object);
    }
    for service in plain_services {
        let namespace = service.metadata.namespace.clone().unwrap_or_default();
        builder.add_service(service, &namespace);
    }
    let world = builder.finish();
    if world.ingresses.is_empty() && world.http_routes.is_empty() && world.grpc_routes.is_empty() {
        return BTreeMap::new();
    }
    let table = compute_routes(&world);
    let mut out = BTreeMap::new();
    for (source, status) in &table.sources {
        if source.kind != SourceKind::Ingress {
            continue;
        }
        let mut verdict = Verdict::default();
        for message in status.refusals() {
            verdict.violations.push(Violation::from_message(message));
        }
        check_hostname_count("spec.rules", table.dns_hostnames_of(source), &mut verdict);
        out.insert(
            (source.kind, source.namespace.clone(), source.name.clone()),
            verdict,
        );
    }
    // Routes: their parent statuses, as the reconciler would write them.
    let ids = BTreeMap::new();
    let statuses = gateway_statuses(
        &world,
        &table,
        &StatusInput {
            tunnel_ids: &ids,
            dns: &BTreeMap::new(),
            now: Time(jiff::Timestamp::UNIX_EPOCH),
            changed_routes_only: false,
        },
    );
    for ((kind, namespace, name), parents) in &statuses.routes {
        let mut verdict = Verdict::default();
        for condition in parents.iter().flat_map(|p| &p.conditions) {
            let message = condition.message.as_str();
            let failed = condition.status == "False" || condition.type_ == "PartiallyInvalid";
            if !failed || message.is_empty() {
                continue;
            }
            if condition.type_ == "ResolvedRefs" {
                if !verdict.warnings.iter().any(|w| w == message) {
                    verdict.warnings.push(message.to_string());
                }
            } else if !verdict.violations.iter().any(|v| v.message() == message) {
                verdict.violations.push(Violation::from_message(message));
            }
        }
        let hostnames: usize = table
            .sources
            .keys()
            .filter(|s| s.kind == *kind && s.namespace == *namespace && s.name == *name)
            .map(|s| table.dns_hostnames_of(s))
            .sum();
        check_hostname_count("spec.hostnames", hostnames, &mut verdict);
        out.insert((*kind, namespace.clone(), name.clone()), verdict);
    }
    out
}
