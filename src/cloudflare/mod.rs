//! Cloudflare: the typed API client the reconciler uses, and the simulator that stands in for
//! Cloudflare in tests and in the demo.
pub mod client;
pub mod sim;
