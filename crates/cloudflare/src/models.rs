//! Serde models of the v4 envelope and of the objects the operator reads and writes.
//!
//! Response models ignore unknown fields and default what Cloudflare may omit, so that newer
//! API versions and the simulator both parse.
use std::fmt;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use super::error::ApiErrorItem;

/// The `{success, errors, messages, result, result_info}` wrapper of every answer.
#[derive(Debug, Clone, Deserialize)]
pub struct Envelope<T> {
    /// Must be checked as well as the HTTP status: `false` with 200 happens.
    #[serde(default)]
    pub success: bool,
    #[serde(default, deserialize_with = "null_as_default")]
    pub errors: Vec<ApiErrorItem>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub messages: Vec<ApiErrorItem>,
    pub result: Option<T>,
    #[serde(default)]
    pub result_info: Option<ResultInfo>,
}

/// The failure half of the envelope, read leniently from any error answer.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct FailureEnvelope {
    #[serde(default, deserialize_with = "null_as_default")]
    pub errors: Vec<ApiErrorItem>,
}

/// Pagination facts of a list answer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
pub struct ResultInfo {
    #[serde(default)]
    pub page: u32,
    #[serde(default)]
    pub per_page: u32,
    #[serde(default)]
    pub count: u32,
    #[serde(default)]
    pub total_count: u32,
    /// Not in the 2024 schema, but sent by the real API.
    #[serde(default)]
    pub total_pages: Option<u32>,
}

/// One page of a list.
#[derive(Debug, Clone)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub info: Option<ResultInfo>,
}

pub(crate) fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// A string that is a credential: its Debug prints `***`; read it with [`SecretString::expose`].
#[derive(Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(transparent)]
pub struct SecretString(String);

impl SecretString {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The secret itself; never log it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for SecretString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// Result of token verification.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct TokenVerification {
    pub id: String,
    pub status: TokenStatus,
    #[serde(default)]
    pub expires_on: Option<Timestamp>,
    #[serde(default)]
    pub not_before: Option<Timestamp>,
}

/// Token state; anything but `Active` means the token cannot be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TokenStatus {
    Active,
    Disabled,
    Expired,
    #[serde(other)]
    Unknown,
}

/// An account, as listed by `/accounts`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Account {
    pub id: String,
    #[serde(default)]
    pub name: String,
    #[serde(default, rename = "type")]
    pub account_type: Option<String>,
    #[serde(default)]
    pub created_on: Option<Timestamp>,
}

/// A zone (domain) and the account owning it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Zone {
    pub id: String,
    pub name: String,
    #[serde(default)]
    pub status: Option<String>,
    #[serde(default)]
    pub account: ZoneAccount,
    #[serde(default, deserialize_with = "null_as_default")]
    pub name_servers: Vec<String>,
    #[serde(default)]
    pub paused: Option<bool>,
    #[serde(default, rename = "type")]
    pub zone_type: Option<String>,
    #[serde(default)]
    pub created_on: Option<Timestamp>,
    #[serde(default)]
    pub modified_on: Option<Timestamp>,
    #[serde(default)]
    pub activated_on: Option<Timestamp>,
    /// The zone's plan; its `legacy_id` decides the DNS batch size limit.
    #[serde(default)]
    pub plan: Option<ZonePlan>,
}

/// The `plan` object inside a zone (only what the client uses).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct ZonePlan {
    #[serde(default)]
    pub name: Option<String>,
    /// `free`, `pro`, `business` or `enterprise`.
    #[serde(default)]
    pub legacy_id: Option<String>,
}

/// The `account` object inside a zone.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct ZoneAccount {
    #[serde(default)]
    pub id: String,
    #[serde(default)]
    pub name: String,
}

/// Where a tunnel's ingress configuration lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ConfigSrc {
    /// A config file next to cloudflared (what the operator renders).
    Local,
    /// Managed in the dashboard / configurations API.
    Cloudflare,
    #[serde(other)]
    Unknown,
}

/// Health of a tunnel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TunnelStatus {
    Inactive,
    Degraded,
    Healthy,
    Down,
    #[serde(other)]
    Unknown,
}

/// A Cloudflare Tunnel.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Tunnel {
    pub id: String,
    #[serde(default)]
    pub account_tag: String,
    pub name: String,
    #[serde(default)]
    pub created_at: Option<Timestamp>,
    /// Set once the tunnel is (soft-)deleted; GET still answers afterwards.
    #[serde(default)]
    pub deleted_at: Option<Timestamp>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub connections: Vec<TunnelConnection>,
    #[serde(default)]
    pub conns_active_at: Option<Timestamp>,
    #[serde(default)]
    pub conns_inactive_at: Option<Timestamp>,
    #[serde(default)]
    pub status: Option<TunnelStatus>,
    #[serde(default)]
    pub tun_type: Option<String>,
    #[serde(default)]
    pub metadata: Option<serde_json::Value>,
    #[serde(default)]
    pub remote_config: Option<bool>,
    #[serde(default)]
    pub config_src: Option<ConfigSrc>,
    /// Only on create.
    #[serde(default)]
    pub credentials_file: Option<TunnelCredentialsFile>,
    /// Only on create: the connector token (a credential).
    #[serde(default)]
    pub token: Option<SecretString>,
}

impl Tunnel {
    /// True once the tunnel carries `deleted_at`.
    pub fn is_deleted(&self) -> bool {
        self.deleted_at.is_some()
    }

    /// True if the tunnel is managed remotely (dashboard), so local ingress would be ignored.
    pub fn is_remotely_managed(&self) -> bool {
        self.config_src == Some(ConfigSrc::Cloudflare) || self.remote_config == Some(true)
    }
}

/// The `credentials_file` of a create answer (cloudflared's field names).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct TunnelCredentialsFile {
    #[serde(rename = "AccountTag", default)]
    pub account_tag: String,
    #[serde(rename = "TunnelID", default)]
    pub tunnel_id: String,
    #[serde(
        rename = "TunnelName",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub tunnel_name: Option<String>,
    #[serde(rename = "TunnelSecret")]
    pub tunnel_secret: SecretString,
}

/// One connection from a connector to a Cloudflare data centre.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct TunnelConnection {
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub uuid: Option<String>,
    #[serde(default)]
    pub colo_name: Option<String>,
    #[serde(default)]
    pub is_pending_reconnect: Option<bool>,
    #[serde(default)]
    pub origin_ip: Option<String>,
    #[serde(default)]
    pub opened_at: Option<Timestamp>,
    #[serde(default)]
    pub client_id: Option<String>,
    #[serde(default)]
    pub client_version: Option<String>,
}

/// A connector (cloudflared instance) and its connections.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ConnectionClient {
    #[serde(default)]
    pub id: String,
    #[serde(default)]
    pub arch: Option<String>,
    #[serde(default)]
    pub version: Option<String>,
    #[serde(default)]
    pub run_at: Option<Timestamp>,
    #[serde(default)]
    pub config_version: Option<i64>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub features: Vec<String>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub conns: Vec<TunnelConnection>,
}

/// Body of tunnel create; its Debug hides the secret.
#[derive(Clone, Serialize)]
pub(crate) struct NewTunnelBody {
    pub name: String,
    pub tunnel_secret: String,
    pub config_src: ConfigSrc,
}

impl fmt::Debug for NewTunnelBody {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NewTunnelBody")
            .field("name", &self.name)
            .field("tunnel_secret", &format_args!("***"))
            .field("config_src", &self.config_src)
            .finish()
    }
}
