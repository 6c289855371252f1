//! Admission decisions as plain functions of their inputs (docs/design.md §2): which rules
//! apply to each request, and the rules of the kinds that need more than `rules`: Tunnel,
//! ClusterTunnel and AccessTunnel (the rendered Deployment), NetworkRoute and VirtualNetwork
//! (the canonical CIDRs and hostnames of `private`). Used by the webhook and the offline
//! `cftunnel validate` command — one implementation.
pub mod access_tunnel;
pub mod ingress;
pub mod network_route;
pub mod review;
pub mod tunnel;
pub mod virtual_network;

#[cfg(test)]
mod network_review_tests;
#[cfg(test)]
mod tunnel_tests;
