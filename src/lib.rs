//! cftunnel exposes Kubernetes Services to the internet through Cloudflare Tunnels.
//!
//! One binary: an admission webhook plus a lightweight reconciler. The library holds every
//! piece so that tests, the demo and the binary share one implementation.
pub mod admission;
pub mod api;
pub mod caches;
pub mod certs;
pub mod chart;
pub mod checksum_watcher;
pub mod cli;
pub mod cloudflare;
pub mod controller;
pub mod demo;
pub mod dns;
pub mod install;
pub mod kube_client;
pub mod leader;
pub mod lifecycle;
pub mod metrics;
pub mod process;
pub mod render;
pub mod routes;
pub mod routing;
pub mod run;
pub mod startup;
pub mod telemetry;
pub mod testenv;
pub mod validate;
pub mod view_cache;
pub mod webhook;
