//! What every component of a term shares: the Kubernetes client, the event recorder, the
//! options, the watch scope, the term's scope, the metrics, the cluster id and the Cloudflare
//! client factory (`term::cloudflare`: the process's rate limiters, so every credential has
//! exactly one bucket and a 429 pause outlives a re-election, and the term's HTTP transport).
use std::sync::Arc;

use kube::Client;
use kube::runtime::events::Reporter;

use super::recorder::Recorder;

use super::cloudflare::Cloudflare;
pub use super::options::{
    ControllerOptions, DEFAULT_CLOUDFLARED_IMAGE, DEFAULT_CLUSTER_RESOURCE_NAMESPACE,
};
use crate::caches::WatchScope;
use crate::metrics::Metrics;
use crate::scope::Scope;
use cftunnel_cloudflare::RateLimiters;
use cftunnel_policy::dns::{ClusterId, DnsOptions};

/// What every component of a term reads: the kube client, the event recorder, the options, the
/// watch scope, the term's [`Scope`], the metrics, the cluster id and the Cloudflare client
/// factory. Eight fields, and only these: nothing here carries data from one reconciler to
/// another. The hand-offs between components (the route index, the Access guard, shared
/// tunnels, asks, the DNS guard and tunnel zones) are made once per term in `wiring.rs` and
/// passed to the components that write and read them; each reconciler keeps its own memory
/// (the tunnel reconciler's is `tunnel_reconciler::TunnelContext`).
pub struct Context {
    pub client: Client,
    /// Events on the objects reconciled.
    pub recorder: Recorder,
    /// `cftunnel run`'s settings.
    pub options: ControllerOptions,
    /// What this instance watches (namespace or cluster).
    pub scope: WatchScope,
    /// The leadership term (or standalone run) this context belongs to: everything the
    /// reconcilers spawn runs in it, and every Cloudflare write checks its permit.
    pub term: Scope,
    /// The process's metrics; reconciles, DNS writes and Cloudflare calls record here.
    pub metrics: Arc<Metrics>,
    /// This cluster's identity in the DNS ownership marker and TXT.
    pub cluster: ClusterId,
    /// Builds the term's Cloudflare clients; keeps what the term learned from Cloudflare.
    pub cloudflare: Cloudflare,
}

impl Context {
    pub fn new(
        client: Client,
        options: ControllerOptions,
        scope: WatchScope,
        term: Scope,
        metrics: Arc<Metrics>,
        limiters: RateLimiters,
        cluster: ClusterId,
    ) -> Context {
        let reporter = Reporter {
            controller: "cftunnel".to_string(),
            instance: std::env::var("POD_NAME").ok(),
        };
        Context {
            recorder: Recorder::new(client.clone(), reporter),
            cloudflare: Cloudflare::new(limiters, &options, term.write_gate(), metrics.clone()),
            client,
            options,
            scope,
            term,
            metrics,
            cluster,
        }
    }

    /// The DNS options of every sync of this term, the DNS task's and the deletions' alike.
    pub fn dns_options(&self) -> DnsOptions {
        DnsOptions {
            overwrite_unmanaged: self.options.overwrite_unmanaged_dns,
            cluster_id: Some(self.cluster.clone()),
            batch: self.options.dns_batch,
            batch_memory: self.cloudflare.batch_memory(),
            quota_memory: self.cloudflare.quota_memory(),
            ..DnsOptions::default()
        }
    }
}
