//! Which Gateways are cftunnel's, which tunnel each one runs on, and where a route attaches:
//! parent references, listeners (`sectionName`, `port`, `allowedRoutes`, the kinds of their
//! protocol) and the intersection of listener and route hostnames (TCPRoutes and UDPRoutes have
//! none: a listener's hostname "is ignored for protocols that don't require hostname based
//! matching").
use std::sync::Arc;

use super::protocols::{listener_kinds, supported_protocol};
use crate::routes::ANY_HOST;
use crate::routes::world::RouteWorld;
use crate::rules::RouteNamespacePolicy;
use crate::rules::route::Field;
use crate::rules::view::admits_namespace;
use cftunnel_types::gateway::{
    GATEWAY_GROUP, Gateway, GatewayClass, Listener, ParametersReference, ParentReference,
};
use cftunnel_types::names::{CONTROLLER_NAME, GROUP};
use cftunnel_types::{TunnelIdentity, TunnelKind};

/// The GatewayClass named `name`, if it is cftunnel's.
pub(crate) fn our_class<'w>(world: &'w RouteWorld, name: &str) -> Option<&'w GatewayClass> {
    world
        .gateway_classes
        .iter()
        .find(|c| c.metadata.name.as_deref() == Some(name))
        .filter(|c| c.spec.controller_name == CONTROLLER_NAME)
        .map(Arc::as_ref)
}

/// The tunnel a parameters reference names; `namespace` is where a Tunnel without its own
/// namespace lives. `field` names the reference in messages.
fn referenced_tunnel(
    reference: &ParametersReference,
    namespace: Option<&str>,
    field: &str,
) -> Result<TunnelIdentity, String> {
    if reference.group != GROUP {
        return Err(format!(
            "{field}.group: {:?} is not {GROUP}; name a Tunnel or ClusterTunnel",
            reference.group
        ));
    }
    match reference.kind.as_str() {
        "ClusterTunnel" => Ok(TunnelIdentity {
            kind: TunnelKind::ClusterTunnel,
            namespace: String::new(),
            name: reference.name.clone(),
        }),
        "Tunnel" => match reference.namespace.as_deref().or(namespace) {
            Some(ns) if !ns.is_empty() => Ok(TunnelIdentity {
                kind: TunnelKind::Tunnel,
                namespace: ns.to_string(),
                name: reference.name.clone(),
            }),
            _ => Err(format!(
                "{field}.namespace: not set; a Tunnel is namespaced, give its namespace"
            )),
        },
        other => Err(format!(
            "{field}.kind: {other:?} is not a tunnel kind; use Tunnel or ClusterTunnel"
        )),
    }
}

/// Why a GatewayClass of cftunnel's cannot be accepted, if it cannot: parameters that name no
/// tunnel. A class without parameters is fine (each Gateway then names its own tunnel).
pub(crate) fn class_problem(class: &GatewayClass) -> Option<String> {
    let reference = class.spec.parameters_ref.as_ref()?;
    referenced_tunnel(reference, None, "spec.parametersRef").err()
}

/// The tunnel a Gateway of cftunnel's runs on: its own `spec.infrastructure.parametersRef` (a
/// Tunnel in its namespace or a ClusterTunnel), else its class's `spec.parametersRef`.
pub(crate) fn gateway_tunnel(
    gateway: &Gateway,
    class: &GatewayClass,
) -> Result<TunnelIdentity, String> {
    let namespace = gateway.metadata.namespace.as_deref().unwrap_or("");
    if let Some(own) = gateway
        .spec
        .infrastructure
        .as_ref()
        .and_then(|i| i.parameters_ref.as_ref())
    {
        let mut own = own.clone();
        own.namespace = None;
        return referenced_tunnel(&own, Some(namespace), "spec.infrastructure.parametersRef");
    }
    match &class.spec.parameters_ref {
        Some(reference) => referenced_tunnel(
            reference,
            None,
            &format!(
                "GatewayClass {} spec.parametersRef",
                class.metadata.name.as_deref().unwrap_or("")
            ),
        ),
        None => Err(format!(
            "spec.infrastructure.parametersRef: not set, and GatewayClass {} names no tunnel; \
             name one, e.g. {{group: networking.cfargotunnel.com, kind: ClusterTunnel, name: edge}}",
            class.metadata.name.as_deref().unwrap_or("")
        )),
    }
}

/// Why `tunnel` cannot serve the routes of a Gateway in `gateway_namespace`, if it cannot: it
/// does not exist, or its own `allowedRoutes` refuses the Gateway's namespace (the Gateway is
/// what uses the tunnel; its listeners decide which route namespaces attach). The route model
/// gates a source with the same two checks.
pub(crate) fn tunnel_problem(
    world: &RouteWorld,
    tunnel: &TunnelIdentity,
    gateway_namespace: &str,
) -> Option<String> {
    let Some(facts) = world.tunnels.iter().find(|t| &t.identity == tunnel) else {
        return Some(format!(
            "{tunnel} does not exist; create it or name an existing tunnel"
        ));
    };
    let admitted = admits_namespace(
        &world.namespace_labels,
        &facts.allowed,
        &facts.identity.namespace,
        gateway_namespace,
    );
    (!admitted).then(|| {
        format!(
            "{tunnel} does not admit routes from namespace {gateway_namespace:?}, the Gateway's (its allowedRoutes.namespaces); ask its owner to allow it, or name another tunnel"
        )
    })
}

/// Does the listener's `allowedRoutes.namespaces` admit a route of `namespace`?
pub(crate) fn admits_route_namespace(
    world: &RouteWorld,
    listener: &Listener,
    gateway_namespace: &str,
    namespace: &str,
) -> bool {
    let namespaces = listener
        .allowed_routes
        .as_ref()
        .and_then(|a| a.namespaces.as_ref());
    let policy = match namespaces.and_then(|n| n.from.as_deref()) {
        Some("All") => RouteNamespacePolicy::All,
        Some("Selector") => match namespaces.and_then(|n| n.selector.clone()) {
            Some(selector) => RouteNamespacePolicy::Selector(selector),
            None => return false,
        },
        _ => RouteNamespacePolicy::Same,
    };
    admits_namespace(
        &world.namespace_labels,
        &policy,
        gateway_namespace,
        namespace,
    )
}

/// Does `wildcard` (`*.example.com`) cover `name` (one label deeper or more)?
fn covers(wildcard: &str, name: &str) -> bool {
    wildcard.strip_prefix('*').is_some_and(|suffix| {
        suffix.starts_with('.') && name.len() > suffix.len() && name.ends_with(suffix)
    })
}

/// The hostnames a route serves on a listener, with the field each comes from: the
/// intersection of the listener's hostname (none: every host) and the route's (none: the
/// listener's). [`ANY_HOST`] for every host; empty when nothing intersects. Compared in
/// lowercase (the route model lowercases what it keeps).
pub(crate) fn intersect<'a>(
    parent: usize,
    listener: Option<&'a str>,
    route: &'a [String],
) -> Vec<(Field, &'a str)> {
    let listener = listener.filter(|h| !h.is_empty());
    if route.is_empty() {
        return vec![(Field::ParentHostname(parent), listener.unwrap_or(ANY_HOST))];
    }
    let mut out: Vec<(Field, &'a str)> = Vec::new();
    for (i, host) in route.iter().enumerate() {
        let field = Field::RouteHostname(i);
        let lower = host.to_ascii_lowercase();
        let kept = match listener {
            None => Some(host.as_str()),
            Some(l) => {
                let l_lower = l.to_ascii_lowercase();
                if l_lower == lower || covers(&l_lower, &lower) {
                    Some(host.as_str())
                } else if covers(&lower, &l_lower) {
                    Some(l)
                } else {
                    None
                }
            }
        };
        if let Some(kept) = kept
            && !out.iter().any(|(_, h)| h.eq_ignore_ascii_case(kept))
        {
            out.push((field, kept));
        }
    }
    out
}

/// What became of one parent reference of a route.
#[derive(Clone, Debug)]
pub(crate) struct ParentOutcome<'w> {
    pub reference: &'w ParentReference,
    pub gateway: &'w Gateway,
    /// The Gateway's tunnel (`Err`: why there is none).
    pub tunnel: Result<TunnelIdentity, String>,
    /// Why that tunnel does not serve this Gateway (see [`tunnel_problem`]), if it does not.
    pub tunnel_problem: Option<String>,
    /// The listeners the route attached to: selected by `sectionName` and `port`, admitting it
    /// by `allowedRoutes`, with a hostname in common (what `attachedRoutes` counts).
    pub listeners: Vec<usize>,
    /// The hostnames it serves there (none for a TCPRoute or UDPRoute), or why it is not
    /// accepted: (reason, message).
    pub hostnames: Result<Vec<(Field, &'w str)>, (&'static str, String)>,
}

impl<'w> ParentOutcome<'w> {
    /// The tunnel this parent serves the route through, with the hostnames it serves there:
    /// `None` when the Gateway has no working tunnel or no listener takes the route.
    pub(crate) fn served(&self) -> Option<(&TunnelIdentity, &[(Field, &'w str)])> {
        match (&self.tunnel, &self.tunnel_problem, &self.hostnames) {
            (Ok(tunnel), None, Ok(hosts)) => Some((tunnel, hosts.as_slice())),
            _ => None,
        }
    }
}

/// The parent references of a route of `kind` in `namespace` that name Gateways of cftunnel's,
/// each resolved. References to other Gateways (or other kinds of parent) are not ours to answer.
pub(crate) fn parents<'w>(
    world: &'w RouteWorld,
    kind: &str,
    namespace: &str,
    references: &'w [ParentReference],
    route_hostnames: &'w [String],
) -> Vec<ParentOutcome<'w>> {
    let mut out = Vec::new();
    for (index, reference) in references.iter().enumerate() {
        let group_ok = reference
            .group
            .as_deref()
            .is_none_or(|g| g == GATEWAY_GROUP);
        let kind_ok = reference.kind.as_deref().is_none_or(|k| k == "Gateway");
        if !group_ok || !kind_ok {
            continue;
        }
        let gateway_namespace = reference.namespace.as_deref().unwrap_or(namespace);
        let Some(gateway) = world.gateways.iter().find(|g| {
            g.metadata.namespace.as_deref() == Some(gateway_namespace)
                && g.metadata.name.as_deref() == Some(reference.name.as_str())
        }) else {
            continue;
        };
        let Some(class) = our_class(world, &gateway.spec.gateway_class_name) else {
            continue;
        };
        let tunnel = gateway_tunnel(gateway, class);
        let problem = tunnel
            .as_ref()
            .ok()
            .and_then(|t| tunnel_problem(world, t, gateway_namespace));
        let field = format!("spec.parentRefs[{index}]");
        let mut selected = Vec::new();
        let mut allowed = Vec::new();
        for (i, listener) in gateway.spec.listeners.iter().enumerate() {
            let by_section = reference
                .section_name
                .as_deref()
                .is_none_or(|s| s == listener.name);
            let by_port = reference.port.is_none_or(|p| p == listener.port);
            if !(by_section && by_port) {
                continue;
            }
            selected.push(i);
            let (kinds, _) = listener_kinds(listener);
            if supported_protocol(listener)
                && kinds.contains(&kind)
                && admits_route_namespace(world, listener, gateway_namespace, namespace)
            {
                allowed.push(i);
            }
        }
        let hostnames = if selected.is_empty() {
            Err((
                "NoMatchingParent",
                format!(
                    "{field}: Gateway {gateway_namespace}/{} has no listener{}{}; name an existing listener",
                    reference.name,
                    reference
                        .section_name
                        .as_deref()
                        .map(|s| format!(" named {s:?}"))
                        .unwrap_or_default(),
                    reference
                        .port
                        .map(|p| format!(" on port {p}"))
                        .unwrap_or_default(),
                ),
            ))
        } else if allowed.is_empty() {
            Err((
                "NotAllowedByListeners",
                format!(
                    "{field}: no listener of Gateway {gateway_namespace}/{} admits a {kind} from namespace {namespace} (see its listeners' allowedRoutes)",
                    reference.name
                ),
            ))
        } else if matches!(kind, "TCPRoute" | "UDPRoute") {
            // No hostnames: every listener that admits the route attaches it.
            Ok(Vec::new())
        } else {
            let mut hosts: Vec<(Field, &'w str)> = Vec::new();
            let mut intersecting = Vec::new();
            for i in &allowed {
                let listener = &gateway.spec.listeners[*i];
                let found = intersect(index, listener.hostname.as_deref(), route_hostnames);
                if !found.is_empty() {
                    intersecting.push(*i);
                }
                for (field, host) in found {
                    if !hosts.iter().any(|(_, h)| h.eq_ignore_ascii_case(host)) {
                        hosts.push((field, host));
                    }
                }
            }
            allowed = intersecting;
            if hosts.is_empty() {
                Err((
                    "NoMatchingListenerHostname",
                    format!(
                        "spec.hostnames: none of them matches a listener hostname of Gateway {gateway_namespace}/{}; use a hostname its listeners accept",
                        reference.name
                    ),
                ))
            } else {
                Ok(hosts)
            }
        };
        out.push(ParentOutcome {
            reference,
            gateway,
            tunnel,
            tunnel_problem: problem,
            listeners: allowed,
            hostnames,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listener_and_route_hostnames_intersect_as_the_specification_says() {
        let route = |hosts: &[&str]| hosts.iter().map(|h| h.to_string()).collect::<Vec<_>>();
        let hosts = |listener: Option<&str>, route: &[String]| -> Vec<String> {
            intersect(0, listener, route)
                .into_iter()
                .map(|(_, h)| h.to_ascii_lowercase())
                .collect()
        };
        assert_eq!(hosts(None, &[]), vec!["*"]);
        assert_eq!(hosts(Some("a.example.com"), &[]), vec!["a.example.com"]);
        assert_eq!(
            hosts(None, &route(&["A.example.com"])),
            vec!["a.example.com"]
        );
        assert_eq!(
            hosts(
                Some("*.example.com"),
                &route(&[
                    "a.example.com",
                    "a.b.example.com",
                    "example.com",
                    "a.example.net"
                ])
            ),
            vec!["a.example.com", "a.b.example.com"]
        );
        assert_eq!(
            hosts(Some("very.specific.com"), &route(&["*.specific.com"])),
            vec!["very.specific.com"]
        );
        assert_eq!(
            hosts(Some("*.wildcard.io"), &route(&["*.wildcard.io", "*.io"])),
            vec!["*.wildcard.io"]
        );
        assert!(hosts(Some("a.example.com"), &route(&["b.example.com"])).is_empty());
    }
}
