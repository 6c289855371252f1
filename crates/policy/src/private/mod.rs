//! Private networks: what cftunnel wants of an account's private routes (IP routes of CIDRs
//! and Services' cluster IPs, hostname routes) and virtual networks, as pure functions.
//!
//! - `marker`: the ownership marker at the start of every comment cftunnel writes on a route
//!   or network (these objects have no labels), and whose a listed comment is;
//! - `normalize`: CIDRs, a Service's address as a route, private hostnames as Cloudflare stores
//!   them, with admission's messages;
//! - `desired`: the routes a set of NetworkRoutes asks for, and the conflicts among them;
//! - `gateway`: the routes Gateways ask for, for the backends of their TCPRoutes and UDPRoutes;
//! - `listed`: what Cloudflare lists, keyed as desired routes are;
//! - `plan`: the creates, updates and deletes that bring the listed routes to the desired ones,
//!   the conflicts with routes that are not this installation's, and the count against the
//!   account's limit.
mod conflict;
mod desired;
mod gateway;
mod listed;
mod marker;
mod normalize;
mod plan;

#[cfg(test)]
mod fixtures;
#[cfg(test)]
mod plan_props;

pub use conflict::{Conflict, Entry, EntryKind, HeldBy};
pub use desired::{
    DesiredRoute, DesiredRoutes, IpKey, NetworkRouteSource, Refusal, desired_routes,
};
pub use gateway::{
    CLUSTER_DOMAIN, GatewayNetworkSource, gateway_network_sources, service_hostname,
};
pub use listed::{Listed, ListedHostnameRoute, ListedIpRoute, hostname_key};
pub use marker::{
    MAX_ROUTE_COMMENT_CHARS, Marker, Owner, OwnerDigest, OwnerKind, Ownership,
    PRIVATE_MARKER_PREFIX, ownership, ownership_comment, parse_marker, private_marker,
};
pub use normalize::{
    Cidr, CidrError, MAX_PRIVATE_HOSTNAME_CHARS, Relation, normalize_hostname, private_hostname,
    service_route, spec_cidr, spec_hostname,
};
pub use plan::{ACCOUNT_ROUTE_LIMIT, Change, PrivatePlan, plan_private};
