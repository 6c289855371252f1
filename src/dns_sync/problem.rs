//! One problem of a tunnel's DNS, as the syncs report it to the statuses, and the condition
//! reasons it carries.

/// One problem of a tunnel's DNS: the hostname it concerns (`None`: all of them) and what to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DnsProblem {
    pub hostname: Option<String>,
    /// The condition reason: `DNSConflict` (a record that is not ours is in the way),
    /// `DNSError` (Cloudflare refused or failed, or the hostname cannot have a record) or
    /// `QuotaExceeded` (the zone is at its record quota).
    pub reason: &'static str,
    pub message: String,
}

pub(crate) const REASON_DNS_CONFLICT: &str = "DNSConflict";
/// Another cftunnel cluster holds the hostname's record: not an error of this cluster. It is
/// checked again at the drift interval, and taken over once that cluster lets go.
pub(crate) const REASON_DNS_OTHER_CLUSTER: &str = "DNSHeldByOtherCluster";
pub(crate) use cftunnel_policy::dns::REASON_DNS_ERROR;
/// The zone is at its record quota: the hostname waits for room, looked at again when the
/// group's input changes (a hostname removed makes room) or at the drift interval, never in a
/// retry loop (`dns_sync/quota.rs`).
pub(crate) const REASON_QUOTA_EXCEEDED: &str = "QuotaExceeded";
