//! Gateway API: the conformance suite's cases offline (rendered, matched by the real
//! cloudflared) and on a real API server with the v1.6.3 standard CRDs installed while cftunnel
//! runs.
#[path = "gateway_api/cases.rs"]
mod cases;
#[path = "gateway_api/offline.rs"]
mod offline;
