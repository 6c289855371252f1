//! An Ingress at admission: judged by the route model itself (its class and tunnel, its paths
//! and backends, every rule the reconciler applies), then each hostname it would take checked
//! against the claims of older objects in the admission view. An Ingress of another
//! controller's class, or of a class that does not exist, is not judged. A tunnel that does not
//! exist yet is not a refusal (it may be applied next), as for bindings.
use std::sync::Arc;

use k8s_openapi::api::networking::v1::Ingress;

use crate::routes::ingress::is_cftunnels;
use crate::routes::{ANY_HOST, RouteReason, RouteWorld, SourceKind, SourceRef, compute_routes};
use crate::rules::route::check_claim;
use crate::rules::zone_quota::check_hostname_count;
use crate::rules::{AdmissionView, Verdict, Violation};

pub fn validate(ingress: &Ingress, namespace: &str, view: &AdmissionView) -> Verdict {
    let mut v = Verdict::default();
    // Most Ingresses of a cluster are other controllers': answered before any copy is made.
    if !is_cftunnels(ingress, &view.ingress_classes) {
        return v;
    }
    let mut ingress = ingress.clone();
    ingress.metadata.namespace = Some(namespace.to_string());
    let source = SourceRef::of(SourceKind::Ingress, &ingress.metadata);
    let world = RouteWorld {
        tunnels: view.tunnels.clone(),
        namespace_labels: view.namespace_labels.clone(),
        ingresses: vec![Arc::new(ingress)],
        ingress_classes: view.ingress_classes.clone(),
        ..RouteWorld::default()
    };
    let table = compute_routes(&world);
    let Some(status) = table.sources.get(&source) else {
        return v;
    };
    if status.reason == RouteReason::TunnelNotFound {
        v.warn("spec.ingressClassName", status.message.clone());
        return v;
    }
    for message in status.refusals() {
        v.violations.push(Violation::from_message(message));
    }
    let (Some(tunnel), true) = (&status.tunnel, v.violations.is_empty()) else {
        return v;
    };
    let object = source.to_string();
    for entry in status.routes.iter().filter(|e| e.hostname != ANY_HOST) {
        let path = entry.path.as_deref().unwrap_or("");
        check_claim(
            "spec.rules",
            &entry.hostname,
            path,
            tunnel,
            &object,
            view,
            &mut v,
        );
    }
    v.violations.dedup();
    check_hostname_count("spec.rules", table.dns_hostnames_of(&source), &mut v);
    v
}
