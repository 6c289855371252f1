//! AccessTunnels in `cftunnel render`: the objects `render::access_tunnel` gives for the object, the
//! very ones the AccessTunnel reconciler applies. The service token never enters the output: it
//! reaches the pods as an environment `valueFrom` reference, and the pod-template checksum, which
//! the reconciler computes from the token's values, is computed from [`REDACTED`] placeholders
//! (as a Tunnel's checksum is computed from its redacted credentials).
use serde_json::Value;

use super::{PLACEHOLDER_UID, REDACTED};
use cftunnel_policy::render::access_tunnel::{render_access, token_checksum};
use cftunnel_types::access_tunnel::AccessTunnel;

/// The YAML of one AccessTunnel document, or why it cannot be rendered.
pub(super) fn render(value: &Value, namespace: &str, image: &str) -> Result<String, String> {
    let mut at: AccessTunnel = serde_json::from_value(value.clone()).map_err(|e| {
        format!("does not match the AccessTunnel v1alpha1 schema ({e}); fix the manifest")
    })?;
    at.metadata.namespace = Some(namespace.to_string());
    if at.metadata.uid.as_deref().is_none_or(str::is_empty) {
        at.metadata.uid = Some(PLACEHOLDER_UID.to_string());
    }
    if let Some(message) =
        cftunnel_policy::admission::access_tunnel::validate(&at.spec).denial_message()
    {
        return Err(message);
    }
    let checksum = match &at.spec.service_token {
        None => String::new(),
        Some(_) => token_checksum(REDACTED.as_bytes(), REDACTED.as_bytes()),
    };
    render_access(&at, image, &checksum)
        .and_then(|rendered| rendered.to_yaml())
        .map_err(|e| e.to_string())
}
