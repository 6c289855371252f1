//! Which route kinds each listener protocol takes. HTTP and HTTPS listeners take HTTPRoutes and
//! GRPCRoutes (the edge terminates TLS); TCP listeners TCPRoutes and UDP listeners UDPRoutes,
//! whose backends become private routes of the Gateway's tunnel; TLS listeners nothing
//! (a tunnel cannot pass TLS through by SNI).
//!
//! AllowedRoutes.kinds: "When unspecified or empty, the kinds of Routes selected are determined
//! using the Listener protocol"; a kind named there must be "compatible with the application
//! protocol specified in the Listener's Protocol field", else the listener's `ResolvedRefs` is
//! False with reason `InvalidRouteKinds`. ListenerStatus.supportedKinds "MUST represent the kinds
//! supported by an implementation for that Listener configuration".
use cftunnel_types::gateway::{GATEWAY_GROUP, Listener};

/// The route kinds of HTTP and HTTPS listeners.
const HTTP_KINDS: &[&str] = &["HTTPRoute", "GRPCRoute"];

/// The route kinds of a listener of `protocol`: empty for a protocol a tunnel cannot serve.
pub(crate) fn protocol_kinds(protocol: &str) -> &'static [&'static str] {
    match protocol {
        "HTTP" | "HTTPS" => HTTP_KINDS,
        "TCP" => &["TCPRoute"],
        "UDP" => &["UDPRoute"],
        _ => &[],
    }
}

/// Is `protocol` a Layer 4 one (TCP or UDP), whose routes are private routes?
pub(crate) fn is_l4(protocol: &str) -> bool {
    matches!(protocol, "TCP" | "UDP")
}

/// Is this listener's protocol one a tunnel serves: HTTP and HTTPS (the edge terminates TLS),
/// TCP and UDP (private routes)?
pub(crate) fn supported_protocol(listener: &Listener) -> bool {
    !protocol_kinds(&listener.protocol).is_empty()
}

/// The route kinds a listener admits that cftunnel serves for its protocol, and whether it named
/// a kind that it cannot serve (another group, a kind cftunnel does not serve, or one of
/// another protocol: a TCP listener naming HTTPRoute).
pub(crate) fn listener_kinds(listener: &Listener) -> (Vec<&'static str>, bool) {
    let served = protocol_kinds(&listener.protocol);
    let Some(kinds) = listener
        .allowed_routes
        .as_ref()
        .and_then(|a| a.kinds.as_ref())
        .filter(|k| !k.is_empty())
    else {
        return (served.to_vec(), false);
    };
    let mut out = Vec::new();
    let mut invalid = false;
    for kind in kinds {
        let group_ok = kind.group.as_deref().is_none_or(|g| g == GATEWAY_GROUP);
        match served.iter().find(|k| **k == kind.kind) {
            Some(k) if group_ok => {
                if !out.contains(k) {
                    out.push(*k);
                }
            }
            _ => invalid = true,
        }
    }
    (out, invalid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn listener(protocol: &str, kinds: Option<serde_json::Value>) -> Listener {
        let mut value = json!({"name": "l", "port": 5432, "protocol": protocol});
        if let Some(kinds) = kinds {
            value["allowedRoutes"] = json!({ "kinds": kinds });
        }
        serde_json::from_value(value).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_listener_takes_the_kinds_of_its_protocol_and_refuses_the_others() {
        assert_eq!(
            listener_kinds(&listener("HTTPS", None)),
            (vec!["HTTPRoute", "GRPCRoute"], false)
        );
        assert_eq!(
            listener_kinds(&listener("TCP", None)),
            (vec!["TCPRoute"], false)
        );
        assert_eq!(
            listener_kinds(&listener("UDP", None)),
            (vec!["UDPRoute"], false)
        );
        // A TLS listener cannot be served: it supports no kind.
        assert_eq!(listener_kinds(&listener("TLS", None)), (vec![], false));
        assert!(!supported_protocol(&listener("TLS", None)));
        // A kind of another protocol is invalid, the valid ones are kept.
        let mixed = json!([{"kind": "HTTPRoute"}, {"group": GATEWAY_GROUP, "kind": "TCPRoute"}]);
        assert_eq!(
            listener_kinds(&listener("TCP", Some(mixed))),
            (vec!["TCPRoute"], true)
        );
        let other_group = json!([{"group": "example.com", "kind": "UDPRoute"}]);
        assert_eq!(
            listener_kinds(&listener("UDP", Some(other_group))),
            (vec![], true)
        );
    }
}
