//! What a DNS sync, and the finalizers of the routes, need to know of one tunnel object.
use cftunnel_types::{CloudflareDetails, TunnelIdentity, TunnelStatus};

/// What DNS and finalizers need to know of one tunnel object.
#[derive(Clone, Debug)]
pub struct TunnelRecord {
    pub identity: TunnelIdentity,
    /// Namespace of the API Secret (the tunnel's own, or the cluster-resource namespace).
    pub secret_namespace: String,
    pub cloudflare: CloudflareDetails,
    pub status: TunnelStatus,
    /// `deletionTimestamp` is set: its records are removed by its own deletion.
    pub deleting: bool,
}
