//! In-memory Cloudflare API simulator: a real HTTP server speaking the v4 envelope.
//!
//! [`Simulator::router`] serves the operations at paths relative to the API base
//! (`/accounts/…`, `/zones/…`, `/user/tokens/verify`); [`Simulator::serve`] mounts that router
//! under `/client/v4` on a loopback port, so the API base is `http://127.0.0.1:PORT/client/v4`.
//!
//! Answers follow Cloudflare where it is known and are fixed here where it is not:
//! - credentials: malformed `Authorization` → 400/6003 (chain 6111); none → 401/10000;
//!   unknown token or key → 403/10000; the verify endpoints answer an unknown token with 401/1000;
//! - an account id other than the simulated one → 403/10000; unknown zone → 404/7003;
//!   unknown tunnel → 404/1003 "Tunnel not found"; deleting (or fetching the token of,
//!   cleaning up, configuring) a deleted tunnel → 404/1003 "Tunnel has been deleted", while
//!   GET still answers it with `deleted_at`; unknown record → 404/81044; no route → 404/7003;
//! - body not JSON (or not an object) → 400/9207; tunnel or configuration field missing or
//!   invalid → 400/1001; DNS record field missing or invalid → 400/1004 with the detail in
//!   `error_chain` (bad TTL → 9021, proxied on a type that cannot be → 9004);
//! - DNS records omit `comment` when it is unset, since the schema types it as a string.
//! - DNS batch (`POST …/dns_records/batch`): deletes, patches, puts, posts in that order, each
//!   checked with the single calls' rules against the zone as the earlier actions left it; the
//!   first failing action answers with its own status and code (message prefixed with
//!   `posts[3]: ` and the like) and nothing is applied. More records than the zone's plan allows
//!   (Free 200, other plans 3,500, or [`Simulator::set_batch_limit`] for every zone) → 400/1004
//!   before anything runs; a body with no list → 400/1004.
//! - Record quota (none by default; Cloudflare's Free zones hold 200 records, paid ones 3,500): a
//!   create, single or among a batch's posts (counted after its deletes), that would take the zone
//!   over it → 400/81045 "Record quota exceeded." (the code Cloudflare is reported to answer; it
//!   is not in the published list), the batch applying nothing.
//! - Supported record types are those that need no `data` object: A, AAAA, CNAME, TXT, NS, PTR, MX.
//! - Zero Trust Access (the organization, self-hosted applications, reusable policies): only an
//!   account with a team ([`SimConfig::access_team`], [`Simulator::set_access_team`]) has an
//!   organization; without one every Access call answers 400/9999
//!   `access.api.error.not_enabled: Access is not enabled` (the code and message Cloudflare is
//!   reported to answer an account without Zero Trust; neither is documented, nor is the
//!   status). Unknown application or policy → 404/12135 `access.api.error.not_found`; a refused
//!   body → 400/12130 `access.api.error.invalid_request: …` (both reported, not documented).
//!   Creates answer 201 and deletes 202, as the Access schema declares. The rules of each call
//!   are in `handlers/access_apps.rs` and `handlers/access_policies.rs`.
//! - Edge certificate packs (`GET /zones/{zone_id}/ssl/certificate_packs`): every zone starts
//!   with its Universal pack (`type: universal`, hosts `[<zone>, *.<zone>]`, `active`); tests
//!   add others with [`Simulator::add_certificate_pack`]. Only `active` packs are listed unless
//!   `status=all` (any other `status` → 400/1001); pages of 20 by default, `per_page` 5..50.
//!   Token permissions are not modelled: a token without "SSL and Certificates Read" (403/10000)
//!   is a fault, e.g. `Fault::error_rate(1.0, 403)` on [`Operation::ListCertificatePacks`].
//! - Private networks (virtual networks, IP routes by route id, hostname routes): the account
//!   starts with one virtual network, `default`, its default; exactly one live network is the
//!   default. Deletes are soft: deleted objects are listed only with `is_deleted=true`. A range
//!   is unique per virtual network, a hostname per account; live IP and hostname routes count
//!   together against the account's route limit (1,000, or [`Simulator::set_route_limit`]). Only
//!   404/1015 (unknown route) is reported; the other refusals' statuses and codes are inferred,
//!   listed in `handlers/networks.rs`. Tests read and change the stored objects behind the API's
//!   back with [`Simulator::put_ip_route`], [`Simulator::delete_route_out_of_band`] and the like.
//!
//! Limits, per credential (a Bearer token, or an email + key pair, known by a 12-hex-character
//! SHA-256 fingerprint, never by the secret):
//! - every 429 (injected, or from the budget) answers code 971 with `retry-after` and starts a
//!   block of the credential for that long. A request arriving during a block later than the
//!   in-flight grace (100 ms) after that 429 was answered is an *early call*: counted and marked
//!   in the log. With [`Simulator::set_block_on_rate_limit`] (off by default) a call during a
//!   block is refused with 429/971 and `retry-after` = the block's remaining whole seconds
//!   (at least 1), without effect and without extending the block.
//! - the request budget ([`RequestBudget`], off by default; Cloudflare's is 1,200 per 5 minutes):
//!   the request over it within the sliding window → 429/971 with `retry-after` = the block time,
//!   then every call of the credential → 429 until the block ends, whatever the block switch
//!   says. The budget's and the blocks' refusals do not count in the window (calls a fault
//!   answered do); calls without a valid credential are not budgeted. Every answer to a
//!   budgeted credential carries `Ratelimit: "default";r=<left>;t=<seconds>` (`t`: until a
//!   request is freed; during a budget block `r=0` and `t` is the block's end) and
//!   `Ratelimit-Policy: "default";q=<requests>;w=<window seconds>`.
//! - limit refusals are answered at once, without consulting the faults.
//!
//! Faults ([`Fault`], armed on a [`FaultTarget`]) can reject a call, delay it, fail it after its
//! effect, or drop its connection: a dropped call gets no answer (the response body fails, so
//! hyper aborts the connection and an in-process caller's body read fails) and is logged with
//! status 0.
mod access_controls;
mod access_state;
mod certificate_state;
mod cidr;
pub mod cli;
mod controls;
mod envelope;
mod fault_target;
mod faults;
mod handlers;
mod ids;
mod limits;
mod network_controls;
mod network_state;
mod operation;
mod query;
mod server;
mod state;
#[cfg(test)]
mod tests;

use std::sync::{Arc, Mutex, MutexGuard};

pub use access_state::{SimAccessApp, SimAccessOrganization, SimAccessPolicy, SimAccessPolicyLink};
pub use certificate_state::SimCertificatePack;
pub use fault_target::FaultTarget;
pub use faults::Fault;
pub use limits::RequestBudget;
pub use network_state::{SimHostnameRoute, SimIpRoute, SimVirtualNetwork};
pub use operation::Operation;
pub use server::RunningSim;
pub use state::{LoggedRequest, SimDnsRecord, SimTunnel};

/// Installs ring as the process-wide rustls crypto provider; idempotent.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

use state::State;

/// What the simulated Cloudflare account looks like at start.
#[derive(Clone, PartialEq, Eq)]
pub struct SimConfig {
    pub account_name: String,
    /// 32 lowercase hex; generated when `None`.
    pub account_id: Option<String>,
    pub zones: Vec<String>,
    /// Zones created with status `pending` (added to the account, not active yet); created even
    /// when not in `zones`.
    pub pending_zones: Vec<String>,
    /// Accepted Bearer tokens.
    pub tokens: Vec<String>,
    /// Accepted `(X-Auth-Email, X-Auth-Key)` pairs.
    pub api_keys: Vec<(String, String)>,
    /// The request budget per credential; `None` (the default) for no budget.
    pub budget: Option<RequestBudget>,
    /// Most records every zone may hold; `None` (the default) for no quota. Cloudflare's Free
    /// zones hold 200 records, paid ones 3,500.
    pub zone_record_quota: Option<usize>,
    /// The Zero Trust team: the account's organization is then `name` = the team and
    /// `auth_domain` = `<team>.cloudflareaccess.com`. `None` (the default) for an account
    /// without Zero Trust, whose Access calls are all refused.
    pub access_team: Option<String>,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            account_name: "cftunnel-sim".to_string(),
            account_id: None,
            zones: vec!["example.com".to_string()],
            pending_zones: Vec::new(),
            tokens: Vec::new(),
            api_keys: Vec::new(),
            budget: None,
            zone_record_quota: None,
            access_team: None,
        }
    }
}

impl std::fmt::Debug for SimConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimConfig")
            .field("account_name", &self.account_name)
            .field("account_id", &self.account_id)
            .field("zones", &self.zones)
            .field("pending_zones", &self.pending_zones)
            .field("tokens", &format_args!("<{} redacted>", self.tokens.len()))
            .field(
                "api_keys",
                &format_args!("<{} redacted>", self.api_keys.len()),
            )
            .field("budget", &self.budget)
            .field("zone_record_quota", &self.zone_record_quota)
            .field("access_team", &self.access_team)
            .finish()
    }
}

/// A handle on one simulated Cloudflare; clones share the same state.
#[derive(Clone)]
pub struct Simulator {
    inner: Arc<Mutex<State>>,
}

impl std::fmt::Debug for Simulator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Simulator")
            .field("account_id", &self.account_id())
            .finish_non_exhaustive()
    }
}

impl Simulator {
    pub fn new(config: SimConfig) -> Self {
        let account_id = config
            .account_id
            .map(|id| id.to_ascii_lowercase())
            .unwrap_or_else(state::hex_id);
        let mut zones = config.zones.clone();
        zones.extend(config.pending_zones.iter().cloned());
        let mut state = State::new(
            account_id,
            config.account_name,
            &zones,
            config.tokens,
            config.api_keys,
        );
        for zone in state.zones.iter_mut() {
            if config.pending_zones.iter().any(|p| {
                p.trim()
                    .trim_end_matches('.')
                    .eq_ignore_ascii_case(&zone.name)
            }) {
                zone.status = "pending".into();
            }
            zone.record_quota = config.zone_record_quota;
        }
        state.limits = limits::Limits::new(config.budget);
        state.access.organization = config
            .access_team
            .as_deref()
            .map(|team| access_state::SimAccessOrganization::for_team(team, state::now()));
        Simulator {
            inner: Arc::new(Mutex::new(state)),
        }
    }

    /// The operations at paths relative to the API base (no `/client/v4` prefix).
    pub fn router(&self) -> axum::Router {
        handlers::build(self)
    }

    /// Serves under `/client/v4` on a loopback address; anything else is refused.
    pub async fn serve(&self, addr: std::net::SocketAddr) -> std::io::Result<RunningSim> {
        server::serve(self, addr).await
    }

    /// Like [`Simulator::serve`], but on a dedicated thread with its own two-worker runtime, so a
    /// busy or single-threaded test runtime never delays the answers (which would blur timings).
    pub fn serve_detached(&self, addr: std::net::SocketAddr) -> std::io::Result<RunningSim> {
        server::serve_detached(self, addr)
    }

    /// A poisoned lock only means a panicking test thread; the state itself stays usable.
    fn lock(&self) -> MutexGuard<'_, State> {
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn account_id(&self) -> String {
        self.lock().account_id.clone()
    }

    pub fn account_name(&self) -> String {
        self.lock().account_name.clone()
    }

    pub fn zone_id(&self, zone_name: &str) -> Option<String> {
        self.lock().zone_by_name(zone_name).map(|z| z.id.clone())
    }

    /// Zone names and ids, in configuration order.
    pub fn zones(&self) -> Vec<(String, String)> {
        self.lock()
            .zones
            .iter()
            .map(|z| (z.name.clone(), z.id.clone()))
            .collect()
    }

    /// Sets a zone's status (`active`, `pending`, …), as Cloudflare moves it once its name
    /// servers are delegated.
    pub fn set_zone_status(&self, zone_name: &str, status: &str) -> bool {
        let mut state = self.lock();
        let Some(zone) = state
            .zones
            .iter_mut()
            .find(|z| z.name.eq_ignore_ascii_case(zone_name))
        else {
            return false;
        };
        zone.status = status.to_string();
        true
    }

    /// Sets a zone's plan (`free`, `pro`, `business`, `enterprise`; anything else is refused),
    /// which decides its DNS batch limit (200 on Free, 3,500 otherwise) unless
    /// [`Simulator::set_batch_limit`] overrides it.
    pub fn set_zone_plan(&self, zone_name: &str, plan: &str) -> bool {
        let plan = plan.to_ascii_lowercase();
        if !["free", "pro", "business", "enterprise"].contains(&plan.as_str()) {
            return false;
        }
        let mut state = self.lock();
        let Some(zone) = state
            .zones
            .iter_mut()
            .find(|z| z.name.eq_ignore_ascii_case(zone_name))
        else {
            return false;
        };
        zone.plan = plan;
        true
    }

    /// Requests routed to `op`, including those a fault or an auth check answered.
    pub fn calls(&self, op: Operation) -> u64 {
        self.lock().calls.get(&op).copied().unwrap_or(0)
    }

    /// Every request received, unmatched routes included.
    pub fn total_calls(&self) -> u64 {
        self.lock().total_calls
    }

    /// Zeroes the counters (early calls and budget refusals included) and empties the request
    /// log; blocks and budget windows in force stay.
    pub fn reset_counters(&self) {
        let mut state = self.lock();
        state.calls.clear();
        state.total_calls = 0;
        state.limits.early_calls = 0;
        state.limits.budget_refusals = 0;
        state.log.clear();
    }

    /// The most recent requests (up to 10,000), oldest first.
    pub fn request_log(&self) -> Vec<LoggedRequest> {
        self.lock().log.iter().cloned().collect()
    }

    /// Every tunnel ever created, deleted ones with `deleted_at`.
    pub fn tunnels(&self) -> Vec<SimTunnel> {
        self.lock().tunnels.clone()
    }

    /// The zone's records in creation order; empty for an unknown zone.
    pub fn dns_records(&self, zone_name: &str) -> Vec<SimDnsRecord> {
        let state = self.lock();
        state
            .zone_by_name(zone_name)
            .and_then(|z| state.records.get(&z.id))
            .cloned()
            .unwrap_or_default()
    }

    /// Attaches a fake cloudflared connector, so a delete without cascade answers 1022.
    pub fn connect_tunnel(&self, tunnel_id: &str) -> bool {
        self.lock().connect(tunnel_id)
    }

    /// Makes the edge report `status` for the tunnel (`healthy`, `degraded`, `down`,
    /// `inactive`), or again what its connectors make with `None`; false for an unknown tunnel.
    pub fn set_tunnel_status(&self, tunnel_id: &str, status: Option<&str>) -> bool {
        let mut state = self.lock();
        let Some(tunnel) = state.tunnel_mut(tunnel_id) else {
            return false;
        };
        tunnel.status_override = status.map(str::to_string);
        true
    }

    /// Soft-deletes a tunnel as the dashboard would, bypassing the API (for drift tests).
    pub fn delete_tunnel_out_of_band(&self, tunnel_id: &str) -> bool {
        self.lock().soft_delete(tunnel_id)
    }

    /// Seeds a record nobody created through this API; `None` if it fails validation or the
    /// zone's record quota.
    pub fn insert_dns_record(&self, zone_name: &str, record: serde_json::Value) -> Option<String> {
        handlers::insert_record(&mut self.lock(), zone_name, &record)
    }

    /// Adds an edge certificate pack to the zone, listed after its existing packs: `kind` is the
    /// API's `type` (`advanced`, `total_tls`, `sni_custom`, …), `hosts` are stored lower-case
    /// without a trailing dot, `status` is one of the 21 the schema declares (`active`,
    /// `pending_validation`, …). Returns the pack id; `None` for an unknown zone, an empty kind,
    /// no (or an empty) host, or an unknown status.
    pub fn add_certificate_pack(
        &self,
        zone_name: &str,
        kind: &str,
        hosts: &[&str],
        status: &str,
    ) -> Option<String> {
        let pack = SimCertificatePack::new(kind, hosts, status)?;
        let mut state = self.lock();
        let zone_id = state.zone_by_name(zone_name)?.id.clone();
        let id = pack.id.clone();
        state
            .certificate_packs
            .entry(zone_id)
            .or_default()
            .push(pack);
        Some(id)
    }

    /// Moves a pack to another status (as an order progresses, or a certificate expires); false
    /// for an unknown zone or pack, or a status the schema does not declare.
    pub fn set_certificate_pack_status(
        &self,
        zone_name: &str,
        pack_id: &str,
        status: &str,
    ) -> bool {
        let mut state = self.lock();
        let Some(zone_id) = state.zone_by_name(zone_name).map(|z| z.id.clone()) else {
            return false;
        };
        state
            .certificate_packs
            .get_mut(&zone_id)
            .and_then(|packs| {
                packs
                    .iter_mut()
                    .find(|p| p.id.eq_ignore_ascii_case(pack_id))
            })
            .is_some_and(|pack| pack.set_status(status))
    }

    /// The zone's certificate packs of every status, in creation order (the Universal pack
    /// first); empty for an unknown zone.
    pub fn certificate_packs(&self, zone_name: &str) -> Vec<SimCertificatePack> {
        let state = self.lock();
        state
            .zone_by_name(zone_name)
            .and_then(|z| state.certificate_packs.get(&z.id))
            .cloned()
            .unwrap_or_default()
    }

    /// The connector token the API would hand out for this tunnel.
    pub fn tunnel_token(&self, tunnel_id: &str) -> Option<String> {
        let state = self.lock();
        state
            .tunnel(tunnel_id)
            .map(|t| handlers::token_for(&state.account_id, t))
    }
}
