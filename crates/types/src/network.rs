//! Private networks through a tunnel, v1alpha2: `VirtualNetwork` (cluster-scoped: a Cloudflare
//! virtual network cftunnel makes or adopts) and `NetworkRoute` (namespaced: CIDRs, Services'
//! cluster IPs and private hostnames that WARP users reach through a tunnel).
//!
//! A VirtualNetwork names its account and the Secret of its API credentials (in the
//! cluster-resource namespace, as a ClusterTunnel's): virtual networks belong to an account,
//! not to a tunnel. A NetworkRoute whose tunnel is in another account than its network is
//! refused (`AccountsDiffer`).
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Most CIDRs, Services and hostnames of one NetworkRoute, each.
pub const MAX_ENTRIES: usize = 64;
/// The longest comment a user gives; cftunnel's marker goes before it, and Cloudflare keeps at
/// most 100 characters of a route's comment, so it may be shortened on routes.
pub const MAX_COMMENT: usize = 256;

/// `Accepted`: the object was judged and its references resolved.
pub const CONDITION_ACCEPTED: &str = "Accepted";
/// `Programmed`: what it asks for is in place on Cloudflare.
pub const CONDITION_PROGRAMMED: &str = "Programmed";

/// A Cloudflare virtual network: made and owned by cftunnel (`name`), or adopted (`existing`).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "networking.cfargotunnel.com",
    version = "v1alpha2",
    kind = "VirtualNetwork",
    status = "VirtualNetworkStatus",
    derive = "PartialEq",
    doc = "A Cloudflare virtual network: private routes in it are kept apart from the same addresses in other networks.",
    printcolumn = r#"{"name":"NetworkID","type":"string","jsonPath":".status.id"}"#,
    printcolumn = r#"{"name":"Programmed","type":"string","jsonPath":".status.conditions[?(@.type==\"Programmed\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct VirtualNetworkSpec {
    /// Name of the network cftunnel creates, and deletes with this object once no route uses
    /// it. Exactly one of `name` and `existing` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 200))]
    pub name: Option<String>,
    /// Comment of a network cftunnel creates (after cftunnel's ownership marker).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 256))]
    pub comment: Option<String>,
    /// A network that already exists, used and never changed or deleted by cftunnel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub existing: Option<ExistingVirtualNetwork>,
    /// The account and the Secret (in the cluster-resource namespace) of its API credentials.
    pub cloudflare: NetworkAccount,
}

/// An existing virtual network, by `id` or by `name`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ExistingVirtualNetwork {
    /// The network's UUID. Wins over `name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub id: Option<String>,
    /// The network's name, resolved among the account's networks (exactly one must match).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 256))]
    pub name: Option<String>,
}

/// A Cloudflare account and the Secret of its API credentials.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkAccount {
    /// Account id (32 hex characters).
    #[schemars(length(max = 64))]
    pub account_id: String,
    /// Name of the Secret holding the API credentials, in the cluster-resource namespace.
    #[schemars(length(max = 253))]
    pub secret: String,
    /// Key in the Secret holding an API token.
    #[serde(
        rename = "CLOUDFLARE_API_TOKEN",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub api_token_key: Option<String>,
}

/// Observed state of a VirtualNetwork.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VirtualNetworkStatus {
    /// The network's id at Cloudflare.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub id: Option<String>,
    /// `Accepted` and `Programmed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Option<Vec<Condition>>,
}

/// CIDRs, Services and private hostnames WARP users reach through a tunnel.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "networking.cfargotunnel.com",
    version = "v1alpha2",
    kind = "NetworkRoute",
    namespaced,
    status = "NetworkRouteStatus",
    derive = "PartialEq",
    doc = "Private routes through a tunnel: IP routes of CIDRs and Services, and hostname routes.",
    printcolumn = r#"{"name":"Tunnel","type":"string","jsonPath":".spec.tunnelRef.name"}"#,
    printcolumn = r#"{"name":"Accepted","type":"string","jsonPath":".status.conditions[?(@.type==\"Accepted\")].status"}"#,
    printcolumn = r#"{"name":"Programmed","type":"string","jsonPath":".status.conditions[?(@.type==\"Programmed\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct NetworkRouteSpec {
    /// The tunnel the routes go through: a Tunnel of this namespace or a ClusterTunnel that
    /// admits it.
    pub tunnel_ref: NetworkTunnelRef,
    /// The VirtualNetwork the IP routes are in; left out: the account's default network.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub virtual_network_ref: Option<VirtualNetworkRef>,
    /// CIDRs routed through the tunnel (IPv4 or IPv6, e.g. `10.20.0.0/24`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub cidrs: Vec<String>,
    /// Services of this namespace: each cluster IP is routed as a /32 or /128, followed when it
    /// changes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub services: Vec<NetworkService>,
    /// Private hostnames routed through the tunnel; cloudflared resolves them on the cluster's
    /// side. Claimed account-wide.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub hostnames: Vec<String>,
    /// Put on each route at Cloudflare after cftunnel's marker (shortened to fit 100
    /// characters on IP routes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 256))]
    pub comment: Option<String>,
}

/// A Tunnel of the route's namespace, or a ClusterTunnel.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct NetworkTunnelRef {
    /// `Tunnel` (default) or `ClusterTunnel`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

/// A VirtualNetwork by name.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct VirtualNetworkRef {
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

/// A Service of the route's namespace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct NetworkService {
    #[schemars(length(min = 1, max = 63))]
    pub name: String,
}

/// Observed state of a NetworkRoute.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkRouteStatus {
    /// `Accepted` and `Programmed` (reason `Conflict` when someone else holds a route).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Option<Vec<Condition>>,
    /// One entry per CIDR, Service address and hostname.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 256))]
    pub routes: Option<Vec<PrivateRouteStatus>>,
}

/// One private route at Cloudflare.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PrivateRouteStatus {
    /// `cidr`, `service` or `hostname`.
    #[schemars(length(max = 16))]
    pub kind: String,
    /// The CIDR, the Service's address as a CIDR, or the hostname.
    #[schemars(length(max = 253))]
    pub route: String,
    /// The Service it comes from (`kind: service`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 63))]
    pub service: Option<String>,
    /// The route's id at Cloudflare, once made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub id: Option<String>,
    /// `Programmed`, `Pending`, `Conflict` or `Error`.
    #[schemars(length(max = 32))]
    pub state: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub message: Option<String>,
}
