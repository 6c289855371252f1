//! The DNS planner (docs/design.md §3.3): an ExternalDNS-style plan per zone.
//!
//! [`plan_zone`] is pure: every tunnel's routed hostnames in one zone + the candidate records
//! → creates, updates and deletes per tunnel, and conflicts naming the record in the way. The
//! operator's DNS sync reads the candidates, calls it and executes the plan.
//!
//! Records written: the proxied CNAME `<hostname>` → `<tunnelId>.cfargotunnel.com` (ttl 1) with
//! the comment `cftunnel <tunnel identity>[ cluster=<id>]` ([`ownership_marker`]), and unless
//! turned off the TXT `_managed.<hostname>` (`_managed.wildcard.<rest>` for `*.<rest>`) holding
//! `{"DnsId","TunnelName","TunnelId"[,"Owner"]}` ([`ManagedTxt`]) for the Go operator.
//!
//! Choices where the specification is silent:
//! - Ownership by TXT needs the CNAME to point at one of our ids as well (one edited to point
//!   elsewhere is not ours any more), and the TXT's `DnsId` to be the CNAME's record id (as the
//!   Go operator writes it; otherwise `*.x`'s `_managed.wildcard.x` would vouch for `wildcard.x`).
//! - A `_managed` TXT naming another tunnel is another owner's claim: it blocks a hostname that
//!   has no CNAME of ours yet, and is never replaced (without `overwrite_unmanaged`).
//! - Our TXTs carry the marker comment too; a TXT is compared by its parsed payload, so the Go
//!   operator's unquoted records are adopted without a rewrite (adopting a Go CNAME costs one
//!   PATCH that adds the marker).
//! - With `overwrite_unmanaged`, a foreign CNAME is taken over with a PUT (nothing of it
//!   survives), A/AAAA records at the hostname are deleted before the CNAME is created.
//! - The marker is compared as a whole: changing the cluster id makes existing records foreign.
mod batching;
mod change;
mod desired;
mod marker;
mod names;
mod ownership;
mod plan;
mod quota;
mod quota_memory;
mod txt;
mod zones;

#[cfg(test)]
mod conflict_tests;
#[cfg(test)]
mod fixtures;
#[cfg(test)]
mod ownership_tests;
#[cfg(test)]
mod plan_props;
#[cfg(test)]
mod plan_tests;

pub use batching::{BatchMemory, BatchMode, ZoneBatching};
pub use change::{
    ConflictReason, DesiredRecord, DnsAction, DnsChange, DnsConflict, DnsIdSource, DnsPlan,
    InvalidHostname, RecordRef, SharedHostname,
};
pub use desired::{DnsOptions, MAX_HOSTNAME_CHARS, TunnelDns, ZoneDns};
pub use marker::{ClusterId, MARKER_PREFIX, MAX_COMMENT_CHARS, ownership_marker};
pub use names::{normalize_name, normalized, tunnel_target};
pub use ownership::{Ours, Owner};
pub use plan::plan_zone;
pub use quota::{Fitted, OverQuota, QuotaBasis, ZoneRoom, fit, records_added, records_needed};
pub use quota_memory::{QuotaFacts, QuotaMemory, Refusal};
pub use txt::{ManagedTxt, TXT_PREFIX, managed_txt_name, quote_txt, unquote_txt};
pub use zones::{AccountZone, MAX_ZONES_NAMED, no_zone_message, pending_zone, place};

/// The reason a route reports for a hostname that no zone of its tunnel's account holds.
pub const REASON_DNS_NO_ZONE: &str = "DNSZoneNotFound";
/// The reason a route reports for a hostname that cannot have a record, or whose record a
/// Cloudflare call failed to write.
pub const REASON_DNS_ERROR: &str = "DNSError";
