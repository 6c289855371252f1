//! The objects of an AccessTunnel: a hardened `cloudflared access` Deployment, the Service it is
//! reached through, its PodDisruptionBudget and ServiceAccount. Pure: the reconciler applies
//! them. The service token reaches cloudflared only through environment variables read from
//! the Secret by the kubelet (`TUNNEL_SERVICE_TOKEN_ID`, `TUNNEL_SERVICE_TOKEN_SECRET`, the
//! variables `cloudflared access` reads for `--service-token-id`/`--service-token-secret`):
//! never in arguments, where the Go operator put it (visible to anyone who can read the
//! Deployment). A change of the token changes `checksum`, which rolls the pods.
use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::RenderError;
use crate::hardening::CLOUDFLARED_CONTAINER;
use crate::hardening::mutate::harden_pod_spec;
use cftunnel_types::access_tunnel::AccessTunnel;
use cftunnel_types::conversion::GO_OPERATOR_DEFAULT_IMAGES;
use cftunnel_types::names::{ANNOTATION_CHECKSUM, APP_CLOUDFLARED, LABEL_APP};

/// The port cloudflared listens on in the pod (the Go operator's).
pub(crate) const LISTEN_PORT: i32 = 8000;
/// Label naming the AccessTunnel on its objects.
pub(crate) const LABEL_ACCESS_TUNNEL: &str = "cfargotunnel.com/access-tunnel";

/// What an AccessTunnel renders to, in apply order.
#[derive(Clone, Debug, PartialEq)]
pub struct AccessRendered {
    pub service_account: Value,
    pub deployment: Value,
    pub service: Value,
    pub pdb: Value,
}

/// The Deployment selector: the Go operator's labels (`app: cloudflared`, `name: <object>`), so
/// selectors written for its access pods keep matching.
pub(crate) fn access_selector(name: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("app".to_string(), "cloudflared".to_string()),
        ("name".to_string(), name.to_string()),
    ])
}

impl AccessRendered {
    /// Every object, in apply order: what the reconciler applies and `cftunnel render` prints.
    pub fn objects(&self) -> [&Value; 4] {
        [
            &self.service_account,
            &self.deployment,
            &self.service,
            &self.pdb,
        ]
    }

    /// Multi-document YAML in apply order; keys sorted, so equal renders print equal bytes.
    pub fn to_yaml(&self) -> Result<String, RenderError> {
        let mut out = String::new();
        for object in self.objects() {
            out.push_str("---\n");
            out.push_str(
                &serde_yaml_ng::to_string(object)
                    .map_err(|e| RenderError::Encode(e.to_string()))?,
            );
        }
        Ok(out)
    }
}

/// Renders the objects of `at`, with `image` unless the object pins its own and the token
/// `checksum` (empty without a service token).
pub fn render_access(
    at: &AccessTunnel,
    default_image: &str,
    checksum: &str,
) -> Result<AccessRendered, RenderError> {
    let name = at.metadata.name.clone().unwrap_or_default();
    if !super::labels::is_valid_label_value(&name) || name.is_empty() {
        return Err(RenderError::InvalidName(name));
    }
    let namespace = at.metadata.namespace.clone().unwrap_or_default();
    let target = &at.spec.target;
    // The Go operator's schema defaulted `target.image` (2025.4.0): that default pins nothing.
    let image = target
        .image
        .as_deref()
        .filter(|i| !i.is_empty() && !GO_OPERATOR_DEFAULT_IMAGES.contains(i))
        .unwrap_or(default_image);
    if !super::is_pinned(image) {
        return Err(RenderError::UnpinnedImage(image.to_string()));
    }
    let selector = access_selector(&name);
    let mut labels = selector.clone();
    labels.insert(LABEL_ACCESS_TUNNEL.to_string(), name.clone());
    let owner = json!({
        "apiVersion": "networking.cfargotunnel.com/v1alpha1",
        "kind": "AccessTunnel",
        "name": name,
        "uid": at.metadata.uid.clone().unwrap_or_default(),
        "controller": true,
        "blockOwnerDeletion": true,
    });
    let meta = |object_name: &str| {
        json!({
            "name": object_name,
            "namespace": namespace,
            "labels": labels,
            "ownerReferences": [owner],
        })
    };
    // The term's shared Deployment watch selects `cfargotunnel.com/app=cloudflared`: the
    // Deployment (not its pods, which tunnel selectors must not match) carries it too.
    let mut deployment_meta = meta(&name);
    deployment_meta["labels"][LABEL_APP] = json!(APP_CLOUDFLARED);
    let service_account_name = format!("{name}-access");
    let protocol = target.protocol();
    let mut env = Vec::new();
    if let Some(token) = &at.spec.service_token {
        for (variable, key) in [
            ("TUNNEL_SERVICE_TOKEN_ID", token.id_key()),
            ("TUNNEL_SERVICE_TOKEN_SECRET", token.secret_key()),
        ] {
            env.push(json!({
                "name": variable,
                "valueFrom": {"secretKeyRef": {"name": token.secret_ref, "key": key}},
            }));
        }
    }
    let args = [
        "access",
        protocol,
        "--hostname",
        target.fqdn.as_str(),
        "--listener",
        &format!("0.0.0.0:{LISTEN_PORT}"),
    ];
    let mut pod = json!({
        "serviceAccountName": service_account_name,
        "containers": [{
            "name": CLOUDFLARED_CONTAINER,
            "image": image,
            "args": args,
            "env": env,
            "ports": [{"name": "access", "containerPort": LISTEN_PORT, "protocol": "TCP"}],
        }],
    });
    harden_pod_spec(&mut pod);
    let deployment = json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": deployment_meta,
        "spec": {
            "replicas": super::objects::DEFAULT_REPLICAS,
            "selector": {"matchLabels": selector},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}},
            "template": {
                "metadata": {"labels": labels, "annotations": {ANNOTATION_CHECKSUM: checksum}},
                "spec": pod,
            },
        },
    });
    let service_name = target
        .svc
        .as_ref()
        .and_then(|s| s.name.clone())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| name.clone());
    let service = json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta(&service_name),
        "spec": {
            "selector": selector,
            "ports": [{
                "name": protocol,
                "protocol": "TCP",
                "port": target.service_port(),
                "targetPort": LISTEN_PORT,
            }],
        },
    });
    let pdb = json!({
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": meta(&name),
        "spec": {
            "maxUnavailable": 1,
            "selector": {"matchLabels": selector},
            "unhealthyPodEvictionPolicy": "AlwaysAllow",
        },
    });
    let service_account = json!({
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": meta(&service_account_name),
        "automountServiceAccountToken": false,
    });
    Ok(AccessRendered {
        service_account,
        deployment,
        service,
        pdb,
    })
}

/// The pod-template checksum of a service token: changes whenever either value does. Only
/// the hash is written; the values never leave the Secret.
pub fn token_checksum(id: &[u8], secret: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    let mut hash = Sha256::new();
    hash.update((id.len() as u64).to_be_bytes());
    hash.update(id);
    hash.update(secret);
    hash.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn access(value: Value) -> AccessTunnel {
        serde_json::from_value(value).unwrap_or_else(|e| panic!("access: {e}"))
    }

    fn ssh() -> AccessTunnel {
        access(json!({
            "apiVersion": "networking.cfargotunnel.com/v1alpha1", "kind": "AccessTunnel",
            "metadata": {"name": "bastion", "namespace": "ops", "uid": "u1"},
            "target": {"fqdn": "ssh.example.com", "protocol": "ssh", "svc": {"name": "bastion-ssh", "port": 2222}},
            "serviceToken": {"secretRef": "access-token"},
        }))
    }

    #[test]
    fn the_client_runs_hardened_with_the_token_in_env_never_in_args() {
        let out = render_access(&ssh(), "cloudflare/cloudflared:2026.11.0", "abc")
            .unwrap_or_else(|e| panic!("{e}"));
        let container = &out.deployment["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(
            container["args"],
            json!([
                "access",
                "ssh",
                "--hostname",
                "ssh.example.com",
                "--listener",
                "0.0.0.0:8000"
            ])
        );
        assert_eq!(
            container["env"],
            json!([
                {"name": "TUNNEL_SERVICE_TOKEN_ID", "valueFrom": {"secretKeyRef": {"name": "access-token", "key": "CLOUDFLARE_ACCESS_SERVICE_TOKEN_ID"}}},
                {"name": "TUNNEL_SERVICE_TOKEN_SECRET", "valueFrom": {"secretKeyRef": {"name": "access-token", "key": "CLOUDFLARE_ACCESS_SERVICE_TOKEN_TOKEN"}}},
            ])
        );
        assert_eq!(container["image"], "cloudflare/cloudflared:2026.11.0");
        assert_eq!(container["securityContext"]["readOnlyRootFilesystem"], true);
        assert_eq!(
            container["securityContext"]["allowPrivilegeEscalation"],
            false
        );
        let pod = &out.deployment["spec"]["template"]["spec"];
        assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
        assert_eq!(pod["automountServiceAccountToken"], false);
        assert_eq!(
            out.deployment["spec"]["template"]["metadata"]["annotations"][ANNOTATION_CHECKSUM],
            "abc"
        );
        assert_eq!(
            out.deployment["spec"]["selector"]["matchLabels"],
            json!({"app": "cloudflared", "name": "bastion"})
        );
        assert_eq!(out.service["metadata"]["name"], "bastion-ssh");
        assert_eq!(
            out.service["spec"]["ports"],
            json!([{"name": "ssh", "protocol": "TCP", "port": 2222, "targetPort": 8000}])
        );
        assert_eq!(out.pdb["spec"]["maxUnavailable"], 1);
    }

    #[test]
    fn defaults_and_an_unpinned_image_refused() {
        let plain = access(json!({
            "apiVersion": "networking.cfargotunnel.com/v1alpha1", "kind": "AccessTunnel",
            "metadata": {"name": "db", "namespace": "ops"},
            "target": {"fqdn": "db.example.com"},
        }));
        let out = render_access(&plain, "cloudflare/cloudflared:2026.11.0", "")
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(out.service["metadata"]["name"], "db");
        assert_eq!(out.service["spec"]["ports"][0]["port"], 8000);
        assert_eq!(
            out.deployment["spec"]["template"]["spec"]["containers"][0]["args"][1],
            "tcp"
        );
        assert_eq!(
            out.deployment["spec"]["template"]["spec"]["containers"][0]["env"],
            json!([])
        );
        let mut go_era = plain.clone();
        go_era.spec.target.image = Some("cloudflare/cloudflared:2025.4.0".into());
        let out = render_access(&go_era, "cloudflare/cloudflared:2026.11.0", "")
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            out.deployment["spec"]["template"]["spec"]["containers"][0]["image"],
            "cloudflare/cloudflared:2026.11.0",
            "the Go operator's default image is no pin"
        );
        let err = render_access(&plain, "cloudflare/cloudflared:latest", "")
            .err()
            .map(|e| e.to_string());
        assert!(err.is_some_and(|e| e.contains("is not pinned")));
    }

    #[test]
    fn the_checksum_follows_either_token_value() {
        let a = token_checksum(b"id", b"secret");
        assert_eq!(a.len(), 64);
        assert_ne!(a, token_checksum(b"id", b"secret2"));
        assert_ne!(a, token_checksum(b"id2", b"secret"));
        assert_ne!(token_checksum(b"ab", b"c"), token_checksum(b"a", b"bc"));
    }
}
