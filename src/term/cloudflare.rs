//! The term's Cloudflare client factory: the process's rate limiters, the term's one HTTP
//! transport and what builds a client ([`Cloudflare::client`], [`Cloudflare::client_at`]).
//!
//! It also holds what this term learned from Cloudflare that several components read: zone ids
//! by name, every zone of an account, the live tunnels of an account, and what each zone allows
//! of the DNS batch call and of records. These are memoized Cloudflare answers, kept with the
//! clients that fetch them; they are not hand-offs between reconcilers (no component tells
//! another anything through them).
use std::sync::{Arc, OnceLock};

use super::created::CreatedTunnels;
use super::options::ControllerOptions;
use super::tunnel_lists::TunnelLists;
use super::zones::{ZoneIds, ZoneLists};
use crate::metrics::Metrics;
use cftunnel_cloudflare::{
    Budget, CloudflareClient, CloudflareError, Credentials, Pace, Priority, RateLimiters,
    Transport, WriteGate,
};
use cftunnel_policy::dns::{BatchMemory, QuotaMemory};

/// Builds every Cloudflare client of a term, and keeps what the term learned from Cloudflare.
pub struct Cloudflare {
    /// The process's pacers: every credential has exactly one bucket, and a 429 pause outlives
    /// a re-election.
    limiters: RateLimiters,
    /// The HTTP client of every Cloudflare call of this term, built on first use: one
    /// connection pool and TLS session cache, not one per reconcile (each cost ~10 KiB held and
    /// a new connection to Cloudflare).
    http: OnceLock<Transport>,
    base_url: String,
    budget: Budget,
    max_attempts: Option<u32>,
    /// The term's write permit: every Cloudflare write checks it.
    write_gate: WriteGate,
    metrics: Arc<Metrics>,
    /// Zone ids looked up by name, shared by every reconcile.
    pub zone_ids: ZoneIds,
    /// Every zone of an account per credential, for the DNS placement of hostnames.
    pub zone_lists: ZoneLists,
    /// The live tunnels of each account, one walk shared by the drift checks.
    pub tunnel_lists: TunnelLists,
    /// The tunnels this term created: what is known of them without a read.
    pub created: CreatedTunnels,
    /// What each zone allows of the batch call, shared by the DNS task and deletions.
    batch_memory: BatchMemory,
    /// Per-zone record quota facts, shared by the DNS task and deletions like `batch_memory`.
    quota_memory: QuotaMemory,
}

impl Cloudflare {
    /// The factory of a term: clients go to `options.cloudflare_api_url` within
    /// `options.cloudflare_budget`, write only while `write_gate` is open, and report to
    /// `metrics`.
    pub fn new(
        limiters: RateLimiters,
        options: &ControllerOptions,
        write_gate: WriteGate,
        metrics: Arc<Metrics>,
    ) -> Cloudflare {
        Cloudflare {
            limiters,
            http: OnceLock::new(),
            base_url: options.cloudflare_api_url.clone(),
            budget: options.cloudflare_budget,
            max_attempts: options.cloudflare_max_attempts,
            write_gate,
            metrics,
            zone_ids: Default::default(),
            zone_lists: Default::default(),
            tunnel_lists: Default::default(),
            created: Default::default(),
            batch_memory: BatchMemory::default(),
            quota_memory: QuotaMemory::default(),
        }
    }

    /// A Cloudflare client for `credentials`, sharing the process-wide pacer of the
    /// credential (paced within `--cloudflare-budget`); its calls queue at [`Priority::Normal`].
    pub fn client(&self, credentials: Credentials) -> Result<CloudflareClient, CloudflareError> {
        let builder = CloudflareClient::builder(credentials)
            .transport(self.http()?)
            .base_url(self.base_url.clone())
            .limiters(self.limiters.clone())
            .pace(Pace::within(self.budget))
            .write_gate(self.write_gate.clone())
            .observer(self.metrics.clone());
        match self.max_attempts {
            Some(attempts) => builder.max_attempts(attempts).build(),
            None => builder.build(),
        }
    }

    /// [`Cloudflare::client`] whose calls queue at `priority`.
    pub fn client_at(
        &self,
        credentials: Credentials,
        priority: Priority,
    ) -> Result<CloudflareClient, CloudflareError> {
        Ok(self.client(credentials)?.with_priority(priority))
    }

    /// The process's rate limiters (the pacer of each credential).
    pub fn limiters(&self) -> &RateLimiters {
        &self.limiters
    }

    /// What each zone allows of the batch call (a clone shares the memory).
    pub(crate) fn batch_memory(&self) -> BatchMemory {
        self.batch_memory.clone()
    }

    /// Per-zone record quota facts (a clone shares the memory).
    pub(crate) fn quota_memory(&self) -> QuotaMemory {
        self.quota_memory.clone()
    }

    /// The term's HTTP client (a clone shares its pool).
    fn http(&self) -> Result<Transport, CloudflareError> {
        if let Some(transport) = self.http.get() {
            return Ok(transport.clone());
        }
        let transport = Transport::http()?;
        Ok(self.http.get_or_init(|| transport).clone())
    }
}
