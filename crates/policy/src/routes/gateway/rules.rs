//! The rules of an HTTPRoute or GRPCRoute as a tunnel can serve them: path matches, one backend
//! per rule, and every field a tunnel cannot express, named so the route can be refused with it.

use crate::routes::path::{escape, typed_path};
use crate::routes::route::PathKind;
use crate::routes::source::ServiceIndex;
use crate::routes::world::RouteWorld;
use crate::rules::route::Field;
use cftunnel_types::ServicePorts;
use cftunnel_types::gateway::{BackendRef, GATEWAY_GROUP, GRPCRoute, HTTPRoute};
use cftunnel_types::service::Port;

/// Answered for an HTTPRoute rule whose backend cannot be used: HTTPRouteRule.backendRefs says
/// "requests that would have otherwise been routed to an invalid backend" MUST get a 500.
pub(crate) const INVALID_BACKEND_SERVICE: &str = "http_status:500";

/// Answered for a GRPCRoute rule whose backend cannot be used. GRPCRouteRule.backendRefs asks
/// for an `UNAVAILABLE` status; cloudflared can answer only an HTTP status, and a gRPC client
/// reads a 503 without `grpc-status` as `UNAVAILABLE` (gRPC's HTTP to gRPC status mapping;
/// a 500 would read as `UNKNOWN`).
pub(crate) const INVALID_GRPC_BACKEND_SERVICE: &str = "http_status:503";

/// One path a rule matches.
#[derive(Clone, Debug)]
pub(crate) struct RuleMatch<'w> {
    pub kind: PathKind,
    /// `None`: every path.
    pub regex: Option<String>,
    /// A regex as the user wrote it, checked with the RE2 rules of bindings.
    pub regex_input: Option<(Field, &'w str)>,
}

/// Where a rule's requests go.
#[derive(Clone, Debug)]
pub(crate) enum Target<'w> {
    Service {
        namespace: &'w str,
        name: &'w str,
        port: i32,
        service: &'w ServicePorts,
    },
    /// [`RouteAnalysis::invalid_backend`].
    Invalid,
}

#[derive(Clone, Debug)]
pub(crate) struct RuleRoutes<'w> {
    pub index: usize,
    pub matches: Vec<RuleMatch<'w>>,
    pub target: Target<'w>,
}

/// A route read as a tunnel would serve it.
#[derive(Clone, Debug)]
pub(crate) struct RouteAnalysis<'w> {
    pub rules: Vec<RuleRoutes<'w>>,
    /// Fields a tunnel cannot express: the route is refused (`Accepted=False`, `UnsupportedValue`).
    pub unsupported: Vec<String>,
    /// Backends that do not resolve: (reason, message), the route's `ResolvedRefs=False`.
    pub unresolved: Vec<(&'static str, String)>,
    /// gRPC: the origin speaks HTTP/2 over TLS (every backend that is not refused does).
    pub http2: bool,
    /// What a rule whose backend cannot be used answers.
    pub invalid_backend: &'static str,
}

impl Default for RouteAnalysis<'_> {
    fn default() -> Self {
        RouteAnalysis {
            rules: Vec::new(),
            unsupported: Vec::new(),
            unresolved: Vec::new(),
            http2: false,
            invalid_backend: INVALID_BACKEND_SERVICE,
        }
    }
}

/// What reading one route's rules needs besides the rule: the world, its Services, the route's
/// kind and namespace.
struct Reading<'r, 'w> {
    world: &'w RouteWorld,
    services: &'r ServiceIndex<'w>,
    kind: &'static str,
    namespace: &'w str,
}

pub(crate) fn analyze_http<'w>(
    world: &'w RouteWorld,
    services: &ServiceIndex<'w>,
    route: &'w HTTPRoute,
) -> RouteAnalysis<'w> {
    let reading = Reading {
        world,
        services,
        kind: "HTTPRoute",
        namespace: route.metadata.namespace.as_deref().unwrap_or(""),
    };
    let mut out = RouteAnalysis::default();
    for (i, rule) in route.spec.rules.iter().enumerate() {
        if rule.timeouts.is_some() {
            out.unsupported.push(format!(
                "spec.rules[{i}].timeouts: request timeouts cannot be expressed by a tunnel; remove them"
            ));
        }
        let mut matches = Vec::new();
        for (j, m) in rule.matches.iter().enumerate() {
            for (set, name) in [
                (!m.headers.is_empty(), "headers"),
                (!m.query_params.is_empty(), "queryParams"),
                (m.method.is_some(), "method"),
            ] {
                if set {
                    out.unsupported.push(format!(
                        "spec.rules[{i}].matches[{j}].{name}: cloudflared matches only hostname and path; remove the {name} match or route it elsewhere"
                    ));
                }
            }
            let (kind_name, value) = m
                .path
                .as_ref()
                .map(|p| {
                    (
                        p.type_.as_deref().unwrap_or("PathPrefix"),
                        p.value.as_deref().unwrap_or("/"),
                    )
                })
                .unwrap_or(("PathPrefix", "/"));
            let rule_match = match kind_name {
                "Exact" => RuleMatch {
                    kind: PathKind::Exact,
                    regex: typed_path(PathKind::Exact, value),
                    regex_input: None,
                },
                "RegularExpression" => RuleMatch {
                    kind: PathKind::Regex,
                    regex: typed_path(PathKind::Regex, value),
                    regex_input: Some((Field::RouteMatch(i, j, "path.value"), value)),
                },
                _ => RuleMatch {
                    kind: PathKind::Prefix,
                    regex: typed_path(PathKind::Prefix, value),
                    regex_input: None,
                },
            };
            matches.push(rule_match);
        }
        let rule_routes = finish_rule(
            &reading,
            i,
            (&rule.filters, &rule.backend_refs),
            matches,
            &mut out,
        );
        out.rules.push(rule_routes);
    }
    out
}

pub(crate) fn analyze_grpc<'w>(
    world: &'w RouteWorld,
    services: &ServiceIndex<'w>,
    route: &'w GRPCRoute,
) -> RouteAnalysis<'w> {
    let reading = Reading {
        world,
        services,
        kind: "GRPCRoute",
        namespace: route.metadata.namespace.as_deref().unwrap_or(""),
    };
    let mut out = RouteAnalysis {
        http2: true,
        invalid_backend: INVALID_GRPC_BACKEND_SERVICE,
        ..RouteAnalysis::default()
    };
    for (i, rule) in route.spec.rules.iter().enumerate() {
        let mut matches = Vec::new();
        for (j, m) in rule.matches.iter().enumerate() {
            if !m.headers.is_empty() {
                out.unsupported.push(format!(
                    "spec.rules[{i}].matches[{j}].headers: cloudflared matches only hostname and path; remove the header match"
                ));
            }
            let Some(method) = &m.method else {
                matches.push(every_path());
                continue;
            };
            let service = method.service.as_deref().filter(|s| !s.is_empty());
            let name = method.method.as_deref().filter(|s| !s.is_empty());
            let regex_type = method.type_.as_deref() == Some("RegularExpression");
            matches.push(match (regex_type, service, name) {
                (false, Some(s), Some(m)) => RuleMatch {
                    kind: PathKind::Exact,
                    regex: typed_path(PathKind::Exact, &format!("/{s}/{m}")),
                    regex_input: None,
                },
                (false, Some(s), None) => RuleMatch {
                    kind: PathKind::Prefix,
                    regex: typed_path(PathKind::Prefix, &format!("/{s}")),
                    regex_input: None,
                },
                (false, None, Some(m)) => RuleMatch {
                    kind: PathKind::Regex,
                    regex: Some(format!("^/[^/]+/{}$", escape(m))),
                    regex_input: None,
                },
                (true, _, _) => {
                    out.unsupported.push(format!(
                        "spec.rules[{i}].matches[{j}].method.type: RegularExpression is not supported; use Exact"
                    ));
                    every_path()
                }
                (false, None, None) => every_path(),
            });
        }
        let rule_routes = finish_rule(
            &reading,
            i,
            (&rule.filters, &rule.backend_refs),
            matches,
            &mut out,
        );
        out.rules.push(rule_routes);
    }
    out
}

/// What every rule of both kinds ends with: its filters refused (cloudflared applies none),
/// every path when it has no match, and its backend resolved.
fn finish_rule<'w>(
    reading: &Reading<'_, 'w>,
    i: usize,
    (filters, backend_refs): (&[serde_json::Value], &'w [BackendRef]),
    mut matches: Vec<RuleMatch<'w>>,
    out: &mut RouteAnalysis<'w>,
) -> RuleRoutes<'w> {
    if !filters.is_empty() {
        out.unsupported.push(format!(
            "spec.rules[{i}].filters: {} cannot be applied by cloudflared; remove the filter",
            filter_types(filters)
        ));
    }
    if matches.is_empty() {
        matches.push(every_path());
    }
    let target = resolve(reading, i, backend_refs, out);
    RuleRoutes {
        index: i,
        matches,
        target,
    }
}

fn every_path<'w>() -> RuleMatch<'w> {
    RuleMatch {
        kind: PathKind::Prefix,
        regex: None,
        regex_input: None,
    }
}

fn filter_types(filters: &[serde_json::Value]) -> String {
    let names: Vec<&str> = filters
        .iter()
        .map(|f| f.get("type").and_then(|t| t.as_str()).unwrap_or("a filter"))
        .collect();
    names.join(", ")
}

/// The backend of one rule: exactly one Service backend (or none with weight), resolved, with
/// ReferenceGrants for another namespace. Anything else answers 500 and is reported.
fn resolve<'w>(
    reading: &Reading<'_, 'w>,
    rule: usize,
    refs: &'w [BackendRef],
    out: &mut RouteAnalysis<'w>,
) -> Target<'w> {
    let Reading {
        world,
        services,
        kind: route_kind,
        namespace,
    } = *reading;
    let answers = match out.invalid_backend {
        INVALID_GRPC_BACKEND_SERVICE => {
            "requests answer 503, which gRPC clients read as UNAVAILABLE"
        }
        _ => "requests answer 500",
    };
    let weighted: Vec<(usize, &BackendRef)> = refs
        .iter()
        .enumerate()
        .filter(|(_, r)| r.weight != Some(0))
        .collect();
    if weighted.len() > 1 {
        out.unsupported.push(format!(
            "spec.rules[{rule}].backendRefs: traffic split over {} backends cannot be expressed by a tunnel (one Service per rule); keep one backendRef per rule",
            weighted.len()
        ));
        return Target::Invalid;
    }
    let Some((k, backend)) = weighted.first().copied() else {
        return Target::Invalid;
    };
    let field = format!("spec.rules[{rule}].backendRefs[{k}]");
    if !backend.filters.is_empty() {
        out.unsupported.push(format!(
            "{field}.filters: {} cannot be applied by cloudflared; remove the filter",
            filter_types(&backend.filters)
        ));
    }
    let group = backend.group.as_deref().unwrap_or("");
    let kind = backend.kind.as_deref().unwrap_or("Service");
    if !group.is_empty() || kind != "Service" {
        out.unresolved.push((
            "InvalidKind",
            format!("{field}: {kind} ({group:?}) is not a kind cftunnel routes to; use a Service ({answers})"),
        ));
        return Target::Invalid;
    }
    let backend_namespace = backend.namespace.as_deref().unwrap_or(namespace);
    if backend_namespace != namespace
        && !granted(
            world,
            route_kind,
            namespace,
            backend_namespace,
            &backend.name,
        )
    {
        out.unresolved.push((
            "RefNotPermitted",
            format!(
                "{field}: Service {backend_namespace}/{} is in another namespace and no ReferenceGrant there allows {route_kind}s of {namespace} to use it; add one ({answers})",
                backend.name
            ),
        ));
        return Target::Invalid;
    }
    let Some(service) = services
        .get(&(backend_namespace, backend.name.as_str()))
        .copied()
    else {
        out.unresolved.push((
            "BackendNotFound",
            format!(
                "{field}: Service {backend_namespace}/{} does not exist; create it or fix the name ({answers})",
                backend.name
            ),
        ));
        return Target::Invalid;
    };
    let ports = service.ports();
    let port = match backend.port {
        Some(p) if ports.iter().any(|sp| sp.port == p) => p,
        Some(p) => {
            out.unresolved.push((
                "BackendNotFound",
                format!("{field}.port: Service {backend_namespace}/{} has no port {p}; use one of its ports ({answers})", backend.name),
            ));
            return Target::Invalid;
        }
        None => {
            out.unresolved.push((
                "BackendNotFound",
                format!("{field}.port: not set; a Service backend needs its port ({answers})"),
            ));
            return Target::Invalid;
        }
    };
    if route_kind == "GRPCRoute"
        && let Some(plain) = ports.iter().find(|sp| sp.port == port && !speaks_tls(sp))
    {
        out.unresolved.push((
            "UnsupportedProtocol",
            format!(
                "{field}.port: port {port} of Service {backend_namespace}/{} is not TLS ({}), and cloudflared reaches an origin over HTTP/2, which gRPC needs, only with TLS; serve gRPC over TLS on a port with appProtocol https, or one named https, grpcs or https-..., or port 443 ({answers})",
                backend.name,
                port_protocol(plain)
            ),
        ));
        return Target::Invalid;
    }
    Target::Service {
        namespace: backend_namespace,
        name: backend.name.as_str(),
        port,
        service,
    }
}

/// Does a Service port speak TLS? cloudflared's `http2Origin` acts only over TLS, so this
/// decides whether a GRPCRoute backend can work. An `appProtocol`, when set, is the Service's
/// own word: TLS exactly when it is `https` (`kubernetes.io/h2c` is cleartext HTTP/2). Without
/// one: TLS when the port is named `https`, `grpcs` or `https-…`, or its number is 443.
pub(crate) fn speaks_tls(port: &Port) -> bool {
    if let Some(app_protocol) = port.app_protocol.as_deref().filter(|p| !p.is_empty()) {
        return app_protocol.eq_ignore_ascii_case("https");
    }
    let name = port.name.as_deref().unwrap_or("");
    matches!(name, "https" | "grpcs") || name.starts_with("https-") || port.port == 443
}

/// How a message describes what a port declares: its `appProtocol`, else its name, else nothing.
fn port_protocol(port: &Port) -> String {
    match (port.app_protocol.as_deref(), port.name.as_deref()) {
        (Some(p), _) if !p.is_empty() => format!("appProtocol {p:?}"),
        (_, Some(n)) if !n.is_empty() => format!("named {n:?}"),
        _ => "no appProtocol and no name".to_string(),
    }
}

/// Does a ReferenceGrant in `to_namespace` let routes of `kind` in `from_namespace` use the
/// Service `name`?
pub(crate) fn granted(
    world: &RouteWorld,
    kind: &str,
    from_namespace: &str,
    to_namespace: &str,
    name: &str,
) -> bool {
    world
        .reference_grants
        .iter()
        .filter(|g| g.metadata.namespace.as_deref() == Some(to_namespace))
        .any(|g| {
            g.spec.from.iter().any(|f| {
                f.group == GATEWAY_GROUP && f.kind == kind && f.namespace == from_namespace
            }) && g.spec.to.iter().any(|t| {
                t.group.is_empty()
                    && t.kind == "Service"
                    && t.name.as_deref().is_none_or(|n| n == name)
            })
        })
}
