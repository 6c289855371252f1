//! Validation of Services labelled for exposure (SPEC §1.4, §2.2 item 6): the binding rules,
//! applied to the annotations.
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Service;

use super::route::{Field, RouteInput, check_fields, check_ownership};
use super::verdict::Verdict;
use super::view::{AdmissionView, TunnelKind, admits};
use crate::api::names::{
    LABEL_EXPOSE_CLUSTER_TUNNEL, LABEL_EXPOSE_TUNNEL, service_annotations as ann,
};

/// The tunnel a Service asks to be exposed through, if it carries exactly one expose label.
pub fn exposure(labels: &BTreeMap<String, String>) -> Option<(TunnelKind, &str)> {
    match (
        labels.get(LABEL_EXPOSE_TUNNEL),
        labels.get(LABEL_EXPOSE_CLUSTER_TUNNEL),
    ) {
        (Some(t), None) => Some((TunnelKind::Tunnel, t.as_str())),
        (None, Some(t)) => Some((TunnelKind::ClusterTunnel, t.as_str())),
        _ => None,
    }
}

pub fn validate(service: &Service, namespace: &str, view: &AdmissionView) -> Verdict {
    let mut v = Verdict::default();
    let empty = BTreeMap::new();
    let labels = service.metadata.labels.as_ref().unwrap_or(&empty);
    let annotations = service.metadata.annotations.as_ref().unwrap_or(&empty);
    if labels.contains_key(LABEL_EXPOSE_TUNNEL) && labels.contains_key(LABEL_EXPOSE_CLUSTER_TUNNEL)
    {
        v.deny(
            "metadata.labels",
            format!("{LABEL_EXPOSE_TUNNEL} and {LABEL_EXPOSE_CLUSTER_TUNNEL} are both set; keep the one naming the tunnel to use"),
        );
        return v;
    }
    let Some((kind, tunnel_name)) = exposure(labels) else {
        return v;
    };
    let name = service.metadata.name.as_deref().unwrap_or("");
    let object = format!("Service {namespace}/{name}");
    let route = annotation_route(name, namespace, annotations);
    for key in [ann::NO_TLS_VERIFY, ann::HTTP2_ORIGIN, ann::DISABLE_DNS] {
        if let Some(value) = annotations.get(key)
            && !matches!(value.as_str(), "true" | "false")
        {
            v.deny(
                format!("metadata.annotations[{key}]"),
                format!("{value:?} is not a boolean; use \"true\" or \"false\""),
            );
        }
    }
    let tunnel = view.tunnel(kind, namespace, tunnel_name);
    if let Some(t) = tunnel
        && !admits(view, &t.allowed, &t.identity.namespace, namespace)
    {
        let label = if kind == TunnelKind::Tunnel {
            LABEL_EXPOSE_TUNNEL
        } else {
            LABEL_EXPOSE_CLUSTER_TUNNEL
        };
        v.deny(
            format!("metadata.labels[{label}]"),
            format!("{} does not admit routes from namespace {namespace:?} (allowedRoutes.namespaces); ask its owner to allow it, or use a tunnel of this namespace", t.identity),
        );
    }
    check_fields(&route, tunnel, &mut v);
    if let Some(t) = tunnel {
        check_ownership(&route, t, &object, view, &mut v);
    }
    v
}

/// The route the annotations declare, with `metadata.annotations[...]` field paths.
pub fn annotation_route<'a>(
    service: &'a str,
    namespace: &'a str,
    annotations: &'a BTreeMap<String, String>,
) -> RouteInput<'a> {
    let get = |key: &'static str| {
        annotations
            .get(key)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
            .map(|v| (Field::Annotation(key), v))
    };
    RouteInput {
        namespace,
        service,
        fqdns: annotations
            .get(ann::HOSTNAME)
            .map(|list| {
                list.split(',')
                    .map(str::trim)
                    .filter(|h| !h.is_empty())
                    .map(|h| (Field::Annotation(ann::HOSTNAME), h))
                    .collect()
            })
            .unwrap_or_default(),
        protocol: get(ann::PROTOCOL),
        path: get(ann::PATH),
        ca_pool: get(ann::CA_POOL),
        ..Default::default()
    }
}
