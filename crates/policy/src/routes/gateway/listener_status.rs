//! The status of each listener of a Gateway: `Accepted` (a protocol a tunnel serves),
//! `ResolvedRefs` (its `allowedRoutes.kinds`), `Conflicted`, `Programmed`, `supportedKinds` and
//! `attachedRoutes`.
//!
//! Listeners must be distinct (Gateway.spec.listeners): those sharing a protocol differ in
//! "HTTP, HTTPS, TLS: Port, Hostname" and "TCP, UDP: Port", and when a TCP listener shares its
//! port with an HTTP, HTTPS or TLS one, "all the Listeners that share a port with the TCP
//! Listener are not distinct and so MUST NOT be accepted". A TCP and a UDP listener on one port
//! are distinct.
use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::conditions::conditions;
use super::protocols::{is_l4, listener_kinds, protocol_kinds, supported_protocol};
use cftunnel_types::gateway::{
    GATEWAY_GROUP, Gateway, GatewayStatus, Listener, ListenerStatus, RouteGroupKind,
};

/// Routes attached per (Gateway namespace, Gateway name, listener index).
pub(super) type Attached = BTreeMap<(String, String, usize), i32>;

/// Why listener `i` is not distinct from another listener of the Gateway, if it is not:
/// (reason, message).
fn conflict(listeners: &[Listener], i: usize) -> Option<(&'static str, String)> {
    let listener = &listeners[i];
    let mine = listener.protocol.as_str();
    listeners
        .iter()
        .enumerate()
        .filter(|(j, other)| *j != i && other.port == listener.port)
        .find_map(|(_, other)| {
            let theirs = other.protocol.as_str();
            if is_l4(mine) || is_l4(theirs) {
                let tcp_beside_http = (mine == "TCP" && !is_l4(theirs))
                    || (theirs == "TCP" && !is_l4(mine));
                (mine == theirs || tcp_beside_http).then(|| {
                    (
                        "ProtocolConflict",
                        format!(
                            "listener {:?} ({theirs}) has port {} too; a {mine} listener's port must be its own{}",
                            other.name,
                            listener.port,
                            if mine == theirs { "" } else { " beside a TCP listener" }
                        ),
                    )
                })
            } else {
                let same_host = other
                    .hostname
                    .as_deref()
                    .unwrap_or("")
                    .eq_ignore_ascii_case(listener.hostname.as_deref().unwrap_or(""));
                same_host.then(|| {
                    (
                        "HostnameConflict",
                        "another listener has this port and hostname".to_string(),
                    )
                })
            }
        })
}

/// What a listener that takes TCPRoutes or UDPRoutes tells: its port is not where clients
/// connect.
fn l4_note(listener: &Listener) -> String {
    format!(
        "{protocol}Routes attached here become private routes of the Gateway's tunnel: WARP clients reach each backend Service at its cluster IPs and cluster DNS name, on the Service's ports (port {port} of this listener is not used)",
        protocol = listener.protocol,
        port = listener.port
    )
}

/// The status of every listener of `gateway`; `programmed`: the Gateway's tunnel has a
/// Cloudflare tunnel.
pub(super) fn listener_statuses(
    gateway: &Gateway,
    current: &GatewayStatus,
    programmed: bool,
    attached: &Attached,
    now: &Time,
) -> Vec<ListenerStatus> {
    let key = (
        gateway.metadata.namespace.clone().unwrap_or_default(),
        gateway.metadata.name.clone().unwrap_or_default(),
    );
    let listeners = &gateway.spec.listeners;
    listeners
        .iter()
        .enumerate()
        .map(|(i, listener)| {
            let previous = current
                .listeners
                .iter()
                .find(|l| l.name == listener.name)
                .map(|l| l.conditions.as_slice())
                .unwrap_or_default();
            let mut lc = conditions(previous, &gateway.metadata, now);
            let protocol_ok = supported_protocol(listener);
            let (kinds, invalid_kind) = listener_kinds(listener);
            if !protocol_ok {
                lc.set(
                    "Accepted",
                    false,
                    "UnsupportedProtocol",
                    format!(
                        "protocol {} cannot be served through a tunnel; use HTTP, HTTPS, TCP or UDP",
                        listener.protocol
                    ),
                );
            } else if is_l4(&listener.protocol) {
                lc.set("Accepted", true, "Accepted", l4_note(listener));
            } else {
                lc.set("Accepted", true, "Accepted", "");
            }
            if invalid_kind {
                let served = match protocol_kinds(&listener.protocol) {
                    [] => "no route kind".to_string(),
                    kinds => kinds.join(" and "),
                };
                lc.set(
                    "ResolvedRefs",
                    false,
                    "InvalidRouteKinds",
                    format!(
                        "allowedRoutes.kinds: a {} listener serves only {served}",
                        listener.protocol
                    ),
                );
            } else {
                lc.set("ResolvedRefs", true, "ResolvedRefs", "");
            }
            let conflicted = conflict(listeners, i);
            match &conflicted {
                Some((reason, message)) => lc.set("Conflicted", true, reason, message.clone()),
                None => lc.set("Conflicted", false, "NoConflicts", ""),
            }
            if programmed && protocol_ok && conflicted.is_none() {
                lc.set("Programmed", true, "Programmed", "");
            } else {
                lc.set(
                    "Programmed",
                    false,
                    if programmed { "Invalid" } else { "Pending" },
                    "",
                );
            }
            ListenerStatus {
                name: listener.name.clone(),
                supported_kinds: kinds
                    .iter()
                    .map(|k| RouteGroupKind {
                        group: Some(GATEWAY_GROUP.to_string()),
                        kind: k.to_string(),
                    })
                    .collect(),
                attached_routes: attached
                    .get(&(key.0.clone(), key.1.clone(), i))
                    .copied()
                    .unwrap_or(0),
                conditions: lc.out,
            }
        })
        .collect()
}
