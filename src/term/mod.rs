//! What one leadership term's reconcilers share (docs/design.md §3): the [`Context`] handed to
//! every reconcile (clients, options, the term's scope, rate limiters, metrics), the zones of
//! each account, the DNS guard, the one-object-per-tunnel-id claims, the `Ready` condition and
//! its reasons, the finalizer, Events, API credentials, the per-object memory and what the DNS
//! task found of other clusters on each tunnel, and the Access guard with the rules each tunnel
//! applied. The tunnel
//! reconciler and the route reconciler both use it; neither reaches into the other.
pub mod access;
pub mod adapters;
pub mod asks;
pub mod claims;
pub mod cloudflare;
pub mod cluster;
pub mod conditions;
pub mod context;
pub mod credentials;
pub(crate) mod dns_guard;
mod error;
pub mod events;
pub mod finalizer;
pub mod memory;
pub mod options;
pub mod recorder;
pub mod route_index;
pub mod shared;
pub mod slots;
pub mod tunnel_lists;
pub mod zones;

pub use adapters::TunnelKindAdapter;
pub use conditions::ReadyReason;
pub use context::{
    Context, ControllerOptions, DEFAULT_CLOUDFLARED_IMAGE, DEFAULT_CLUSTER_RESOURCE_NAMESPACE,
};
pub use error::ReconcileError;
