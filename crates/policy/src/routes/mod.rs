//! The route model of docs/design.md §3.2, as pure code: from a snapshot of the world (tunnels,
//! TunnelBindings, Services) to the ingress routes and DNS names of every tunnel and the status
//! of every object that declares routes. No I/O: the reconciler feeds it from watch caches,
//! `cftunnel render` from files.
//!
//! Choices, in the order a route meets them:
//! - Routes are indexed per tunnel **identity**: a Tunnel `shop/edge`, a Tunnel `blog/edge` and
//!   a ClusterTunnel `edge` are three tunnels that never share a route.
//! - What a source declares is read by the functions admission uses
//!   (`rules::binding::subject_route`, `rules::service::annotation_route`) and checked
//!   by the same rules (`rules::route::check_fields`): a route admission would refuse is
//!   refused here with the same message (`InvalidRoute`), so nothing cloudflared would reject
//!   reaches a config. The default hostname `<service>.<tunnel domain>` is checked the same way.
//! - **Stored bindings keep the Go operator's routing** (ratcheting): a `protocol` that is not one
//!   of the lowercase names is ignored and the protocol inferred from the Service port, and a
//!   subject `kind` of `service` in another case routes the Service, as the Go operator did;
//!   such a route is served with reason `LegacyRoute` (Ready stays True) and a message naming
//!   the field, today's refusal and what is served. Admission still refuses new applies.
//! - A source whose tunnel does not exist (`TunnelNotFound`) or does not admit its namespace
//!   (`NamespaceNotAllowed`), or whose route is invalid, serves nothing and claims no hostname:
//!   only routes that could be served compete for hostnames.
//! - **Hostname authority**: one tunnel per fqdn and one owner per fqdn+path across every
//!   binding and labelled Service; the oldest source by (creationTimestamp, namespace, name,
//!   uid) wins, then subject order within a binding. Losers get `HostnameConflict`, no rule and
//!   no DNS name. Hostnames compare in lowercase, paths as written.
//! - Port: `port` / `cfargotunnel.com/port` by name or number, else the first port. Protocol:
//!   explicit, else `appProtocol` (http, https, kubernetes.io/h2c → http), else the port name
//!   (exactly http, https, ssh, rdp, smb), else the number (22, 139/445, 443, 3389), else http.
//!   `udp` is carried as a `tcp://` stream; a UDP Service port is served with `UdpPort`
//!   (Ready stays True, the message warns).
//! - An explicit `target` replaces the generated `<proto>://<svc>.<ns>.svc:<port>` and the
//!   Service is not consulted. Otherwise a missing Service (`ServiceNotFound`) or port
//!   (`PortNotFound`) is served as `http_status:404` and keeps its hostname and DNS name, so a
//!   Service re-created a moment later costs no DNS write.
//! - Route-level `originRequest` carries only what the source turned on: `noTlsVerify: false`
//!   never overrides the tunnel's `true`, defaults (`proxyAddress` 127.0.0.1, `proxyPort` 0)
//!   are left out, and a `caPool` on a tunnel without `originCaPool` is dropped (admission warns).
//! - A DNS name is wanted unless every source serving that fqdn disables DNS updates.
//! - A Service with both expose labels is not a source (admission refuses it).
mod backend;
mod claims;
pub mod gateway;
mod index;
pub mod ingress;
mod model;
mod path;
#[cfg(test)]
pub(crate) mod record;
mod route;
mod serve;
mod source;
mod table;
mod world;

#[cfg(test)]
mod authority_tests;
#[cfg(test)]
pub(crate) mod fixtures;
#[cfg(test)]
pub(crate) mod ingress_tests;
#[cfg(test)]
mod legacy_tests;
#[cfg(test)]
mod source_tests;
#[cfg(test)]
mod target_tests;

pub use claims::model_claims;
pub use index::changed_tunnels;
pub use model::compute_routes;
pub use route::{
    ANY_HOST, AccessCheck, OriginRequest, OriginSettings, PathKind, Precedence, Route,
};
pub use serve::{Serving, serving_route, serving_route_for_url};
pub use table::{DnsName, RouteEntry, RouteReason, RouteTable, SourceStatus, TunnelRoutes};
pub use world::{Age, RouteWorld, SourceKind, SourceRef};
