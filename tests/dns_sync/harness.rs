//! One simulated Cloudflare zone and a client on it, with call counters for the DNS sync tests.
use std::collections::BTreeSet;
use std::time::Duration;

use cftunnel::dns_sync::{KnownRecords, ZoneDnsReport, sync_zone, sync_zone_from};
use cftunnel_cloudflare::{CloudflareClient, Credentials, RateLimit, Transport};
use cftunnel_policy::dns::{BatchMode, DnsOptions, TunnelDns, ZoneDns};
use cftunnel_sim::{Operation, SimConfig, SimDnsRecord, Simulator};
use cftunnel_types::{TunnelIdentity, TunnelKind};

use crate::openapi::OpenApi;

pub const ZONE: &str = "example.com";
pub const ID_A: &str = "aaaaaaaa-0000-4000-8000-000000000001";
pub const ID_B: &str = "bbbbbbbb-0000-4000-8000-000000000002";
pub const ID_OLD: &str = "0dd0dd00-0000-4000-8000-000000000003";
const TOKEN: &str = "dns-sync-token";

const WRITES: [Operation; 5] = [
    Operation::CreateDnsRecord,
    Operation::UpdateDnsRecord,
    Operation::PatchDnsRecord,
    Operation::DeleteDnsRecord,
    Operation::BatchDnsRecords,
];

pub struct Env {
    pub sim: Simulator,
    pub client: CloudflareClient,
    pub zone_id: String,
    /// How every sync of this environment writes (its memories shared by all of them).
    pub options: DnsOptions,
}

impl Env {
    /// Single-record writes (`--dns-batch=never`, the path the fallback takes): what the DNS
    /// tests were written for, call counts included.
    pub fn new() -> Self {
        Self::with_mode(BatchMode::Never)
    }

    /// Batched writes (`--dns-batch=always`).
    pub fn batched() -> Self {
        Self::with_mode(BatchMode::Always)
    }

    pub fn with_mode(batch: BatchMode) -> Self {
        let sim = Simulator::new(SimConfig {
            zones: vec![ZONE.into()],
            tokens: vec![TOKEN.into()],
            ..SimConfig::default()
        });
        let zone_id = sim.zone_id(ZONE).expect("zone");
        let client = client(&sim);
        Self {
            sim,
            client,
            zone_id,
            options: DnsOptions {
                batch,
                ..DnsOptions::default()
            },
        }
    }

    /// A new client on the same Cloudflare: what an operator restart starts with.
    pub fn restart(&mut self) {
        self.client = client(&self.sim);
    }

    pub async fn sync(&self, zone: &ZoneDns) -> ZoneDnsReport {
        self.sync_with(zone, &DnsOptions::default()).await
    }

    /// `options` with this environment's write mode and memory.
    pub async fn sync_with(&self, zone: &ZoneDns, options: &DnsOptions) -> ZoneDnsReport {
        let options = DnsOptions {
            batch: self.options.batch,
            batch_memory: self.options.batch_memory.clone(),
            quota_memory: self.options.quota_memory.clone(),
            ..options.clone()
        };
        let report = sync_zone(&self.client, &self.zone_id, zone, &options)
            .await
            .expect("candidate reads");
        // The client's own retries reach the simulator but are one call for the report.
        assert!(u64::from(report.reads) <= self.reads(), "reads counted");
        assert!(u64::from(report.writes) <= self.writes(), "writes counted");
        report
    }

    /// A sync that starts from `known` (none: it reads the zone) and asks `more_coming` whether
    /// another sync of the group is on its way; returns what it leaves for the next.
    pub async fn sync_from(
        &self,
        zone: &ZoneDns,
        known: Option<KnownRecords>,
        more_coming: &(dyn Fn() -> bool + Sync),
    ) -> (ZoneDnsReport, Option<KnownRecords>) {
        let options = DnsOptions {
            batch: self.options.batch,
            batch_memory: self.options.batch_memory.clone(),
            quota_memory: self.options.quota_memory.clone(),
            ..DnsOptions::default()
        };
        sync_zone_from(
            &self.client,
            &self.zone_id,
            zone,
            &options,
            known,
            more_coming,
        )
        .await
        .expect("candidate reads")
    }

    /// Starts counting from zero.
    pub fn reset(&self) {
        self.sim.reset_counters();
    }

    pub fn reads(&self) -> u64 {
        self.sim.calls(Operation::ListDnsRecords)
    }

    pub fn writes(&self) -> u64 {
        WRITES.iter().map(|op| self.sim.calls(*op)).sum()
    }

    pub fn records(&self) -> Vec<SimDnsRecord> {
        self.sim.dns_records(ZONE)
    }

    pub fn record(&self, record_type: &str, name: &str) -> Option<SimDnsRecord> {
        self.records()
            .into_iter()
            .find(|r| r.record_type == record_type && r.name == name)
    }

    /// Seeds a record as the dashboard or another tool would; returns its id.
    pub fn seed(&self, record: serde_json::Value) -> String {
        self.sim.insert_dns_record(ZONE, record).expect("seeded")
    }

    /// Every request of the sync used only parameters and bodies the OpenAPI subset documents.
    pub fn assert_contract(&self) {
        let api = OpenApi::load();
        for entry in self.sim.request_log() {
            let op_id = entry
                .operation
                .and_then(|op| op.operation_id())
                .expect("a DNS operation");
            api.validate_query(op_id, &entry.query)
                .and_then(|()| api.validate_request(op_id, entry.request_body.as_ref()))
                .and_then(|()| api.validate_response(op_id, entry.status, &entry.response_body))
                .unwrap_or_else(|e| panic!("{} {}?{}: {e}", entry.method, entry.path, entry.query));
        }
    }
}

fn client(sim: &Simulator) -> CloudflareClient {
    client_on(sim.router())
}

/// A client whose requests go through `router` (the simulator's, maybe wrapped by a test).
pub fn client_on(router: axum::Router) -> CloudflareClient {
    CloudflareClient::builder(Credentials::ApiToken(TOKEN.into()))
        .transport(Transport::InProcess(router))
        .rate_limit(RateLimit {
            per_second: 100_000,
            burst: 100_000,
        })
        .backoff(Duration::from_millis(1), Duration::from_millis(5))
        .build()
        .expect("client")
}

pub fn identity(name: &str) -> TunnelIdentity {
    TunnelIdentity {
        kind: TunnelKind::Tunnel,
        namespace: "shop".into(),
        name: name.into(),
    }
}

pub fn tunnel(name: &str, id: &str, hostnames: &[&str]) -> TunnelDns {
    TunnelDns {
        identity: identity(name),
        tunnel_id: id.into(),
        previous_tunnel_ids: Vec::new(),
        tunnel_name: format!("{name}-cf"),
        hostnames: hostnames.iter().map(|h| h.to_string()).collect(),
        txt_records: true,
        sweep: false,
    }
}

pub fn zone(tunnels: Vec<TunnelDns>) -> ZoneDns {
    ZoneDns {
        zone_name: ZONE.into(),
        tunnels,
        ..ZoneDns::default()
    }
}

/// `n` hostnames `app-<i>.example.com`.
pub fn hostnames(prefix: &str, n: usize) -> BTreeSet<String> {
    (0..n).map(|i| format!("{prefix}-{i}.{ZONE}")).collect()
}

pub fn target(id: &str) -> String {
    format!("{id}.cfargotunnel.com")
}
