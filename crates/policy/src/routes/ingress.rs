//! Ingresses (`networking.k8s.io/v1`) as route sources.
//!
//! - **Whose Ingress:** one whose class is an IngressClass with `spec.controller:
//!   cfargotunnel.com/cftunnel`. The class is `spec.ingressClassName`, else the older
//!   `kubernetes.io/ingress.class` annotation, else the cluster's default class (the IngressClass
//!   annotated `ingressclass.kubernetes.io/is-default-class: "true"`, when exactly one is). An
//!   Ingress of another controller, or naming a class that does not exist, is not a source.
//! - **Which tunnel:** the class's `spec.parameters`: `{apiGroup: networking.cfargotunnel.com,
//!   kind: ClusterTunnel, name, scope: Cluster}` or `{…, kind: Tunnel, name, scope: Namespace,
//!   namespace}`. Anything else is reported on every Ingress of the class (`InvalidRoute`).
//! - **Rules:** each `host` (exact or `*.` wildcard; none means every host) and path becomes a
//!   route: `Exact` and `Prefix` as typed matches (`routes/path.rs`), `ImplementationSpecific`
//!   as a cloudflared path regex, checked like a binding's `path`. The backend Service's port is
//!   named by number or by name. `defaultBackend` is the tunnel's catch-all (a route for every
//!   host and path). A `resource` backend cannot be expressed and is refused on its field.
//! - **Settings:** the `cfargotunnel.com/` annotations of labelled Services (protocol,
//!   no-tls-verify, http2-origin, http-host-header, origin-server-name, ca-pool, disable-dns)
//!   apply to every route of the Ingress; hostname, path and port come from the rules.
//! - A missing Service or port answers 404, as for bindings.
use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::networking::v1::{Ingress, IngressBackend, IngressClass};

use super::path::typed_path;
use super::route::PathKind;
use super::source::{Declared, ServiceIndex, Source};
use super::world::{Age, SourceKind, SourceRef};
use crate::rules::route::{Field, PortRef, RouteInput};
use crate::rules::{Verdict, service};
use cftunnel_types::names::{
    ANNOTATION_DEFAULT_INGRESS_CLASS, ANNOTATION_LEGACY_INGRESS_CLASS, CONTROLLER_NAME, GROUP,
    service_annotations as ann,
};
use cftunnel_types::{TunnelIdentity, TunnelKind};

/// The IngressClass an Ingress belongs to, if it is one of cftunnel's.
pub(super) fn our_class<'w>(
    ingress: &Ingress,
    classes: &'w [std::sync::Arc<IngressClass>],
) -> Option<&'w IngressClass> {
    let named = ingress
        .spec
        .as_ref()
        .and_then(|s| s.ingress_class_name.as_deref())
        .or_else(|| {
            ingress
                .metadata
                .annotations
                .as_ref()?
                .get(ANNOTATION_LEGACY_INGRESS_CLASS)
                .map(String::as_str)
        });
    let class = match named {
        Some(name) => classes
            .iter()
            .find(|c| c.metadata.name.as_deref() == Some(name))?,
        None => {
            let mut defaults = classes.iter().filter(|c| {
                c.metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(ANNOTATION_DEFAULT_INGRESS_CLASS))
                    .is_some_and(|v| v == "true")
            });
            match (defaults.next(), defaults.next()) {
                (Some(only), None) => only,
                _ => return None,
            }
        }
    };
    let controller = class.spec.as_ref().and_then(|s| s.controller.as_deref());
    (controller == Some(CONTROLLER_NAME)).then_some(class.as_ref())
}

/// Is `ingress` of an IngressClass of cftunnel's (a route source at all)?
pub fn is_cftunnels(ingress: &Ingress, classes: &[std::sync::Arc<IngressClass>]) -> bool {
    our_class(ingress, classes).is_some()
}

/// The tunnel an IngressClass of cftunnel's names, or what is wrong with its parameters.
pub(crate) fn class_tunnel(class: &IngressClass) -> Result<TunnelIdentity, String> {
    let name = class.metadata.name.as_deref().unwrap_or("");
    let field = format!("IngressClass {name} spec.parameters");
    let example = "e.g. {apiGroup: networking.cfargotunnel.com, kind: ClusterTunnel, name: edge, scope: Cluster}";
    let Some(p) = class.spec.as_ref().and_then(|s| s.parameters.as_ref()) else {
        return Err(format!("{field}: not set; name the tunnel, {example}"));
    };
    if p.api_group.as_deref() != Some(GROUP) {
        return Err(format!(
            "{field}.apiGroup: {:?} is not {GROUP}; name a Tunnel or ClusterTunnel, {example}",
            p.api_group.as_deref().unwrap_or("")
        ));
    }
    if p.name.is_empty() {
        return Err(format!("{field}.name: empty; name the tunnel, {example}"));
    }
    let scope = p.scope.as_deref().unwrap_or("Cluster");
    match (p.kind.as_str(), scope) {
        ("ClusterTunnel", "Cluster") => Ok(TunnelIdentity {
            kind: TunnelKind::ClusterTunnel,
            namespace: String::new(),
            name: p.name.clone(),
        }),
        ("Tunnel", "Namespace") => match p.namespace.as_deref().filter(|n| !n.is_empty()) {
            Some(namespace) => Ok(TunnelIdentity {
                kind: TunnelKind::Tunnel,
                namespace: namespace.to_string(),
                name: p.name.clone(),
            }),
            None => Err(format!(
                "{field}.namespace: not set; a Tunnel is namespaced, give its namespace"
            )),
        },
        ("ClusterTunnel", other) => Err(format!(
            "{field}.scope: {other:?} does not fit a ClusterTunnel; use scope: Cluster"
        )),
        ("Tunnel", other) => Err(format!(
            "{field}.scope: {other:?} does not fit a Tunnel; use scope: Namespace and its namespace"
        )),
        (other, _) => Err(format!(
            "{field}.kind: {other:?} is not a tunnel kind; use Tunnel or ClusterTunnel"
        )),
    }
}

/// The source an Ingress is, when its class is cftunnel's.
pub(super) fn from_ingress<'w>(
    ingress: &'w Ingress,
    classes: &'w [std::sync::Arc<IngressClass>],
    services: &ServiceIndex<'w>,
) -> Option<Source<'w>> {
    let class = our_class(ingress, classes)?;
    let reference = Arc::new(SourceRef::of(SourceKind::Ingress, &ingress.metadata));
    let namespace = ingress.metadata.namespace.as_deref().unwrap_or("");
    static EMPTY: BTreeMap<String, String> = BTreeMap::new();
    let annotations = ingress.metadata.annotations.as_ref().unwrap_or(&EMPTY);
    let mut problems = Verdict::default();
    let tunnel = match class_tunnel(class) {
        Ok(tunnel) => Some(tunnel),
        Err(message) => {
            problems.deny("spec.ingressClassName", message);
            None
        }
    };
    let mut annotation_problems = Verdict::default();
    service::check_boolean_annotations(annotations, &mut annotation_problems);
    let settings = service::annotation_route("", namespace, annotations);
    let declare = |fqdn: Option<(Field, &'w str)>,
                   fqdn_field: String,
                   path: Option<(Field, PathKind, &'w str)>,
                   backend: &'w IngressBackend,
                   backend_field: BackendField,
                   owner: String| {
        let mut route_problems = annotation_problems.clone();
        let (service, port) = backend_target(backend, backend_field, &mut route_problems);
        let (path_regex, kind, regex_input) = match path {
            None => (None, PathKind::Regex, None),
            Some((field, PathKind::Regex, value)) => (
                typed_path(PathKind::Regex, value),
                PathKind::Regex,
                Some((field, value)).filter(|_| !value.is_empty()),
            ),
            Some((_, kind, value)) => (typed_path(kind, value), kind, None),
        };
        let input = RouteInput {
            namespace,
            service,
            fqdns: fqdn.into_iter().collect(),
            path: regex_input,
            port,
            ..settings.clone()
        };
        Declared {
            path: path_regex,
            path_kind: kind,
            any_host: fqdn.is_none(),
            problems: route_problems,
            legacy: Vec::new(),
            service: services.get(&(namespace, service)).copied(),
            owner,
            fqdn_field,
            service_field: backend_field.at("name"),
            port_field: backend_field.at("port"),
            input,
        }
    };
    let spec = ingress.spec.as_ref();
    let mut routes = Vec::new();
    for (i, rule) in spec
        .and_then(|s| s.rules.as_ref())
        .into_iter()
        .flatten()
        .enumerate()
    {
        let host = rule
            .host
            .as_deref()
            .filter(|h| !h.is_empty())
            .map(|h| (Field::IngressHost(i), h));
        for (j, path) in rule.http.iter().flat_map(|h| h.paths.iter()).enumerate() {
            let kind = match path.path_type.as_str() {
                "Exact" => PathKind::Exact,
                "Prefix" => PathKind::Prefix,
                _ => PathKind::Regex,
            };
            let value = path.path.as_deref().unwrap_or("");
            let declared_path = Some((Field::IngressPath(i, j, "path"), kind, value))
                .filter(|_| !(kind == PathKind::Regex && value.is_empty()));
            routes.push(declare(
                host,
                Field::IngressHost(i).to_string(),
                declared_path,
                &path.backend,
                BackendField::Path(i, j),
                format!("{reference} (rule {i} path {value:?})"),
            ));
        }
    }
    if let Some(default) = spec.and_then(|s| s.default_backend.as_ref()) {
        routes.push(declare(
            None,
            "spec.defaultBackend".to_string(),
            None,
            default,
            BackendField::Default,
            format!("{reference} (defaultBackend)"),
        ));
    }
    if routes.is_empty() {
        problems.deny(
            "spec.rules",
            "no rule and no defaultBackend: nothing to route; add a rule with a host and a path",
        );
    }
    Some(Source {
        age: Age::of(&reference, &ingress.metadata),
        tunnel,
        tunnel_field: format!(
            "spec.ingressClassName (IngressClass {} spec.parameters)",
            class.metadata.name.as_deref().unwrap_or("")
        ),
        tunnel_user_namespace: None,
        disable_dns: service::annotation_is_true(annotations, ann::DISABLE_DNS),
        problems,
        routes,
        reference,
    })
}

/// Where a backend is written.
#[derive(Clone, Copy)]
enum BackendField {
    Path(usize, usize),
    Default,
}

impl BackendField {
    /// `spec.rules[i].http.paths[j].backend.service.<name>`.
    fn at(self, name: &str) -> String {
        match self {
            BackendField::Path(i, j) => {
                format!("spec.rules[{i}].http.paths[{j}].backend.service.{name}")
            }
            BackendField::Default => format!("spec.defaultBackend.service.{name}"),
        }
    }

    fn port_field(self) -> Field {
        match self {
            BackendField::Path(i, j) => Field::IngressPath(i, j, "backend.service.port"),
            BackendField::Default => Field::IngressDefault("service.port"),
        }
    }
}

/// The Service and port a backend names; a backend that names no Service is refused.
fn backend_target<'a>(
    backend: &'a IngressBackend,
    field: BackendField,
    problems: &mut Verdict,
) -> (&'a str, Option<(Field, PortRef<'a>)>) {
    let Some(service) = backend.service.as_ref() else {
        let at = match field {
            BackendField::Path(i, j) => format!("spec.rules[{i}].http.paths[{j}].backend"),
            BackendField::Default => "spec.defaultBackend".to_string(),
        };
        problems.deny(
            at,
            "a resource backend cannot be served through a tunnel; name a Service (backend.service.name and port)",
        );
        return ("", None);
    };
    let port = service.port.as_ref().and_then(|p| {
        match (p.number, p.name.as_deref().filter(|n| !n.is_empty())) {
            (Some(n), _) => Some((field.port_field(), PortRef::Number(i64::from(n)))),
            (None, Some(name)) => Some((field.port_field(), PortRef::Name(name))),
            (None, None) => None,
        }
    });
    (service.name.as_str(), port)
}
