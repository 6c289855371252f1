//! cftunnel exposes Kubernetes Services to the internet through Cloudflare Tunnels.
//!
//! The operator: one binary, an admission webhook plus a lightweight reconciler. Its rules are
//! pure functions in `cftunnel-policy`; this crate holds the process wiring, the watch caches,
//! the term context and the reconcilers, the webhook server, leader election, certificates,
//! start-up and the CLI (docs/design.md §0).
pub mod access_reconciler;
pub mod admission_view;
pub mod caches;
pub mod certs;
pub mod checksum_watcher;
pub mod cli;
pub mod dns_sync;
pub mod edge_health;
pub mod kube_client;
pub mod leader;
pub mod metrics;
pub mod network_reconciler;
pub mod route_reconciler;
pub mod scope;
pub mod startup;
pub mod status_writer;
pub mod telemetry;
pub mod term;
pub mod tunnel_reconciler;
pub mod webhook;
pub mod wiring;
pub mod world;
