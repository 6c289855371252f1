//! Pure builders of everything the tunnel reconciler applies (docs/design.md §3.4, §3.5); `cftunnel render`
//! prints the same objects. No I/O, no randomness: equal input gives equal bytes.
pub mod access_tunnel;
pub mod checksum;
pub mod config;
pub mod deploy_patch;
pub mod ingress;
pub mod input;
pub mod labels;
pub mod objects;
pub mod protection;
pub mod remote;
pub mod remote_merge;
pub mod strategic_merge;
pub mod strategic_merge_keys;

#[cfg(test)]
mod cloudflared_check;
#[cfg(test)]
mod cloudflared_check_ingress_paths;
#[cfg(test)]
mod protocol_tests;
#[cfg(test)]
pub(crate) mod record;
#[cfg(test)]
mod remote_tests;
#[cfg(test)]
mod route_proptests;
#[cfg(test)]
mod strategic_merge_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod warp_tests;

use std::fmt;

use k8s_openapi::api::core::v1::{ConfigMap, Secret, ServiceAccount};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use serde::Serialize;
use serde_json::Value;

use cftunnel_types::ConfigSource;

pub use deploy_patch::DeployPatchError;
pub use input::{OwnerIdentity, RenderOptions, TunnelCredentials, TunnelInput};
pub use objects::ObjectNames;

/// Why a tunnel cannot be rendered. Messages never carry credentials.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    #[error("route {hostname}: {reason}")]
    InvalidRoute { hostname: String, reason: String },
    #[error("route {hostname} path {path:?} is given twice; only one owner per hostname and path")]
    DuplicateRoute { hostname: String, path: String },
    #[error("route {hostname}: caPool needs spec.originCaPool on the tunnel")]
    CaPoolWithoutOriginCaPool { hostname: String },
    #[error("spec.fallbackTarget: {reason}")]
    InvalidFallback { reason: String },
    #[error(
        "metadata.name {0:?} is not a valid label value (at most 63 characters, alphanumeric at both ends)"
    )]
    InvalidName(String),
    #[error(
        "cloudflared image {0:?} is not pinned; give a version tag such as cloudflare/cloudflared:2026.11.0"
    )]
    UnpinnedImage(String),
    #[error(transparent)]
    DeployPatch(#[from] DeployPatchError),
    #[error("encoding a rendered object failed: {0}")]
    Encode(String),
}

impl RenderError {
    /// A short, bounded label for metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            RenderError::InvalidRoute { .. } => "invalid_route",
            RenderError::DuplicateRoute { .. } => "duplicate_route",
            RenderError::CaPoolWithoutOriginCaPool { .. } => "ca_pool_without_origin_ca_pool",
            RenderError::InvalidFallback { .. } => "invalid_fallback",
            RenderError::InvalidName(_) => "invalid_name",
            RenderError::UnpinnedImage(_) => "unpinned_image",
            RenderError::DeployPatch(_) => "deploy_patch",
            RenderError::Encode(_) => "encode",
        }
    }
}

/// The objects of one tunnel, in apply order: Secret and ConfigMap before the Deployment.
#[derive(Clone, PartialEq)]
pub struct Rendered {
    pub service_account: ServiceAccount,
    pub secret: Secret,
    /// config.yaml; `None` for a tunnel whose configuration is on Cloudflare.
    pub config_map: Option<ConfigMap>,
    /// `configSource: Cloudflare`: the configuration to push (cloudflared takes it from there).
    pub remote_config: Option<Value>,
    /// Full `apps/v1` Deployment JSON (kept as JSON so `deployPatch` fields newer than our API
    /// types survive).
    pub deployment: Value,
    pub pdb: PodDisruptionBudget,
    /// The pod-template checksum annotation value.
    pub checksum: String,
}

impl fmt::Debug for Rendered {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rendered")
            .field("service_account", &self.service_account.metadata.name)
            .field("secret", &self.secret.metadata.name)
            .field(
                "config_map",
                &self.config_map.as_ref().map(|c| &c.metadata.name),
            )
            .field("remote_config", &self.remote_config.is_some())
            .field("deployment", &self.deployment.pointer("/metadata/name"))
            .field("pdb", &self.pdb.metadata.name)
            .field("checksum", &self.checksum)
            .finish()
    }
}

fn to_json<T: Serialize>(object: &T) -> Result<Value, RenderError> {
    serde_json::to_value(object).map_err(|e| RenderError::Encode(e.to_string()))
}

impl Rendered {
    /// Every object as JSON, in apply order.
    pub fn objects(&self) -> Result<Vec<Value>, RenderError> {
        let mut objects = vec![to_json(&self.service_account)?, to_json(&self.secret)?];
        if let Some(config_map) = &self.config_map {
            objects.push(to_json(config_map)?);
        }
        objects.push(self.deployment.clone());
        objects.push(to_json(&self.pdb)?);
        Ok(objects)
    }

    /// Multi-document YAML in apply order; keys sorted, so equal renders print equal bytes.
    pub fn to_yaml(&self) -> Result<String, RenderError> {
        let mut out = String::new();
        for object in self.objects()? {
            out.push_str("---\n");
            out.push_str(
                &serde_yaml_ng::to_string(&object)
                    .map_err(|e| RenderError::Encode(e.to_string()))?,
            );
        }
        Ok(out)
    }
}

/// Is `image` pinned to a version (a tag other than `latest`, or a digest)?
pub(crate) fn is_pinned(image: &str) -> bool {
    if image.contains("@sha256:") {
        return true;
    }
    let last = image.rsplit('/').next().unwrap_or(image);
    matches!(last.rsplit_once(':'), Some((_, tag)) if !tag.is_empty() && tag != "latest")
}

/// Hardening of the cloudflared pod (docs/design.md §2.3): the very function the mutating webhook applies,
/// run on the rendered pod and again after `deployPatch`, so a patch cannot weaken it.
use crate::hardening::mutate::harden_pod_spec as harden;

/// Renders every object the reconciler applies for `input`.
pub fn render_all(input: &TunnelInput, options: &RenderOptions) -> Result<Rendered, RenderError> {
    if !is_pinned(&options.cloudflared_image) {
        return Err(RenderError::UnpinnedImage(
            options.cloudflared_image.clone(),
        ));
    }
    let identity = &input.identity;
    let selector = labels::selector_labels(identity.kind, &identity.name)
        .ok_or_else(|| RenderError::InvalidName(identity.name.clone()))?;
    let common = objects::Common {
        names: ObjectNames::for_owner(identity),
        namespace: identity.namespace.clone(),
        labels: labels::object_labels(
            &selector,
            &input.tunnel_id,
            &input.tunnel_name,
            &input.domain,
        ),
        owner: objects::owner_reference(identity),
        selector,
    };
    let remote = input.spec.config_source == Some(ConfigSource::Cloudflare);
    let (config_yaml, remote_config) = if remote {
        (String::new(), Some(remote::remote_config(input)?))
    } else {
        (config::render_config(input)?, None)
    };
    let credentials_json = credentials_file(&input.credentials)?;
    let origin_ca_pool = input
        .spec
        .origin_ca_pool
        .as_deref()
        .filter(|s| !s.is_empty());
    let sum = checksum::workload_checksum(
        &config_yaml,
        &credentials_json,
        origin_ca_pool.and(input.origin_ca_pem.as_deref()),
    );
    let protocol = edge_protocol(input);
    let mut deployment = objects::deployment(
        &common,
        &objects::WorkloadParams {
            image: &options.cloudflared_image,
            protocol,
            checksum: &sum,
            origin_ca_pool,
            remote,
        },
    );
    if let Some(pod_spec) = deployment.pointer_mut("/spec/template/spec") {
        harden(pod_spec);
    }
    let patch = deploy_patch::parse_deploy_patch(&input.spec.deploy_patch)?;
    let deployment =
        deploy_patch::apply_deploy_patch(&deployment, &patch, &common.selector, harden)?;
    Ok(Rendered {
        service_account: objects::service_account(&common),
        secret: objects::secret(
            &common,
            &credentials_json,
            remote.then(|| connector_token(input)).as_deref(),
        ),
        config_map: (!remote).then(|| objects::config_map(&common, &config_yaml)),
        remote_config,
        deployment,
        pdb: objects::pod_disruption_budget(&common),
        checksum: sum,
    })
}

/// The transport cloudflared reaches Cloudflare with (`--protocol`): `http2` when a route goes to
/// an HTTP/2 origin (a GRPCRoute's rules, `http2Origin` of a binding or Service), whatever
/// `spec.protocol` says, since gRPC calls fail over QUIC (cloudflared issues #1170, #491);
/// else `spec.protocol`, `auto` when unset.
pub(crate) fn edge_protocol(input: &TunnelInput) -> &str {
    if input
        .routes
        .iter()
        .any(|r| r.origin_request.http2_origin == Some(true))
    {
        return "http2";
    }
    if input.spec.protocol.is_empty() {
        "auto"
    } else {
        &input.spec.protocol
    }
}

/// The connector token cloudflared runs a remotely-managed tunnel with: what Cloudflare's
/// token endpoint hands out for it, built from the same credentials.
fn connector_token(input: &TunnelInput) -> String {
    cftunnel_cloudflare::TunnelToken {
        account_tag: input.credentials.account_tag.clone(),
        tunnel_id: input.credentials.tunnel_id.clone(),
        secret: cftunnel_cloudflare::SecretString::new(input.credentials.secret_b64.clone()),
        endpoint: None,
    }
    .encode()
}

/// credentials.json as cloudflared reads it (reference C.5); `Endpoint` empty.
fn credentials_file(credentials: &TunnelCredentials) -> Result<Vec<u8>, RenderError> {
    #[derive(Serialize)]
    struct File<'a> {
        #[serde(flatten)]
        credentials: &'a TunnelCredentials,
        #[serde(rename = "Endpoint")]
        endpoint: &'a str,
    }
    serde_json::to_vec(&File {
        credentials,
        endpoint: "",
    })
    .map_err(|e| RenderError::Encode(e.to_string()))
}
