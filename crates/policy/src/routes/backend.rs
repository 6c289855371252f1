//! Where a route goes (docs/design.md §3.2): the Service port, the protocol, the cloudflared service.
use cftunnel_types::ServicePorts;
use cftunnel_types::service::Port;

use super::table::RouteReason;
use crate::rules::route::{PortRef, RouteInput};

/// The route's destination, and why it is not the Service when it is not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Backend {
    /// A cloudflared ingress service.
    pub service: String,
    pub reason: RouteReason,
    /// Empty when `reason` is `Routed`.
    pub message: String,
}

/// Field paths that messages about the backend name.
pub(super) struct BackendFields {
    /// Where the Service is named: `subjects[0].name`, or the Service itself.
    pub service: String,
    /// Where a port is (or would be) chosen: `subjects[0].spec.port` or the port annotation.
    pub port: String,
}

/// Served when the Service or its port is missing.
pub(super) const NOT_FOUND_SERVICE: &str = "http_status:404";

/// The destination of `route`; `service` is the Service it names, if it exists.
pub(super) fn backend(
    route: &RouteInput<'_>,
    service: Option<&ServicePorts>,
    fields: &BackendFields,
) -> Backend {
    if let Some((_, target)) = route.target {
        // An explicit target replaces the generated one: the Service is not consulted.
        return served(target.to_string());
    }
    let (namespace, name) = (route.namespace, route.service);
    let Some(service) = service else {
        return not_found(
            RouteReason::ServiceNotFound,
            format!(
                "{}: Service {namespace}/{name} does not exist; create it or fix the name (the hostname answers 404 until then)",
                fields.service
            ),
        );
    };
    let ports = service.ports();
    let chosen = match route.port {
        Some((_, PortRef::Number(n))) => ports.iter().find(|p| i64::from(p.port) == n),
        Some((_, PortRef::Name(wanted))) => {
            ports.iter().find(|p| p.name.as_deref() == Some(wanted))
        }
        None => ports.first(),
    };
    let Some(port) = chosen.filter(|p| (1..=65535).contains(&p.port)) else {
        let message = match route.port {
            _ if ports.is_empty() => format!(
                "{}: Service {namespace}/{name} has no ports; add one to the Service, or set a target",
                fields.port
            ),
            Some((_, wanted)) => format!(
                "{}: Service {namespace}/{name} has no port {wanted}; use one of {}",
                fields.port,
                port_list(ports)
            ),
            None => format!(
                "{}: the first port of Service {namespace}/{name} is not a valid port; name a valid one",
                fields.port
            ),
        };
        return not_found(RouteReason::PortNotFound, message);
    };
    let protocol = route
        .protocol
        .map(|(_, p)| p)
        .unwrap_or_else(|| inferred_protocol(port));
    let target = format!(
        "{}://{name}.{namespace}.svc:{}",
        scheme(protocol),
        port.port
    );
    if port.protocol.as_deref() == Some("UDP") {
        return Backend {
            service: target,
            reason: RouteReason::UdpPort,
            message: format!(
                "{}: port {} of Service {namespace}/{name} is UDP, and a public hostname carries only HTTP and TCP streams; name a TCP port",
                fields.port, port.port
            ),
        };
    }
    served(target)
}

fn served(service: String) -> Backend {
    Backend {
        service,
        reason: RouteReason::Routed,
        message: String::new(),
    }
}

fn not_found(reason: RouteReason, message: String) -> Backend {
    Backend {
        service: NOT_FOUND_SERVICE.to_string(),
        reason,
        message,
    }
}

/// `http (80), 443` — the ports a message offers.
fn port_list(ports: &[Port]) -> String {
    ports
        .iter()
        .map(|p| match p.name.as_deref().filter(|n| !n.is_empty()) {
            Some(name) => format!("{name} ({})", p.port),
            None => p.port.to_string(),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The protocol of a port nobody named one for: `appProtocol`, else the port name, else the
/// port number, else http.
pub(super) fn inferred_protocol(port: &Port) -> &'static str {
    let app_protocol = port.app_protocol.as_deref().map(str::to_ascii_lowercase);
    match app_protocol.as_deref() {
        Some("http") => return "http",
        Some("https") => return "https",
        // h2c is HTTP/2 without TLS; http2Origin only acts over TLS, so it stays unset.
        Some("kubernetes.io/h2c") => return "http",
        _ => {}
    }
    match port.name.as_deref() {
        Some("http") => return "http",
        Some("https") => return "https",
        Some("ssh") => return "ssh",
        Some("rdp") => return "rdp",
        Some("smb") => return "smb",
        _ => {}
    }
    match port.port {
        22 => "ssh",
        139 | 445 => "smb",
        443 => "https",
        3389 => "rdp",
        _ => "http",
    }
}

/// The URL scheme cloudflared proxies a protocol with; a public hostname carries UDP as a TCP
/// stream (admission warns about it).
fn scheme(protocol: &str) -> &str {
    match protocol {
        "udp" => "tcp",
        other => other,
    }
}
