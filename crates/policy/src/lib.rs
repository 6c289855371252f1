//! cftunnel's rules as pure functions over the API types, from the bottom up: the field and
//! route rules with their messages (`rules`), the hardening of cloudflared workloads
//! (`hardening`), the route model (`routes`), what is rendered (`render`), the admission
//! decision per request (`admission`), the offline `validate`, the DNS planner (`dns`), Zero
//! Trust Access for routes (`access`) and a tunnel's health at the edge (`edge`).
//! Nothing here does I/O; the webhook, the reconcilers and the CLI all call these functions.
pub mod access;
pub mod admission;
pub mod cost;
pub mod dns;
pub mod edge;
pub mod edge_certificates;
pub mod hardening;
pub mod plan;
pub mod private;
pub mod published;
pub mod render;
pub mod routes;
pub mod rules;
pub mod validate;
