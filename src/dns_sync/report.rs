//! What one zone sync did, per tunnel: records written, conflicts, errors.
use std::fmt;

use cftunnel_cloudflare::CloudflareError;
use cftunnel_types::TunnelIdentity;

use crate::metrics::Metrics;

use cftunnel_policy::dns::{DnsConflict, InvalidHostname, OverQuota, RecordRef, SharedHostname};

/// The kind of a write.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum WriteKind {
    Create,
    /// PATCH of a record of ours.
    Update,
    /// PUT over a record that was not ours (`overwrite_unmanaged`).
    TakeOver,
    Delete,
}

impl WriteKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Create => "create",
            Self::Update => "update",
            Self::TakeOver => "take over",
            Self::Delete => "delete",
        }
    }

    /// The `action` label of `cftunnel_dns_writes_total`.
    pub fn metric_label(self) -> &'static str {
        match self {
            Self::Create => "create",
            Self::Update => "update",
            Self::TakeOver => "take_over",
            Self::Delete => "delete",
        }
    }
}

/// A write that succeeded; `record` is the record as Cloudflare answered (as it was, for a
/// delete).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WrittenRecord {
    pub kind: WriteKind,
    pub record: RecordRef,
}

/// A write that failed. The hostname's later changes were not attempted (`skipped` of them).
#[derive(Debug)]
pub struct DnsWriteError {
    pub hostname: String,
    pub kind: WriteKind,
    pub record: RecordRef,
    /// Keeps Cloudflare's status, codes and messages.
    pub error: CloudflareError,
    pub skipped: usize,
}

impl fmt::Display for DnsWriteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "DNS {} of {} for {} failed: {}",
            self.kind.as_str(),
            self.record,
            self.hostname,
            self.error
        )?;
        if self.skipped > 0 {
            write!(f, " ({} later change(s) skipped)", self.skipped)?;
        }
        Ok(())
    }
}

/// One tunnel's outcome.
#[derive(Debug)]
pub struct TunnelDnsReport {
    pub identity: TunnelIdentity,
    pub written: Vec<WrittenRecord>,
    pub conflicts: Vec<DnsConflict>,
    pub invalid: Vec<InvalidHostname>,
    pub errors: Vec<DnsWriteError>,
    /// Other clusters' hostnames on this tunnel that no tunnel of the zone routes here.
    pub shared: Vec<SharedHostname>,
    /// Routed hostnames left without records: the zone is at its record quota.
    pub over_quota: Vec<OverQuota>,
    /// CNAME and TXT records of this tunnel left in the zone after the sync. A tunnel being
    /// deleted (passed with no hostnames) is clean once this is 0 and `errors` is empty.
    pub records_left: usize,
}

impl TunnelDnsReport {
    pub(crate) fn new(identity: TunnelIdentity) -> Self {
        Self {
            identity,
            written: Vec::new(),
            conflicts: Vec::new(),
            invalid: Vec::new(),
            errors: Vec::new(),
            shared: Vec::new(),
            over_quota: Vec::new(),
            records_left: 0,
        }
    }

    /// Every routed hostname has its records and nothing failed.
    pub fn is_clean(&self) -> bool {
        self.conflicts.is_empty()
            && self.invalid.is_empty()
            && self.errors.is_empty()
            && self.over_quota.is_empty()
    }

    /// Every problem as one line each (conflicts, refused hostnames, failed writes, hostnames
    /// over the zone's quota).
    pub fn problems(&self) -> Vec<String> {
        let conflicts = self.conflicts.iter().map(ToString::to_string);
        let invalid = self.invalid.iter().map(ToString::to_string);
        let errors = self.errors.iter().map(ToString::to_string);
        let over = self.over_quota.iter().map(ToString::to_string);
        conflicts.chain(invalid).chain(errors).chain(over).collect()
    }
}

/// The outcome of [`super::sync_zone`] for one zone.
#[derive(Debug)]
pub struct ZoneDnsReport {
    /// One entry per input tunnel, in input order.
    pub tunnels: Vec<TunnelDnsReport>,
    /// List calls made (candidate pages and re-reads after "record exists"); the client's own
    /// retries of a call are not counted again.
    pub reads: u32,
    /// Create, update and delete calls made, failed ones included (retries as above).
    pub writes: u32,
    /// TXTs created with an empty `DnsId` whose patch was left to the group's next sync, which
    /// was already coming (see `batched.rs`).
    pub deferred_dns_ids: usize,
    /// Hostnames whose creates were left to that sync: its turn came with a newer input waiting,
    /// which plans them anew with everything that arrived since (see `batched.rs`).
    pub left_to_next: usize,
}

impl ZoneDnsReport {
    /// Counts this sync's writes in the metrics, by action and result.
    pub(crate) fn count_writes(&self, metrics: &Metrics) {
        for tunnel in &self.tunnels {
            for written in &tunnel.written {
                metrics.dns_written(written.kind.metric_label(), true);
            }
            for failed in &tunnel.errors {
                metrics.dns_written(failed.kind.metric_label(), false);
            }
        }
    }
}

impl ZoneDnsReport {
    pub fn tunnel(&self, identity: &TunnelIdentity) -> Option<&TunnelDnsReport> {
        self.tunnels.iter().find(|t| &t.identity == identity)
    }
}
