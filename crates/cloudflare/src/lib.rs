//! Typed Cloudflare API v4 client: envelope, typed errors, per-credential rate limiting, retries.
//! It knows nothing of the operator: metrics reach it through a [`CallObserver`], leadership
//! through a [`WriteGate`].
//!
//! Every operation goes through one request path ([`CloudflareClient`]): the credential's pacer
//! (shared through [`RateLimiters`]; calls served by [`Priority`], then in arrival order, no faster
//! than the server's `Ratelimit` headers allow), a per-attempt timeout, bounded jittered retries on
//! 5xx, 429, timeouts and connection errors, and envelope checks (`success` and HTTP status).
mod access;
mod access_models;
mod batch;
mod budget;
mod builder;
mod certificates;
mod credentials;
mod dns;
mod engine;
mod error;
mod hostname_routes;
mod models;
mod networks;
mod networks_errors;
mod networks_models;
mod observer;
mod pacer;
mod quota;
mod ratelimit;
mod ratelimit_headers;
mod records;
mod retry;
mod tls;
mod token;
mod transport;
mod tunnels;
mod turn;
mod write_gate;
mod zones;

#[cfg(test)]
mod tests;

pub use access::ACCESS_PER_PAGE;
pub use access_models::{
    AccessApp, AccessAppPolicy, AccessDecision, AccessOrganization, AccessPolicy, AccessPolicyLink,
    AccessRule, NewAccessApp, NewAccessPolicy,
};
pub use batch::{
    BatchDelete, BatchUpdate, DnsBatch, DnsBatchResult, FREE_PLAN_BATCH_LIMIT,
    PAID_PLAN_BATCH_LIMIT, ZonePlanLimit,
};
pub use budget::{Budget, Pace, RateLimit};
pub use builder::{
    CloudflareClientBuilder, DEFAULT_BASE_URL, DEFAULT_TIMEOUT, IN_PROCESS_BASE_URL,
};
pub use certificates::{CERTIFICATE_PACKS_PER_PAGE, CertificatePack};
pub use credentials::Credentials;
pub use dns::MAX_DNS_PER_PAGE;
pub use engine::CloudflareClient;
pub use error::{
    ApiErrorItem, CODE_ACCESS_INVALID_REQUEST, CODE_ACCESS_NOT_ENABLED, CODE_ACCESS_NOT_FOUND,
    CODE_ACTIVE_CONNECTIONS, CODE_INVALID_TOKEN, CODE_RECORD_QUOTA_EXCEEDED,
    CODE_TUNNEL_NAME_EXISTS, CODES_RECORD_EXISTS, CloudflareError, TransportError,
};
pub use hostname_routes::HostnameRouteFilter;
pub use models::{
    Account, ConfigSrc, ConnectionClient, Envelope, Page, ResultInfo, SecretString, TokenStatus,
    TokenVerification, Tunnel, TunnelConnection, TunnelCredentialsFile, TunnelStatus, Zone,
    ZoneAccount, ZonePlan,
};
pub use networks::{IpRouteFilter, MAX_ROUTES_PER_PAGE, VirtualNetworkFilter};
pub use networks_errors::{
    CODE_HOSTNAME_ROUTE_EXISTS, CODE_ROUTE_EXISTS, CODE_ROUTE_LIMIT, CODE_ROUTE_NOT_FOUND,
    CODE_TUNNEL_HAS_ROUTES, CODE_VIRTUAL_NETWORK_IN_USE, CODE_VIRTUAL_NETWORK_NAME_EXISTS,
};
pub use networks_models::{
    HostnameRoute, HostnameRouteUpdate, IpRoute, IpRouteUpdate, NewHostnameRoute, NewIpRoute,
    NewVirtualNetwork, PRIVATE_HOSTNAME_MAX_CHARS, ROUTE_COMMENT_MAX_CHARS,
    VIRTUAL_NETWORK_TEXT_MAX_CHARS, VirtualNetwork, VirtualNetworkUpdate,
    normalize_private_hostname,
};
pub use observer::{AttemptStatus, CallObserver, CallOutcome, NoObserver};
pub use pacer::{Limiter, Priority, Work};
pub use quota::{FREE_PLAN_RECORD_QUOTA, PAID_PLAN_RECORD_QUOTA, ZoneRecordQuota};
pub use ratelimit::RateLimiters;
pub use records::{
    CommentFilter, DnsRecord, DnsRecordFilter, DnsRecordType, NewDnsRecord, TTL_AUTO,
};
pub use retry::{DEFAULT_RETRY_AFTER, MAX_RETRY_AFTER, RetryPolicy};
pub use token::TunnelToken;
pub use transport::{MAX_BODY_BYTES, Transport};
pub use tunnels::{
    MAX_TUNNELS_PER_PAGE, MIN_TUNNEL_SECRET_BYTES, TunnelConfiguration, TunnelFilter,
};
pub use write_gate::WriteGate;
pub use zones::{MAX_ZONES_PER_PAGE, ZoneFilter};

/// The User-Agent of every request cftunnel makes, to Cloudflare and to the API server.
pub const USER_AGENT: &str = concat!("cftunnel/", env!("CARGO_PKG_VERSION"));

/// Installs ring as the process-wide rustls crypto provider; idempotent.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
