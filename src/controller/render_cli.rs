//! `cftunnel render` (SPEC §6): what the reconciler would apply for Tunnels and ClusterTunnels
//! given as files, without a cluster or Cloudflare. Deterministic: no secret is ever generated;
//! what only Cloudflare knows is a fixed placeholder and the Secret's values are redacted.
use std::io::{Read, Write};

use serde_json::Value;

use super::render_input::{TunnelFacts, render_options, tunnel_input};
use crate::admission::TunnelKind;
use crate::render::{self, OwnerIdentity, TunnelCredentials};
use crate::validate::decode::{Decoded, Outcome, TunnelObject, decode};
use crate::validate::{DEFAULT_NAMESPACE, EXIT_UNREADABLE, read_sources};

/// Tunnel id rendered when the input carries no `status.tunnelId`.
pub const PLACEHOLDER_TUNNEL_ID: &str = "00000000-0000-0000-0000-000000000000";
/// Owner uid rendered when the input carries no `metadata.uid`.
pub const PLACEHOLDER_UID: &str = "00000000-0000-0000-0000-000000000000";
/// Account tag rendered when neither status nor spec names the account id.
pub const PLACEHOLDER_ACCOUNT: &str = "00000000000000000000000000000000";
/// Stands in for the tunnel secret, which only the cluster holds.
pub const REDACTED: &str = "REDACTED";

/// Settings of one `render` run.
#[derive(Clone, Debug)]
pub struct RenderSettings {
    pub cluster_resource_namespace: String,
    pub cloudflared_image: String,
}

fn non_empty(value: Option<&String>) -> Option<String> {
    value.filter(|v| !v.is_empty()).cloned()
}

/// The facts the input carries; everything else is a placeholder.
fn offline_facts(tunnel: &TunnelObject) -> TunnelFacts {
    let status = tunnel.status.clone().unwrap_or_default();
    let spec = &tunnel.spec;
    let tunnel_id =
        non_empty(status.tunnel_id.as_ref()).unwrap_or_else(|| PLACEHOLDER_TUNNEL_ID.to_string());
    let tunnel_name = non_empty(status.tunnel_name.as_ref())
        .or_else(|| spec.new_tunnel.as_ref().map(|n| n.name.clone()))
        .or_else(|| spec.existing_tunnel.as_ref().and_then(|e| e.name.clone()))
        .unwrap_or_default();
    let account_tag = non_empty(status.account_id.as_ref())
        .or_else(|| non_empty(spec.cloudflare.account_id.as_ref()))
        .unwrap_or_else(|| PLACEHOLDER_ACCOUNT.to_string());
    TunnelFacts {
        tunnel_id: tunnel_id.clone(),
        tunnel_name,
        credentials: TunnelCredentials {
            account_tag,
            secret_b64: REDACTED.to_string(),
            tunnel_id,
        },
        origin_ca_pem: None,
    }
}

fn identity(tunnel: &TunnelObject, value: &Value, settings: &RenderSettings) -> OwnerIdentity {
    let namespace = match tunnel.kind {
        TunnelKind::ClusterTunnel => settings.cluster_resource_namespace.clone(),
        _ => tunnel.namespace.clone(),
    };
    let uid = value
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .filter(|u| !u.is_empty())
        .unwrap_or(PLACEHOLDER_UID);
    OwnerIdentity {
        kind: tunnel.kind,
        namespace,
        name: tunnel.name.clone(),
        uid: uid.to_string(),
    }
}

/// The whole command: YAML on `out`, diagnostics on `err`; returns the exit code (0 rendered,
/// 1 an object could not be rendered or none was given, 2 unreadable input).
pub fn run(
    sources: &[String],
    settings: &RenderSettings,
    stdin: &mut dyn Read,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> std::io::Result<u8> {
    let documents = match read_sources(sources, stdin) {
        Ok(documents) => documents,
        Err(e) => {
            writeln!(err, "error: {e}")?;
            return Ok(EXIT_UNREADABLE);
        }
    };
    let options = render_options(&settings.cloudflared_image);
    let mut yaml = String::new();
    let mut failed = false;
    let mut rendered_any = false;
    for document in &documents {
        let tunnel = match decode(document, DEFAULT_NAMESPACE) {
            Outcome::Decoded(_, decoded) => match *decoded {
                Decoded::Tunnel(tunnel) => tunnel,
                _ => continue,
            },
            Outcome::Unreadable(object, violation) => {
                writeln!(err, "{}: {object}: {violation}", document.origin)?;
                failed = true;
                continue;
            }
            Outcome::Ignored => continue,
        };
        let owner = identity(&tunnel, &document.value, settings);
        let input = tunnel_input(owner, tunnel.spec.clone(), offline_facts(&tunnel));
        match render::render_all(&input, &options).and_then(|r| r.to_yaml()) {
            Ok(text) => {
                yaml.push_str(&text);
                rendered_any = true;
            }
            Err(e) => {
                writeln!(
                    err,
                    "{}: {:?} {}: {e}",
                    document.origin, tunnel.kind, tunnel.name
                )?;
                failed = true;
            }
        }
    }
    if !rendered_any && !failed {
        writeln!(err, "error: the input holds no Tunnel or ClusterTunnel")?;
        return Ok(1);
    }
    out.write_all(yaml.as_bytes())?;
    Ok(u8::from(failed))
}
