//! The `networking.cfargotunnel.com` API: CRD types per kind and version, conversion, names and
//! tunnel identity. No I/O.
pub mod access_policy;
pub mod access_tunnel;
pub mod binding;
pub mod cel;
pub mod conversion;
pub mod crds;
pub mod defaults;
pub mod gateway;
mod identity;
pub mod names;
pub mod network;
pub mod service;
pub mod tunnel;
mod tunnel_common;

pub use access_policy::{AccessPolicy, AccessPolicySpec, AccessPolicyStatus};
pub use binding::{TunnelBinding, TunnelBindingStatus};
pub use identity::{TunnelIdentity, TunnelKind};
pub use network::{NetworkRoute, NetworkRouteSpec, VirtualNetwork, VirtualNetworkSpec};
pub use service::ServicePorts;
pub use tunnel::v1alpha2::{ClusterTunnel, ClusterTunnelSpec, Tunnel, TunnelSpec};
pub use tunnel_common::{
    AllowedRoutes, CloudflareDetails, ConfigSource, ConnectorsStatus, EdgeConnectors, EdgeStatus,
    ExistingTunnel, NewTunnel, RouteNamespaces, RouteStatus, TunnelStatus, WarpRouting, ZoneRef,
};
