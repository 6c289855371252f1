//! AccessTunnel v1alpha1: a `cloudflared access` client reachable in the cluster as a Service.
//! The Go operator's schema unchanged: fields at the top level (`target`, `serviceToken`), no
//! `spec`. Unlike the Go operator's schema, `target.image` has no default: a default would pin
//! an old cloudflared in every object; cftunnel's pinned image runs unless one is given.
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The default key of the service token id in the Secret.
pub const DEFAULT_TOKEN_ID_KEY: &str = "CLOUDFLARE_ACCESS_SERVICE_TOKEN_ID";
/// The default key of the service token secret in the Secret.
pub const DEFAULT_TOKEN_SECRET_KEY: &str = "CLOUDFLARE_ACCESS_SERVICE_TOKEN_TOKEN";
/// The Service port when `target.svc.port` is not given (the Go operator's default).
pub const DEFAULT_SERVICE_PORT: i32 = 8000;
/// Protocols `cloudflared access` forwards.
pub const ACCESS_PROTOCOLS: &[&str] = &["tcp", "rdp", "smb", "ssh"];

/// Exposes a hostname protected by Cloudflare Access inside the cluster, through a
/// `cloudflared access` client.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "networking.cfargotunnel.com",
    version = "v1alpha1",
    kind = "AccessTunnel",
    namespaced,
    no_spec,
    status = "AccessTunnelStatus",
    derive = "PartialEq",
    doc = "A cloudflared access client for a hostname behind Cloudflare Access, exposed as a Service.",
    printcolumn = r#"{"name":"Target","type":"string","jsonPath":".target.fqdn"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct AccessTunnelFields {
    /// What to reach and how it is exposed.
    pub target: AccessTarget,
    /// The Access service token, when the application requires one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_token: Option<ServiceToken>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AccessTarget {
    /// cloudflared image, pinned by tag or digest. Default: the operator's pinned image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// Hostname of the Access application.
    pub fqdn: String,
    /// `tcp`, `rdp`, `smb` or `ssh`. Default `tcp`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    /// The Service the client is reached through.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub svc: Option<AccessService>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct AccessService {
    /// Name of the Service. Default: the AccessTunnel's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Port of the Service. Default 8000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub port: Option<i32>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ServiceToken {
    /// Secret of this namespace holding the service token.
    #[serde(rename = "secretRef")]
    pub secret_ref: String,
    /// Key of the token id in the Secret. Default `CLOUDFLARE_ACCESS_SERVICE_TOKEN_ID`.
    #[serde(
        rename = "CLOUDFLARE_ACCESS_SERVICE_TOKEN_ID",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub id_key: Option<String>,
    /// Key of the token secret in the Secret. Default `CLOUDFLARE_ACCESS_SERVICE_TOKEN_TOKEN`.
    #[serde(
        rename = "CLOUDFLARE_ACCESS_SERVICE_TOKEN_TOKEN",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub secret_key: Option<String>,
}

impl ServiceToken {
    pub fn id_key(&self) -> &str {
        self.id_key
            .as_deref()
            .filter(|k| !k.is_empty())
            .unwrap_or(DEFAULT_TOKEN_ID_KEY)
    }

    pub fn secret_key(&self) -> &str {
        self.secret_key
            .as_deref()
            .filter(|k| !k.is_empty())
            .unwrap_or(DEFAULT_TOKEN_SECRET_KEY)
    }
}

impl AccessTarget {
    pub fn protocol(&self) -> &str {
        self.protocol
            .as_deref()
            .filter(|p| !p.is_empty())
            .unwrap_or("tcp")
    }

    pub fn service_port(&self) -> i32 {
        self.svc
            .as_ref()
            .and_then(|s| s.port)
            .filter(|p| *p != 0)
            .unwrap_or(DEFAULT_SERVICE_PORT)
    }
}

/// Observed state of an AccessTunnel.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AccessTunnelStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Option<Vec<Condition>>,
}
