//! Admission decisions as plain functions of their inputs (docs/design.md §2): which rules
//! apply to each request, and the rules of the top-level kinds (Tunnel, ClusterTunnel,
//! AccessTunnel), which need the rendered Deployment. Used by the webhook and the offline
//! `cftunnel validate` command — one implementation.
pub mod access_tunnel;
pub mod ingress;
pub mod review;
pub mod tunnel;

#[cfg(test)]
mod tunnel_tests;
