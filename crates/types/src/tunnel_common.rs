//! Pieces of the Tunnel / ClusterTunnel API shared by both kinds and both versions (docs/design.md §1.1).
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Create a new tunnel on Cloudflare, owned (and deleted) by this object.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct NewTunnel {
    /// Name of the tunnel to create on Cloudflare. May be corrected until the tunnel exists
    /// (`status.tunnelId` set); immutable afterwards.
    #[schemars(length(max = 255))]
    pub name: String,
}

/// Where cloudflared takes its ingress rules from.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum ConfigSource {
    /// A config.yaml in a ConfigMap, rendered by cftunnel: a route change rolls the pods.
    #[default]
    Local,
    /// Cloudflare's configuration of the tunnel, pushed by cftunnel: cloudflared runs from its
    /// connector token and applies a route change live, without a restart.
    Cloudflare,
}

/// Run a tunnel that already exists on Cloudflare; it is never deleted by cftunnel.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ExistingTunnel {
    /// Tunnel UUID. Wins over `name` when both are given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub id: Option<String>,
    /// Tunnel name, resolved to its id among the account's live tunnels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 255))]
    pub name: Option<String>,
}

impl ExistingTunnel {
    /// "Set" (docs/design.md §1.1): a non-empty id or name.
    pub(crate) fn is_set(&self) -> bool {
        self.id.as_deref().is_some_and(|s| !s.is_empty())
            || self.name.as_deref().is_some_and(|s| !s.is_empty())
    }
}

fn key_api_token() -> String {
    "CLOUDFLARE_API_TOKEN".into()
}
fn key_api_key() -> String {
    "CLOUDFLARE_API_KEY".into()
}
fn key_credential_file() -> String {
    "CLOUDFLARE_TUNNEL_CREDENTIAL_FILE".into()
}
fn key_credential_secret() -> String {
    "CLOUDFLARE_TUNNEL_CREDENTIAL_SECRET".into()
}

/// Cloudflare account, zone and the Secret holding API credentials.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CloudflareDetails {
    /// Zone name (e.g. `example.com`); also the default FQDN suffix for routes.
    #[schemars(length(max = 253))]
    pub domain: String,
    /// Name of the Secret holding the API credentials: read in the Tunnel's namespace, or in the
    /// cluster-resource namespace for a ClusterTunnel.
    #[schemars(length(max = 253))]
    pub secret: String,
    /// Account id (32 hex characters). Wins over `accountName`. Immutable once set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub account_id: Option<String>,
    /// Account name, looked up when `accountId` is not given (account-owned API tokens cannot
    /// list accounts: give `accountId` with those). Immutable once set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 255))]
    pub account_name: Option<String>,
    /// Email of the account, used with a global API key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    /// Key in the Secret holding an API token.
    #[serde(rename = "CLOUDFLARE_API_TOKEN", default = "key_api_token")]
    pub api_token_key: String,
    /// Key in the Secret holding a global API key (used with `email`).
    #[serde(rename = "CLOUDFLARE_API_KEY", default = "key_api_key")]
    pub api_key_key: String,
    /// Key in the Secret holding a whole credentials.json of an existing tunnel.
    #[serde(
        rename = "CLOUDFLARE_TUNNEL_CREDENTIAL_FILE",
        default = "key_credential_file"
    )]
    pub credential_file_key: String,
    /// Key in the Secret holding only the base64 TunnelSecret of an existing tunnel.
    #[serde(
        rename = "CLOUDFLARE_TUNNEL_CREDENTIAL_SECRET",
        default = "key_credential_secret"
    )]
    pub credential_secret_key: String,
}

/// Options of cloudflared's proxy of private traffic (`warp-routing`): it carries WARP users'
/// traffic whenever private routes point at the tunnel, with these limits. Durations are Go
/// duration text (`5s`, `1m`); a remotely-managed tunnel's configuration holds whole seconds, so
/// they are rounded up there.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WarpRouting {
    /// How long cloudflared waits to connect to a private address (cloudflared's default: 5s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32))]
    pub connect_timeout: Option<String>,
    /// The most private flows at once (cloudflared's default: 0, no limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub max_active_flows: Option<u64>,
    /// The TCP keep-alive of private connections (cloudflared's default: 30s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32))]
    pub tcp_keep_alive: Option<String>,
}

/// Which namespaces may bind routes to a tunnel (like Gateway API listeners).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct AllowedRoutes {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespaces: Option<RouteNamespaces>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct RouteNamespaces {
    /// `All`, `Same` or `Selector`. Default: `All` for a ClusterTunnel, `Same` for a Tunnel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// Namespaces whose labels match may bind, with `from: Selector`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
}

/// One route served by the tunnel, as last rendered.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct RouteStatus {
    pub hostname: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    pub target: String,
    /// The object the route comes from, e.g. `TunnelBinding shop/web` or `Service shop/api`.
    pub source: String,
    /// `Active`, `Conflict`, `Pending` or `Error`.
    pub state: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A zone by id, with the domain it was resolved for.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ZoneRef {
    #[schemars(length(max = 64))]
    pub zone_id: String,
    #[schemars(length(max = 253))]
    pub zone_domain: String,
}

/// Observed state of a Tunnel or ClusterTunnel. Every field is optional.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TunnelStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub tunnel_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tunnel_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone_id: Option<String>,
    /// The domain `zoneId` was resolved for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone_domain: Option<String>,
    /// Zones other than `zoneId` that may hold DNS records of this object: the zone of an
    /// earlier `spec.cloudflare.domain` (recorded in the same write that moves `zoneId`), and
    /// each other zone of the account its hostnames were placed in (recorded before the first
    /// record there). Each is removed once that zone holds no record of this tunnel any more,
    /// so a restart, a failover or a deletion finds every zone to clean (oldest first, bounded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub previous_zones: Option<Vec<ZoneRef>>,
    /// Ids this object used before its tunnel was recreated (newest last, bounded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 10))]
    pub previous_tunnel_ids: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready` with a typed reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Option<Vec<Condition>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routes: Option<Vec<RouteStatus>>,
    /// `configSource: Cloudflare`: the version of the tunnel's configuration cftunnel last
    /// pushed (Cloudflare's number, growing with each push).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_version: Option<i64>,
    /// Digest of the configuration last pushed: a push happens only when the rendered one
    /// differs, and drift compares Cloudflare's against it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub config_hash: Option<String>,
    /// `configSource: Cloudflare`: the hostnames whose rules cftunnel put in the tunnel's
    /// configuration. A push changes and removes only these (and adds its new ones); every
    /// other rule, another cluster's or the dashboard's, is kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_hostnames: Option<Vec<String>>,
    /// What Cloudflare's edge says of the tunnel (read every `--edge-interval`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edge: Option<EdgeStatus>,
    /// cloudflared pods ready against desired (a pod is ready once it holds a registered
    /// connection to the edge). Absent when cftunnel runs no cloudflared for this object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connectors: Option<ConnectorsStatus>,
}

/// Cloudflare's word on a tunnel, when it last changed, and its connectors then.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EdgeStatus {
    /// `healthy`, `degraded`, `down` or `inactive` (never connected), as Cloudflare answers.
    #[schemars(length(max = 32))]
    pub status: String,
    /// When cftunnel saw `status` change to its value (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<String>,
    /// When Cloudflare last saw a connection open, and close (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conns_active_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conns_inactive_at: Option<String>,
    /// cloudflared instances attached when the status last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connectors: Option<EdgeConnectors>,
}

/// A bounded summary of the connectors attached to a tunnel.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EdgeConnectors {
    /// cloudflared instances attached.
    pub count: i32,
    /// Their connections' data centres (at most 16 listed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub colos: Vec<String>,
    /// Their cloudflared versions (at most 8 listed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8))]
    pub versions: Vec<String>,
}

/// cloudflared pods of the object's workload.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConnectorsStatus {
    /// Pods ready (cloudflared's `/ready`: a registered edge connection).
    pub ready: i32,
    /// Pods the workload wants.
    pub desired: i32,
}
