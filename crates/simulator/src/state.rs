//! The simulator's in-memory world: one account, its zones, tunnels, DNS records, edge
//! certificate packs, Access and private networks.
pub(crate) use super::ids::{hex_id, now, uuid_id};
use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::time::Duration;

use rand::{SeedableRng, rngs::StdRng};

use super::access_state::AccessState;
use super::certificate_state::SimCertificatePack;
use super::fault_target::FaultRules;
use super::limits::Limits;
use super::network_state::NetworkState;
use super::operation::Operation;

/// Most requests kept in the log; older entries are dropped first.
pub(crate) const REQUEST_LOG_CAPACITY: usize = 10_000;

/// A request as the simulator saw it, without any credential header.
#[derive(Clone, PartialEq)]
pub struct LoggedRequest {
    /// `None` when no route matched.
    pub operation: Option<Operation>,
    pub method: String,
    pub path: String,
    pub query: String,
    /// `None` when the body was empty or not JSON.
    pub request_body: Option<serde_json::Value>,
    /// 0 when no answer was given: the connection was dropped (`Fault::drop_next`,
    /// `Fault::drop_after_apply`).
    pub status: u16,
    /// `null` when no answer was given.
    pub response_body: serde_json::Value,
    /// Fingerprint of the credential the request carried (12 hex characters of its SHA-256,
    /// known or not); `None` without a well-formed credential.
    pub credential: Option<String>,
    /// Sent while a block of its credential was in force, later than the in-flight grace after
    /// the 429 that started it (see `Simulator::early_calls`).
    pub early: bool,
    /// When the request arrived, since the simulator was created (tokio's clock).
    pub at: Duration,
    /// When it was answered (or dropped), since the simulator was created (tokio's clock).
    pub answered_at: Duration,
}

/// Bodies can hold tunnel secrets and tokens, so Debug shows only their presence.
impl fmt::Debug for LoggedRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LoggedRequest")
            .field("operation", &self.operation)
            .field("method", &self.method)
            .field("path", &self.path)
            .field("query", &self.query)
            .field(
                "request_body",
                &self.request_body.as_ref().map(|_| "<json>"),
            )
            .field("status", &self.status)
            .field("credential", &self.credential)
            .field("early", &self.early)
            .field("at", &self.at)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Zone {
    pub id: String,
    pub name: String,
    pub created_on: String,
    /// The plan's `legacy_id`: `free` (the default), `pro`, `business` or `enterprise`.
    pub plan: String,
    /// `active`, or `pending` for a zone added but not delegated yet.
    pub status: String,
    /// Most records the zone may hold; `None` for no quota.
    pub record_quota: Option<usize>,
}

impl Zone {
    /// Most records one DNS batch may touch on this zone's plan.
    pub fn plan_batch_limit(&self) -> usize {
        if self.plan == "free" { 200 } else { 3_500 }
    }
}

/// A fake cloudflared connector attached to a tunnel.
#[derive(Debug, Clone)]
pub(crate) struct Connector {
    pub id: String,
    pub connection_id: String,
    pub run_at: String,
}

/// A tunnel as stored, deleted ones included.
#[derive(Clone, PartialEq)]
pub struct SimTunnel {
    pub id: String,
    pub name: String,
    pub created_at: String,
    pub deleted_at: Option<String>,
    /// `local` or `cloudflare`.
    pub config_src: String,
    /// Exactly the base64 text sent at creation (or generated); redacted from Debug.
    pub tunnel_secret: String,
    pub connector_ids: Vec<String>,
    pub conns_active_at: Option<String>,
    pub conns_inactive_at: Option<String>,
    /// What the edge reports instead of the status its connectors make (`healthy` with one,
    /// `down` after the last left, `inactive` before any), set by a test as an outage would.
    pub status_override: Option<String>,
    /// Remote configuration and its version (0 until the first PUT).
    pub config: Option<serde_json::Value>,
    pub config_version: u64,
    pub config_updated_at: String,
}

impl fmt::Debug for SimTunnel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimTunnel")
            .field("id", &self.id)
            .field("name", &self.name)
            .field("created_at", &self.created_at)
            .field("deleted_at", &self.deleted_at)
            .field("config_src", &self.config_src)
            .field("tunnel_secret", &"<redacted>")
            .field("connector_ids", &self.connector_ids)
            .field("config_version", &self.config_version)
            .finish_non_exhaustive()
    }
}

/// A DNS record as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct SimDnsRecord {
    pub id: String,
    pub zone_id: String,
    pub zone_name: String,
    pub record_type: String,
    pub name: String,
    pub content: String,
    pub ttl: u32,
    pub proxied: bool,
    pub priority: Option<u16>,
    pub comment: Option<String>,
    pub tags: Vec<String>,
    pub created_on: String,
    pub modified_on: String,
}

pub(crate) struct State {
    pub account_id: String,
    pub account_name: String,
    pub account_created_on: String,
    pub tokens: Vec<String>,
    pub api_keys: Vec<(String, String)>,
    pub zones: Vec<Zone>,
    /// Creation order, which is also the list order.
    pub tunnels: Vec<SimTunnel>,
    pub connectors: HashMap<String, Vec<Connector>>,
    /// Creation order per zone id.
    pub records: HashMap<String, Vec<SimDnsRecord>>,
    /// Edge certificate packs in creation order per zone id; each zone starts with its
    /// Universal pack.
    pub certificate_packs: HashMap<String, Vec<SimCertificatePack>>,
    /// Zero Trust Access: the organization, applications and reusable policies.
    pub access: AccessState,
    /// Private networks: virtual networks, IP routes and hostname routes.
    pub networks: NetworkState,
    pub faults: FaultRules,
    pub rng: StdRng,
    pub limits: Limits,
    /// Overrides every zone's plan batch limit when set.
    pub batch_limit: Option<usize>,
    /// The origin of the log's timeline.
    pub created: tokio::time::Instant,
    pub calls: HashMap<Operation, u64>,
    pub total_calls: u64,
    pub log: VecDeque<LoggedRequest>,
}

impl State {
    pub fn new(
        account_id: String,
        account_name: String,
        zone_names: &[String],
        tokens: Vec<String>,
        api_keys: Vec<(String, String)>,
    ) -> Self {
        let now = now();
        let mut zones: Vec<Zone> = Vec::new();
        for name in zone_names {
            let name = name.trim().trim_end_matches('.').to_ascii_lowercase();
            if !name.is_empty() && !zones.iter().any(|z| z.name == name) {
                zones.push(Zone {
                    id: hex_id(),
                    name,
                    created_on: now.clone(),
                    plan: "free".into(),
                    status: "active".into(),
                    record_quota: None,
                });
            }
        }
        let records = zones.iter().map(|z| (z.id.clone(), Vec::new())).collect();
        let certificate_packs = zones
            .iter()
            .map(|z| (z.id.clone(), vec![SimCertificatePack::universal(&z.name)]))
            .collect();
        let networks = NetworkState::new(uuid_id(), now.clone());
        State {
            account_id,
            account_name,
            account_created_on: now,
            tokens,
            api_keys,
            zones,
            tunnels: Vec::new(),
            connectors: HashMap::new(),
            records,
            certificate_packs,
            access: AccessState::default(),
            networks,
            faults: FaultRules::default(),
            rng: StdRng::seed_from_u64(0),
            limits: Limits::new(None),
            batch_limit: None,
            created: tokio::time::Instant::now(),
            calls: HashMap::new(),
            total_calls: 0,
            log: VecDeque::new(),
        }
    }

    pub(crate) fn zone_by_id(&self, id: &str) -> Option<&Zone> {
        self.zones.iter().find(|z| z.id == id)
    }

    /// Most records one DNS batch may touch on the zone: the override, else the plan's.
    pub(crate) fn batch_limit(&self, zone: &Zone) -> usize {
        self.batch_limit.unwrap_or_else(|| zone.plan_batch_limit())
    }

    pub(crate) fn zone_by_name(&self, name: &str) -> Option<&Zone> {
        self.zones
            .iter()
            .find(|z| z.name.eq_ignore_ascii_case(name.trim_end_matches('.')))
    }

    pub(crate) fn tunnel_mut(&mut self, id: &str) -> Option<&mut SimTunnel> {
        self.tunnels
            .iter_mut()
            .find(|t| t.id.eq_ignore_ascii_case(id))
    }

    pub fn tunnel(&self, id: &str) -> Option<&SimTunnel> {
        self.tunnels.iter().find(|t| t.id.eq_ignore_ascii_case(id))
    }

    pub(crate) fn push_log(&mut self, entry: LoggedRequest) {
        if self.log.len() >= REQUEST_LOG_CAPACITY {
            self.log.pop_front();
        }
        self.log.push_back(entry);
    }

    /// Attaches a fake connector; false when the tunnel is unknown or deleted.
    pub fn connect(&mut self, tunnel_id: &str) -> bool {
        let at = now();
        let Some(tunnel) = self.tunnel_mut(tunnel_id) else {
            return false;
        };
        if tunnel.deleted_at.is_some() {
            return false;
        }
        let connector = Connector {
            id: uuid_id(),
            connection_id: uuid_id(),
            run_at: at.clone(),
        };
        tunnel.connector_ids.push(connector.id.clone());
        tunnel.conns_active_at = Some(at);
        let key = tunnel.id.clone();
        self.connectors.entry(key).or_default().push(connector);
        true
    }

    /// Drops connectors (one by id, or all); records when the tunnel went inactive.
    pub(crate) fn disconnect(&mut self, tunnel_id: &str, client_id: Option<&str>) {
        let Some(tunnel) = self.tunnel_mut(tunnel_id) else {
            return;
        };
        let key = tunnel.id.clone();
        tunnel
            .connector_ids
            .retain(|id| client_id.is_some_and(|c| !c.eq_ignore_ascii_case(id)));
        let now_empty = tunnel.connector_ids.is_empty();
        if now_empty && tunnel.conns_active_at.is_some() {
            tunnel.conns_inactive_at = Some(now());
        }
        if let Some(list) = self.connectors.get_mut(&key) {
            list.retain(|c| client_id.is_some_and(|id| !id.eq_ignore_ascii_case(&c.id)));
        }
    }

    /// Soft-deletes a tunnel; false when unknown or already deleted.
    pub(crate) fn soft_delete(&mut self, tunnel_id: &str) -> bool {
        let live = self
            .tunnel(tunnel_id)
            .is_some_and(|t| t.deleted_at.is_none());
        if !live {
            return false;
        }
        self.disconnect(tunnel_id, None);
        if let Some(tunnel) = self.tunnel_mut(tunnel_id) {
            tunnel.deleted_at = Some(now());
        }
        true
    }
}
