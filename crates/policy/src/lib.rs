//! cftunnel's rules as pure functions over the API types: admission (validation and
//! hardening), the route model, what is rendered, the offline `validate`, and the DNS planner.
//! Nothing here does I/O; the webhook, the reconcilers and the CLI all call these functions.
pub mod admission;
pub mod dns;
pub mod render;
pub mod routes;
pub mod validate;
