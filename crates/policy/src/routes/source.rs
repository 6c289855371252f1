//! TunnelBindings and labelled Services as route sources: the declared routes (read by the very
//! functions admission uses), the tunnel they name and the field paths messages point at.
use std::collections::BTreeMap;
use std::sync::Arc;

use super::path::typed_path;
use super::route::PathKind;
use super::world::{Age, SourceKind, SourceRef};
use crate::rules::facts::referenced;
use crate::rules::route::{self, Field, RouteInput};
use crate::rules::{Verdict, Violation, binding, service};
use cftunnel_types::TunnelIdentity;
use cftunnel_types::TunnelKind;
use cftunnel_types::binding::TunnelBindingSubject;
use cftunnel_types::names::{
    LABEL_EXPOSE_CLUSTER_TUNNEL, LABEL_EXPOSE_TUNNEL, service_annotations as ann,
};
use cftunnel_types::{ServicePorts, TunnelBinding};

/// One object that declares routes.
pub(super) struct Source<'w> {
    pub reference: Arc<SourceRef>,
    pub age: Age,
    /// `None` when `tunnelRef.kind` is not a tunnel kind (a problem in `problems`).
    pub tunnel: Option<TunnelIdentity>,
    /// Where the tunnel is named, for messages.
    pub tunnel_field: String,
    /// The namespace the tunnel's `allowedRoutes` is asked about when it is not the source's
    /// own: a route attached to a Gateway uses the tunnel through the Gateway's namespace.
    pub tunnel_user_namespace: Option<String>,
    pub disable_dns: bool,
    /// Problems of the object as a whole (tunnel kind, no subjects).
    pub problems: Verdict,
    pub routes: Vec<Declared<'w>>,
}

/// One route a source declares: a binding subject, or a labelled Service's annotations.
pub(super) struct Declared<'w> {
    pub input: RouteInput<'w>,
    /// The regex of the path match (`input.path` as written, or a typed match's), `None` for
    /// every path.
    pub path: Option<String>,
    pub path_kind: PathKind,
    /// The route matches every host ([`super::ANY_HOST`]): an Ingress rule without `host`, its
    /// `defaultBackend`. `input.fqdns` is then empty and no default hostname applies.
    pub any_host: bool,
    /// Field-level problems found before the tunnel is known (subject kind and name, booleans).
    pub problems: Verdict,
    /// What admission refuses today but the Go operator served, and how the route is served
    /// instead (see [`legacy_subject`]); such a route is `LegacyRoute`.
    pub legacy: Vec<String>,
    /// The Service routed to, when it exists.
    pub service: Option<&'w ServicePorts>,
    /// Names the source in conflict messages, e.g. `TunnelBinding shop/web (subject web)`.
    pub owner: String,
    /// Where the hostname is (or would be) written: `subjects[0].spec.fqdn`, or the annotation.
    pub fqdn_field: String,
    /// Where the Service is named.
    pub service_field: String,
    /// Where a port is (or would be) chosen.
    pub port_field: String,
}

/// The Services by namespace and name, for subjects to find theirs.
pub(super) type ServiceIndex<'w> = BTreeMap<(&'w str, &'w str), &'w ServicePorts>;

pub(super) fn from_binding<'w>(
    binding: &'w TunnelBinding,
    services: &ServiceIndex<'w>,
) -> Source<'w> {
    let reference = Arc::new(SourceRef::of(SourceKind::TunnelBinding, &binding.metadata));
    let namespace = binding.metadata.namespace.as_deref().unwrap_or("");
    let fields = &binding.spec;
    let mut problems = Verdict::default();
    let kind = binding::tunnel_ref_kind(&fields.tunnel_ref.kind, &mut problems);
    binding::check_subjects_present(&fields.subjects, &mut problems);
    let routes = fields
        .subjects
        .iter()
        .enumerate()
        .map(|(i, subject)| {
            let mut subject_problems = Verdict::default();
            binding::check_subject_identity(i, subject, &mut subject_problems);
            let mut input = RouteInput {
                dns_updates_disabled: fields.tunnel_ref.disable_dns_updates,
                ..binding::subject_route(i, subject, namespace)
            };
            let legacy = legacy_subject(i, subject, &mut input, &mut subject_problems);
            Declared {
                path: typed_path(PathKind::Regex, input.path_value()),
                path_kind: PathKind::Regex,
                any_host: false,
                input,
                problems: subject_problems,
                legacy,
                service: services.get(&(namespace, subject.name.as_str())).copied(),
                owner: format!("{reference} (subject {})", subject.name),
                fqdn_field: Field::Subject(i, "fqdn").to_string(),
                service_field: format!("subjects[{i}].name"),
                port_field: Field::Subject(i, "port").to_string(),
            }
        })
        .collect();
    Source {
        age: Age::of(&reference, &binding.metadata),
        tunnel: kind.map(|k| referenced(k, namespace, &fields.tunnel_ref.name)),
        tunnel_field: "tunnelRef".into(),
        tunnel_user_namespace: None,
        disable_dns: fields.tunnel_ref.disable_dns_updates,
        problems,
        routes,
        reference,
    }
}

/// Ratcheting of stored bindings: what the Go operator accepted and routed, and admission refuses
/// today, is served the Go operator's way instead of refused, each with a note naming the field,
/// today's refusal and what is served. New applies are still refused (admission runs its own
/// rules); only objects already stored reach the route model with these shapes.
/// - a `protocol` that is not one of the lowercase names: the Go operator looked it up
///   case-sensitively and, when unknown, inferred the protocol from the Service port; so is it here.
/// - a subject `kind` that is `Service` in another case: the Go operator never read the subject
///   kind and always routed the Service of that name.
fn legacy_subject(
    i: usize,
    subject: &TunnelBindingSubject,
    input: &mut RouteInput<'_>,
    problems: &mut Verdict,
) -> Vec<String> {
    let mut notes = Vec::new();
    if let Some(problem) = binding::subject_kind_problem(&subject.kind)
        && subject.kind.eq_ignore_ascii_case("service")
    {
        let field = format!("subjects[{i}].kind");
        let refusal = Violation::new(&field, &problem);
        problems.violations.retain(|v| *v != refusal);
        notes.push(format!(
            "{refusal} (refused if applied today; routed to the Service, as the Go operator did)"
        ));
    }
    if let Some((field, protocol)) = input.protocol
        && let Some(problem) = route::protocol_problem(protocol)
    {
        input.protocol = None;
        notes.push(format!(
            "{field}: {problem} (refused if applied today; routed with the protocol inferred from the Service port, as the Go operator did)"
        ));
    }
    notes
}

/// The source a Service is, when it carries exactly one expose label. (Both labels at once is
/// refused by admission and routes nothing.)
pub(super) fn from_service(svc: &ServicePorts) -> Option<Source<'_>> {
    let labels = svc.metadata.labels.as_ref()?;
    let (kind, tunnel_name) = service::exposure(labels)?;
    let reference = Arc::new(SourceRef::of(SourceKind::Service, &svc.metadata));
    let namespace = svc.metadata.namespace.as_deref().unwrap_or("");
    let name = svc.metadata.name.as_deref().unwrap_or("");
    static EMPTY: BTreeMap<String, String> = BTreeMap::new();
    let annotations = svc.metadata.annotations.as_ref().unwrap_or(&EMPTY);
    let mut problems = Verdict::default();
    service::check_boolean_annotations(annotations, &mut problems);
    let label = match kind {
        TunnelKind::Tunnel => LABEL_EXPOSE_TUNNEL,
        TunnelKind::ClusterTunnel => LABEL_EXPOSE_CLUSTER_TUNNEL,
    };
    let input = service::annotation_route(name, namespace, annotations);
    let declared = Declared {
        path: typed_path(PathKind::Regex, input.path_value()),
        path_kind: PathKind::Regex,
        any_host: false,
        input,
        problems,
        legacy: Vec::new(),
        service: Some(svc),
        owner: reference.to_string(),
        fqdn_field: Field::Annotation(ann::HOSTNAME).to_string(),
        service_field: reference.to_string(),
        port_field: Field::Annotation(ann::PORT).to_string(),
    };
    Some(Source {
        age: Age::of(&reference, &svc.metadata),
        tunnel: Some(referenced(kind, namespace, tunnel_name)),
        tunnel_field: format!("metadata.labels[{label}]"),
        tunnel_user_namespace: None,
        disable_dns: service::annotation_is_true(annotations, ann::DISABLE_DNS),
        problems: Verdict::default(),
        routes: vec![declared],
        reference,
    })
}
