//! Labels of the managed objects (docs/design.md §1.5) and the immutable Deployment selector (docs/design.md §3.4).
//!
//! The Go operator put one label set (its `labelsForTunnel`) on the tunnel object and on the
//! Secret, ConfigMap and Deployment it managed, as the Deployment's selector and on the pod
//! template: `cfargotunnel.com/tunnel=<object name>`, `cfargotunnel.com/app=cloudflared`,
//! `cfargotunnel.com/id`, `cfargotunnel.com/name` (the tunnel's name on Cloudflare),
//! `cfargotunnel.com/domain` and `cfargotunnel.com/is-cluster-tunnel` (always `"false"`, also on
//! ClusterTunnels). [`object_labels`] writes the same keys on every managed object and on the pod
//! template, so selectors written against the Go operator's pods keep matching
//! (`-l cfargotunnel.com/app=cloudflared`, `-l cfargotunnel.com/tunnel=<name>`, by id or domain).
//! Two deliberate differences: `is-cluster-tunnel` is `"true"` on a ClusterTunnel's objects, and
//! only three of the labels form the selector, whose values never change.
use std::collections::BTreeMap;

use cftunnel_types::TunnelKind;
use cftunnel_types::names::{
    APP_CLOUDFLARED, LABEL_APP, LABEL_DOMAIN, LABEL_IS_CLUSTER_TUNNEL, LABEL_KIND, LABEL_TUNNEL,
    LABEL_TUNNEL_ID, LABEL_TUNNEL_NAME,
};

/// The value of `cfargotunnel.com/kind` on a TunnelBinding.
pub(crate) const BINDING_KIND_VALUE: &str = "TunnelBinding";

/// The labels a TunnelBinding carries: `cfargotunnel.com/name=<tunnelRef.name>` and
/// `cfargotunnel.com/kind=TunnelBinding`. The Go operator's binding reconciler (`labelsForBinding`)
/// wrote `tunnelRef.name` and `binding.Kind`, which is the binding's own kind from its type
/// metadata (`TunnelBinding`), not the kind of its tunnel; it then built each tunnel's config
/// from the bindings listed with exactly these two labels, so after a rollback a binding
/// without them is not routed until the Go operator relabels it. The name label is `None`
/// when `tunnelRef.name` is not a valid label value (longer than 63 characters).
pub fn binding_labels(tunnel_ref_name: &str) -> [(&'static str, Option<String>); 2] {
    let name = (!tunnel_ref_name.is_empty() && is_valid_label_value(tunnel_ref_name))
        .then(|| tunnel_ref_name.to_string());
    [
        (LABEL_TUNNEL_NAME, name),
        (LABEL_KIND, Some(BINDING_KIND_VALUE.to_string())),
    ]
}

/// Kubernetes label value rules: at most 63 characters, `[-_.a-zA-Z0-9]`, alphanumeric at both
/// ends (the empty value is valid).
pub(crate) fn is_valid_label_value(value: &str) -> bool {
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
    fn a_binding_is_labelled_with_its_tunnel_name_and_its_own_kind() {
        assert_eq!(
            binding_labels("edge"),
            [
                ("cfargotunnel.com/name", Some("edge".to_string())),
                ("cfargotunnel.com/kind", Some("TunnelBinding".to_string())),
            ]
        );
        let long = "a".repeat(64);
        assert_eq!(binding_labels(&long)[0], ("cfargotunnel.com/name", None));
    }

    #[test]
    fn selector_is_refused_for_an_invalid_cr_name() {
        assert_eq!(selector_labels(TunnelKind::Tunnel, &"x".repeat(64)), None);
        assert_eq!(selector_labels(TunnelKind::Tunnel, ""), None);
    }
}
