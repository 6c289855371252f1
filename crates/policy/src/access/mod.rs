//! Zero Trust Access for routes (docs/design.md §3.7), as pure functions: which hostnames the
//! AccessPolicies protect and how each stands (`guard`), the names that mark cftunnel's
//! applications and policies (`names`), and what it wants at Cloudflare (`desired`).
pub mod desired;
pub mod guard;
pub mod names;

pub use guard::{AccessGuard, Guarded, PolicyKey, Refusal, TargetKey, guard};
pub use names::{AppOwner, app_name, app_owner, policy_name};
