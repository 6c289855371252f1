//! Gateway API: the conformance suite's cases offline (rendered, matched by the real
//! cloudflared) and on a real API server with the v1.6.3 standard CRDs installed while cftunnel
//! runs.
#[path = "gateway_api/access.rs"]
mod access;
#[path = "gateway_api/cases.rs"]
mod cases;
mod common;
#[path = "tunnel_reconciler/harness.rs"]
mod harness;
mod install_support;
#[path = "gateway_api/l4.rs"]
mod l4;
#[path = "gateway_api/live.rs"]
mod live;
#[path = "gateway_api/offline.rs"]
mod offline;
#[path = "gateway_api/parents.rs"]
mod parents;
