//! Admission decisions as plain functions of their inputs (SPEC §2): used by the webhook, the
//! offline `cftunnel validate` command and the reconciler's own checks — one implementation.
pub mod hardening;
pub mod service_url;
pub mod syntax;
pub mod tunnel;
mod verdict;

pub use verdict::{Verdict, Violation};
#[cfg(test)]
mod tunnel_tests;
