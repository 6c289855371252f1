//! Validation of TunnelBinding (SPEC §2.2).
use std::collections::BTreeSet;

use super::route::{RouteInput, check_fields, check_ownership};
use super::syntax::is_service_name;
use super::verdict::Verdict;
use super::view::{AdmissionView, TunnelKind, admits};
use crate::api::TunnelBinding;
use crate::api::binding::TunnelBindingSubject;

/// All rules of a binding against the view; `namespace` is the binding's.
pub fn validate(binding: &TunnelBinding, namespace: &str, view: &AdmissionView) -> Verdict {
    let mut v = Verdict::default();
    let name = binding.metadata.name.as_deref().unwrap_or("");
    let object = format!("TunnelBinding {namespace}/{name}");
    let fields = &binding.spec;

    let kind = TunnelKind::parse(&fields.tunnel_ref.kind);
    if kind.is_none() {
        v.deny(
            "tunnelRef.kind",
            format!(
                "{:?} is not a tunnel kind; use Tunnel (same namespace) or ClusterTunnel",
                fields.tunnel_ref.kind
            ),
        );
    }
    let tunnel = kind.and_then(|k| view.tunnel(k, namespace, &fields.tunnel_ref.name));
    if let Some(t) = tunnel
        && !admits(view, &t.allowed, &t.identity.namespace, namespace)
    {
        v.deny(
            "tunnelRef",
            format!("{} does not admit routes from namespace {namespace:?} (allowedRoutes.namespaces); ask its owner to allow it, or use a tunnel of this namespace", t.identity),
        );
    }
    if fields.subjects.is_empty() {
        v.deny(
            "subjects",
            "must list at least one Service; add {name: <service>}",
        );
    }
    let mut seen = BTreeSet::new();
    for (i, subject) in fields.subjects.iter().enumerate() {
        let route = subject_route(i, subject, namespace);
        check_subject_identity(i, subject, &mut v);
        check_fields(&route, tunnel, &mut v);
        if let Some(t) = tunnel {
            for (field, fqdn) in route.effective_fqdns(Some(t)) {
                let key = (fqdn.to_ascii_lowercase(), route.path_value().to_string());
                if !seen.insert(key) {
                    let field = if field.is_empty() {
                        format!("subjects[{i}]")
                    } else {
                        field
                    };
                    v.deny(field, format!("{fqdn} (path {:?}) is listed twice in this binding; keep one subject per hostname and path", route.path_value()));
                }
            }
            check_ownership(&route, t, &object, view, &mut v);
        }
    }
    v
}

fn check_subject_identity(i: usize, subject: &TunnelBindingSubject, v: &mut Verdict) {
    if subject.kind != "Service" {
        v.deny(
            format!("subjects[{i}].kind"),
            format!(
                "{:?} is not supported; only Service can be bound",
                subject.kind
            ),
        );
    }
    if !is_service_name(&subject.name) {
        v.deny(
            format!("subjects[{i}].name"),
            format!("{:?} is not a valid Service name; use lowercase letters, digits and '-', starting with a letter", subject.name),
        );
    }
}

/// The route a subject declares, with `subjects[i].spec.*` field paths.
pub fn subject_route(i: usize, subject: &TunnelBindingSubject, namespace: &str) -> RouteInput {
    let p = |f: &str| format!("subjects[{i}].spec.{f}");
    let some = |f: &str, value: &Option<String>| value.clone().map(|x| (p(f), x));
    let spec = subject.spec.clone().unwrap_or_default();
    RouteInput {
        namespace: namespace.to_string(),
        service: subject.name.clone(),
        fqdns: spec
            .fqdn
            .iter()
            .filter(|f| !f.is_empty())
            .map(|f| (p("fqdn"), f.clone()))
            .collect(),
        protocol: some("protocol", &spec.protocol.filter(|s| !s.is_empty())),
        path: some("path", &spec.path.filter(|s| !s.is_empty())),
        target: some("target", &spec.target.filter(|s| !s.is_empty())),
        ca_pool: some("caPool", &spec.ca_pool.filter(|s| !s.is_empty())),
        proxy_address: some(
            "proxyAddress",
            &Some(spec.proxy_address.clone()).filter(|s| !s.is_empty()),
        ),
        proxy_port: Some((p("proxyPort"), spec.proxy_port)),
        proxy_type: Some((p("proxyType"), spec.proxy_type.clone())),
        durations: [
            ("connectTimeout", &spec.connect_timeout),
            ("tlsTimeout", &spec.tls_timeout),
            ("keepAliveTimeout", &spec.keep_alive_timeout),
        ]
        .into_iter()
        .filter_map(|(f, d)| d.clone().map(|d| (p(f), d)))
        .collect(),
    }
}
