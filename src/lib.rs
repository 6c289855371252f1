//! cftunnel exposes Kubernetes Services to the internet through Cloudflare Tunnels.
//!
//! The operator: one binary, an admission webhook plus a lightweight reconciler. Its rules are
//! pure functions in `cftunnel-policy`; this crate holds the caches, the reconcilers, the
//! webhook server, leader election, certificates, start-up and the CLI.
pub mod caches;
pub mod certs;
pub mod checksum_watcher;
pub mod cli;
pub mod controller;
pub mod dns_sync;
pub mod kube_client;
pub mod leader;
pub mod lifecycle;
pub mod metrics;
pub mod process;
pub mod routing;
pub mod run;
pub mod startup;
pub mod telemetry;
pub mod view_cache;
pub mod webhook;
