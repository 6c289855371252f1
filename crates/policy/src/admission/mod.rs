//! Admission decisions as plain functions of their inputs (docs/design.md §2): used by the webhook, the
//! offline `cftunnel validate` command and the reconciler's own checks — one implementation.
pub mod access;
pub mod binding;
pub mod duration;
pub mod facts;
pub mod go_regex;
mod go_regex_names;
pub mod hardening;
pub mod mutate;
pub mod review;
pub mod route;
pub mod service;
pub mod service_url;
pub mod syntax;
pub mod tunnel;
mod verdict;
pub mod view;

pub use verdict::{Verdict, Violation};
pub use view::{AdmissionView, HostnameClaim, RouteNamespacePolicy, TunnelFacts};
#[cfg(test)]
mod binding_tests;
#[cfg(test)]
mod tunnel_tests;
