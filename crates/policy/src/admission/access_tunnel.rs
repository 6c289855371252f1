//! Validation of AccessTunnel: the target hostname, protocol, Service and token Secret.
use crate::rules::Verdict;
use crate::rules::syntax::{hostname_problem, is_dns_subdomain, is_service_name};
use cftunnel_types::access_tunnel::{ACCESS_PROTOCOLS, AccessTunnelFields};

/// All rules of an AccessTunnel.
pub fn validate(fields: &AccessTunnelFields) -> Verdict {
    let mut v = Verdict::default();
    let target = &fields.target;
    if let Some(problem) = hostname_problem(&target.fqdn) {
        v.deny(
            "target.fqdn",
            format!(
                "{:?} {problem}; give the hostname of the Access application, e.g. ssh.example.com",
                target.fqdn
            ),
        );
    } else if target.fqdn.starts_with("*.") {
        v.deny(
            "target.fqdn",
            format!(
                "{:?} is a wildcard; cloudflared access connects to one hostname, give it",
                target.fqdn
            ),
        );
    }
    if let Some(protocol) = target.protocol.as_deref().filter(|p| !p.is_empty())
        && !ACCESS_PROTOCOLS.contains(&protocol)
    {
        v.deny(
            "target.protocol",
            format!("{protocol:?} is not supported; use tcp, rdp, smb or ssh"),
        );
    }
    if let Some(image) = target.image.as_deref().filter(|i| !i.is_empty())
        && !crate::render::is_pinned(image)
    {
        v.deny(
            "target.image",
            format!("{image:?} is not pinned; give a version tag such as cloudflare/cloudflared:2026.11.0, or leave it unset for the operator's image"),
        );
    }
    if let Some(svc) = &target.svc {
        if let Some(name) = svc.name.as_deref().filter(|n| !n.is_empty())
            && !is_service_name(name)
        {
            v.deny(
                "target.svc.name",
                format!("{name:?} is not a valid Service name; use lowercase letters, digits and '-', starting with a letter"),
            );
        }
        if let Some(port) = svc.port
            && !(1..=65535).contains(&port)
        {
            v.deny(
                "target.svc.port",
                format!("{port} is out of range; use 1 to 65535"),
            );
        }
    }
    if let Some(token) = &fields.service_token {
        if !is_dns_subdomain(&token.secret_ref) {
            v.deny(
                "serviceToken.secretRef",
                format!(
                    "{:?} is not a valid Secret name; use lowercase letters, digits, '-' and '.'",
                    token.secret_ref
                ),
            );
        }
        for (field, key) in [
            (
                "serviceToken.CLOUDFLARE_ACCESS_SERVICE_TOKEN_ID",
                token.id_key(),
            ),
            (
                "serviceToken.CLOUDFLARE_ACCESS_SERVICE_TOKEN_TOKEN",
                token.secret_key(),
            ),
        ] {
            if !is_secret_key(key) {
                v.deny(
                    field,
                    format!("{key:?} is not a Secret key; use letters, digits, '-', '_' and '.'"),
                );
            }
        }
    }
    v
}

fn is_secret_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= 253
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fields(value: serde_json::Value) -> AccessTunnelFields {
        serde_json::from_value(value).unwrap_or_else(|e| panic!("fields: {e}"))
    }

    #[test]
    fn the_go_operator_example_is_allowed() {
        let v = validate(&fields(json!({
            "target": {"fqdn": "ssh.example.com", "protocol": "ssh", "svc": {"port": 2222}},
            "serviceToken": {"secretRef": "access-token"},
        })));
        assert!(v.is_allowed(), "{:?}", v.denial_message());
    }

    #[test]
    fn every_bad_field_is_named_in_one_answer() {
        let v = validate(&fields(json!({
            "target": {"fqdn": "*.example.com", "protocol": "udp", "image": "cloudflare/cloudflared:latest",
                       "svc": {"name": "Bad_Name", "port": 70000}},
            "serviceToken": {"secretRef": "", "CLOUDFLARE_ACCESS_SERVICE_TOKEN_ID": "a/b"},
        })));
        assert_eq!(
            v.denial_message().unwrap_or_default(),
            [
                "target.fqdn: \"*.example.com\" is a wildcard; cloudflared access connects to one hostname, give it",
                "target.protocol: \"udp\" is not supported; use tcp, rdp, smb or ssh",
                "target.image: \"cloudflare/cloudflared:latest\" is not pinned; give a version tag such as cloudflare/cloudflared:2026.11.0, or leave it unset for the operator's image",
                "target.svc.name: \"Bad_Name\" is not a valid Service name; use lowercase letters, digits and '-', starting with a letter",
                "target.svc.port: 70000 is out of range; use 1 to 65535",
                "serviceToken.secretRef: \"\" is not a valid Secret name; use lowercase letters, digits, '-' and '.'",
                "serviceToken.CLOUDFLARE_ACCESS_SERVICE_TOKEN_ID: \"a/b\" is not a Secret key; use letters, digits, '-', '_' and '.'",
            ]
            .join("; ")
        );
    }
}
