//! Who writes DNS for a route (docs/design.md §3.3): the DNS task of a term, its schedule, the
//! groups of tunnels per zone and credential, and the sync of one zone.
//!
//! - [`task`]: receives each route table from the route reconciler and runs a sync, paced.
//! - `schedule`: when and with what each group is synced, and what the syncs report back
//!   (`problem`: one problem of a tunnel's DNS and its condition reason).
//! - `groups`, `credentials`, `previous_zones`: which hostnames go to which zone and group, with
//!   which API credential, and the zones a tunnel's records must leave.
//! - [`sync_zone`] reads the candidates once per sync for all tunnels of the zone (never one
//!   lookup per hostname; the query choice is written down in `candidates.rs`), plans with the
//!   pure planner ([`cftunnel_policy::dns::plan_zone`]), applies, and reports per tunnel.
mod batched;
mod candidates;
mod credentials;
mod group_sync;
mod groups;
mod known;
mod previous_zones;
mod problem;
mod quota;
mod quota_run;
mod report;
mod schedule;
mod single;
pub mod task;
mod tunnels;
mod zone;

pub use known::KnownRecords;
pub(crate) use previous_zones::MAX_ZONES as MAX_RECORDED_ZONES;
pub use problem::DnsProblem;
pub use report::{DnsWriteError, TunnelDnsReport, WriteKind, WrittenRecord, ZoneDnsReport};
pub use schedule::{DnsSync, DnsView};
pub use tunnels::TunnelRecord;
pub use zone::{DnsSyncError, sync_zone, sync_zone_from};
