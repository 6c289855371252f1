//! Validation of Services labelled for exposure (docs/design.md §1.4, §2.2 item 6): the binding rules,
//! applied to the annotations.
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Service;

use super::route::{Field, PortRef, RouteInput, check_fields, check_ownership, deny_not_admitted};
use super::verdict::Verdict;
use super::view::{AdmissionView, admits};
use cftunnel_types::TunnelKind;
use cftunnel_types::names::{
    LABEL_EXPOSE_CLUSTER_TUNNEL, LABEL_EXPOSE_TUNNEL, service_annotations as ann,
};

/// The tunnel a Service asks to be exposed through, if it carries exactly one expose label.
pub(crate) fn exposure(labels: &BTreeMap<String, String>) -> Option<(TunnelKind, &str)> {
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
    check_boolean_annotations(annotations, &mut v);
    let tunnel = view.tunnel(kind, namespace, tunnel_name);
    if let Some(t) = tunnel
        && !admits(view, &t.allowed, &t.identity.namespace, namespace)
    {
        let label = if kind == TunnelKind::Tunnel {
            LABEL_EXPOSE_TUNNEL
        } else {
            LABEL_EXPOSE_CLUSTER_TUNNEL
        };
        deny_not_admitted(format!("metadata.labels[{label}]"), t, namespace, &mut v);
    }
    check_fields(&route, tunnel, true, &mut v);
    if let Some(t) = tunnel {
        check_ownership(&route, t, &object, view, &mut v);
    }
    v
}

/// The annotations read as booleans must say `true` or `false`.
pub(crate) fn check_boolean_annotations(annotations: &BTreeMap<String, String>, v: &mut Verdict) {
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
}

/// Is the boolean annotation `key` set to `true`? (Anything else is refused by
/// [`check_boolean_annotations`].)
pub(crate) fn annotation_is_true(annotations: &BTreeMap<String, String>, key: &str) -> bool {
    annotations.get(key).is_some_and(|v| v == "true")
}

/// The route the annotations declare, with `metadata.annotations[...]` field paths.
pub(crate) fn annotation_route<'a>(
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
        port: get(ann::PORT).map(|(field, port)| (field, PortRef::parse(port))),
        no_tls_verify: annotation_is_true(annotations, ann::NO_TLS_VERIFY),
        http2_origin: annotation_is_true(annotations, ann::HTTP2_ORIGIN),
        http_host_header: get(ann::HTTP_HOST_HEADER),
        origin_server_name: get(ann::ORIGIN_SERVER_NAME),
        dns_updates_disabled: annotation_is_true(annotations, ann::DISABLE_DNS),
        ..Default::default()
    }
}
