//! Validation of TunnelBinding (docs/design.md §2.2).
use std::collections::BTreeSet;

use super::route::{Field, PortRef, RouteInput, check_fields, check_ownership, deny_not_admitted};
use super::syntax::is_service_name;
use super::verdict::Verdict;
use super::view::{AdmissionView, admits};
use cftunnel_types::TunnelBinding;
use cftunnel_types::TunnelKind;
use cftunnel_types::binding::TunnelBindingSubject;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// All rules of a binding against the view; `namespace` is the binding's.
pub fn validate(binding: &TunnelBinding, namespace: &str, view: &AdmissionView) -> Verdict {
    let mut v = Verdict::default();
    let name = binding.metadata.name.as_deref().unwrap_or("");
    let object = format!("TunnelBinding {namespace}/{name}");
    let fields = &binding.spec;

    let kind = tunnel_ref_kind(&fields.tunnel_ref.kind, &mut v);
    let tunnel = kind.and_then(|k| view.tunnel(k, namespace, &fields.tunnel_ref.name));
    if let Some(t) = tunnel
        && !admits(view, &t.allowed, &t.identity.namespace, namespace)
    {
        deny_not_admitted("tunnelRef", t, namespace, &mut v);
    }
    check_subjects_present(&fields.subjects, &mut v);
    let mut seen = BTreeSet::new();
    let mut with_dns: BTreeSet<String> = BTreeSet::new();
    for (i, subject) in fields.subjects.iter().enumerate() {
        let mut route = subject_route(i, subject, namespace);
        route.dns_updates_disabled = fields.tunnel_ref.disable_dns_updates;
        check_subject_identity(i, subject, &mut v);
        check_fields(&route, tunnel, true, &mut v);
        if !route.dns_updates_disabled {
            with_dns.extend(
                route
                    .effective_fqdns(tunnel)
                    .into_iter()
                    .map(|(_, fqdn)| fqdn.to_ascii_lowercase()),
            );
        }
        if let Some(t) = tunnel {
            for (field, fqdn) in route.effective_fqdns(Some(t)) {
                let key = (fqdn.to_ascii_lowercase(), route.path_value());
                if !seen.insert(key) {
                    let field = match field {
                        Field::DefaultHostname => format!("subjects[{i}]"),
                        named => named.to_string(),
                    };
                    v.deny(field, format!("{fqdn} (path {:?}) is listed twice in this binding; keep one subject per hostname and path", route.path_value()));
                }
            }
            check_ownership(&route, t, &object, view, &mut v);
        }
    }
    super::zone_quota::check_hostname_count("subjects", with_dns.len(), &mut v);
    v
}

/// `tunnelRef.kind`, any case; an unknown kind is denied.
pub(crate) fn tunnel_ref_kind(kind: &str, v: &mut Verdict) -> Option<TunnelKind> {
    let parsed = TunnelKind::parse(kind);
    if parsed.is_none() {
        v.deny(
            "tunnelRef.kind",
            format!("{kind:?} is not a tunnel kind; use Tunnel (same namespace) or ClusterTunnel"),
        );
    }
    parsed
}

/// A binding routes at least one Service.
pub(crate) fn check_subjects_present(subjects: &[TunnelBindingSubject], v: &mut Verdict) {
    if subjects.is_empty() {
        v.deny(
            "subjects",
            "must list at least one Service; add {name: <service>}",
        );
    }
}

/// A subject names a Service by a valid name.
pub(crate) fn check_subject_identity(i: usize, subject: &TunnelBindingSubject, v: &mut Verdict) {
    if let Some(problem) = subject_kind_problem(&subject.kind) {
        v.deny(format!("subjects[{i}].kind"), problem);
    }
    if !is_service_name(&subject.name) {
        v.deny(
            format!("subjects[{i}].name"),
            format!("{:?} is not a valid Service name; use lowercase letters, digits and '-', starting with a letter", subject.name),
        );
    }
}

/// Why a subject's `kind` is refused, if it is: only exactly `Service`.
pub(crate) fn subject_kind_problem(kind: &str) -> Option<String> {
    (kind != "Service").then(|| format!("{kind:?} is not supported; only Service can be bound"))
}

/// The route a subject declares, with `subjects[i].spec.*` field paths.
pub(crate) fn subject_route<'a>(
    i: usize,
    subject: &'a TunnelBindingSubject,
    namespace: &'a str,
) -> RouteInput<'a> {
    let at = |name: &'static str| Field::Subject(i, name);
    let set = |name: &'static str, value: Option<&'a String>| {
        value
            .map(String::as_str)
            .filter(|s| !s.is_empty())
            .map(|s| (at(name), s))
    };
    let Some(spec) = subject.spec.as_ref() else {
        return RouteInput {
            namespace,
            service: &subject.name,
            ..Default::default()
        };
    };
    RouteInput {
        namespace,
        service: &subject.name,
        fqdns: set("fqdn", spec.fqdn.as_ref()).into_iter().collect(),
        protocol: set("protocol", spec.protocol.as_ref()),
        path: set("path", spec.path.as_ref()),
        target: set("target", spec.target.as_ref()),
        ca_pool: set("caPool", spec.ca_pool.as_ref()),
        proxy_address: set("proxyAddress", Some(&spec.proxy_address)),
        proxy_port: Some((at("proxyPort"), spec.proxy_port)),
        proxy_type: Some((at("proxyType"), spec.proxy_type.as_str())),
        durations: [
            ("connectTimeout", &spec.connect_timeout),
            ("tlsTimeout", &spec.tls_timeout),
            ("keepAliveTimeout", &spec.keep_alive_timeout),
        ]
        .into_iter()
        .filter_map(|(name, d)| d.as_deref().map(|d| (at(name), d)))
        .collect(),
        port: spec.port.as_ref().map(|port| {
            let port = match port {
                IntOrString::Int(n) => PortRef::Number(i64::from(*n)),
                IntOrString::String(s) => PortRef::parse(s),
            };
            (at("port"), port)
        }),
        no_tls_verify: spec.no_tls_verify,
        http2_origin: spec.http2_origin,
        http_host_header: set("httpHostHeader", spec.http_host_header.as_ref()),
        origin_server_name: set("originServerName", spec.origin_server_name.as_ref()),
        dns_updates_disabled: false,
    }
}
