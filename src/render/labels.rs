//! Labels of the managed objects (docs/design.md §1.5) and the immutable Deployment selector (docs/design.md §3.4).
use std::collections::BTreeMap;

use crate::admission::TunnelKind;
use crate::api::names::{
    APP_CLOUDFLARED, LABEL_APP, LABEL_DOMAIN, LABEL_IS_CLUSTER_TUNNEL, LABEL_TUNNEL,
    LABEL_TUNNEL_ID, LABEL_TUNNEL_NAME,
};

/// Kubernetes label value rules: at most 63 characters, `[-_.a-zA-Z0-9]`, alphanumeric at both
/// ends (the empty value is valid).
pub fn is_valid_label_value(value: &str) -> bool {
    if value.is_empty() {
        return true;
    }
    let bytes = value.as_bytes();
    value.len() <= 63
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && bytes.first().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
}

/// `"true"` for a ClusterTunnel, `"false"` for a Tunnel.
pub fn is_cluster_tunnel_value(kind: TunnelKind) -> &'static str {
    match kind {
        TunnelKind::ClusterTunnel => "true",
        TunnelKind::Tunnel => "false",
    }
}

/// The Deployment selector: only values that never change for an object. `None` when the CR
/// name is not a valid label value (the API refuses such names, so this is a broken input).
pub fn selector_labels(kind: TunnelKind, cr_name: &str) -> Option<BTreeMap<String, String>> {
    if cr_name.is_empty() || !is_valid_label_value(cr_name) {
        return None;
    }
    Some(BTreeMap::from([
        (LABEL_TUNNEL.to_string(), cr_name.to_string()),
        (LABEL_APP.to_string(), APP_CLOUDFLARED.to_string()),
        (
            LABEL_IS_CLUSTER_TUNNEL.to_string(),
            is_cluster_tunnel_value(kind).to_string(),
        ),
    ]))
}

/// All labels of §1.5: the selector labels plus id, name and domain, each omitted when its value
/// would be empty or invalid (a long or spaced tunnel name never fails a render).
pub fn object_labels(
    selector: &BTreeMap<String, String>,
    tunnel_id: &str,
    tunnel_name: &str,
    domain: &str,
) -> BTreeMap<String, String> {
    let mut labels = selector.clone();
    for (key, value) in [
        (LABEL_TUNNEL_ID, tunnel_id),
        (LABEL_TUNNEL_NAME, tunnel_name),
        (LABEL_DOMAIN, domain),
    ] {
        if !value.is_empty() && is_valid_label_value(value) {
            labels.insert(key.to_string(), value.to_string());
        }
    }
    labels
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_value_rules() {
        assert!(is_valid_label_value(""));
        assert!(is_valid_label_value("a"));
        assert!(is_valid_label_value("my_tunnel.v-2"));
        assert!(is_valid_label_value(&"a".repeat(63)));
        assert!(!is_valid_label_value(&"a".repeat(64)));
        assert!(!is_valid_label_value("-a"));
        assert!(!is_valid_label_value("a."));
        assert!(!is_valid_label_value("my tunnel"));
        assert!(!is_valid_label_value("a/b"));
    }

    #[test]
    fn invalid_values_are_omitted_never_fatal() {
        let selector = selector_labels(TunnelKind::Tunnel, "web").unwrap_or_default();
        let labels = object_labels(&selector, "abc-123", &"n".repeat(64), "example.com");
        assert_eq!(
            labels.keys().map(String::as_str).collect::<Vec<_>>(),
            vec![
                "cfargotunnel.com/app",
                "cfargotunnel.com/domain",
                "cfargotunnel.com/id",
                "cfargotunnel.com/is-cluster-tunnel",
                "cfargotunnel.com/tunnel",
            ]
        );
    }

    #[test]
    fn selector_is_refused_for_an_invalid_cr_name() {
        assert_eq!(selector_labels(TunnelKind::Tunnel, &"x".repeat(64)), None);
        assert_eq!(selector_labels(TunnelKind::Tunnel, ""), None);
    }
}
