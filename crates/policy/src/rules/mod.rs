//! The rules of docs/design.md §2 that routes and tunnels share, each a plain function with its
//! message beside it: field syntax, route fields, TunnelBindings and labelled Services, AccessPolicies, and the
//! read-only view they consult. The webhook, `cftunnel validate` and the route model call the
//! same functions.
pub mod access_policy;
pub mod binding;
pub mod duration;
pub mod facts;
pub mod go_regex;
mod go_regex_names;
pub mod route;
pub mod service;
pub(crate) mod service_url;
pub mod syntax;
mod verdict;
pub mod view;
pub mod zone_quota;

pub use verdict::{Verdict, Violation};
pub use view::{AdmissionView, HostnameClaim, RouteNamespacePolicy, TunnelFacts};
#[cfg(test)]
mod access_policy_tests;
#[cfg(test)]
mod binding_tests;
