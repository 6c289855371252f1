//! What one leadership term's components share (docs/design.md §3): the [`Context`] every
//! component reads (the kube client, the event recorder, the options, the watch scope, the
//! term's scope, the metrics, the cluster id and the Cloudflare client factory of
//! [`cloudflare`], which also keeps what the term learned from Cloudflare: zones of each
//! account, tunnel lists, DNS batch and quota memory).
//!
//! It also defines what components hand each other, each made once per term in `wiring.rs`
//! and passed to its writers and readers, never through the `Context`: the route index
//! ([`route_index`]: route reconciler → tunnel and Access reconcilers), the Access guard and
//! what each tunnel applied ([`access`]), what the DNS task found of other clusters on each
//! tunnel ([`shared`]), the lanes' asks ([`asks`]), and the DNS guard with each tunnel's other
//! zones (`dns_guard`: DNS task ↔ deletions). And the pieces reconcilers keep for themselves
//! or share as rules: the one-object-per-tunnel-id claims, API slots, per-object memory, the
//! `Ready` condition and its reasons, the finalizer, Events and API credentials. The tunnel
//! reconciler and the route reconciler both use it; neither reaches into the other.
pub mod access;
pub mod adapters;
pub mod asks;
pub mod claims;
pub mod cloudflare;
pub mod cluster;
pub mod conditions;
pub mod context;
pub mod created;
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
