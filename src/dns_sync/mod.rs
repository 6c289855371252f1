//! DNS records of routed hostnames (docs/design.md §3.3): the sync of one zone.
//!
//! [`sync_zone`] reads the candidates once per sync for all tunnels of the zone (never one
//! lookup per hostname; the query choice is written down in `candidates.rs`), plans with the
//! pure planner ([`cftunnel_policy::dns::plan_zone`]), applies, and reports per tunnel.
mod batched;
mod candidates;
mod report;
mod single;
mod sync;

pub use report::{DnsWriteError, TunnelDnsReport, WriteKind, WrittenRecord, ZoneDnsReport};
pub use sync::{DnsSyncError, sync_zone};
