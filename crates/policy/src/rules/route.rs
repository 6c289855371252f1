//! Rules for one route, whichever object declares it: a TunnelBinding subject or a labelled
//! Service (docs/design.md §2.2). Each source names its own fields, so messages point at what the user wrote.
use std::borrow::Cow;
use std::net::IpAddr;

use super::duration::parse_go_duration;
use super::go_regex;
use super::service_url::service_problem;
use super::syntax::hostname_problem;
use super::verdict::Verdict;
use super::view::{AdmissionView, TunnelFacts};

pub(crate) const PROTOCOLS: &[&str] = &["http", "https", "tcp", "udp", "ssh", "rdp", "smb"];
/// Leaves room for the `_managed.` prefix of the ownership TXT record within 253 characters.
pub(crate) const MAX_FQDN_LEN: usize = 244;

/// Where a route value was written. Formatted only when a message names it: admission is a
/// hot path and most objects are fine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    /// `subjects[i].spec.<name>` of a TunnelBinding.
    Subject(usize, &'static str),
    /// `metadata.annotations[<key>]` of a labelled Service.
    Annotation(&'static str),
    /// A hostname nobody wrote: the default `<service>.<tunnel domain>`.
    DefaultHostname,
    /// `spec.rules[i].host` of an Ingress.
    IngressHost(usize),
    /// `spec.rules[i].http.paths[j].<name>` of an Ingress.
    IngressPath(usize, usize, &'static str),
    /// `spec.defaultBackend.<name>` of an Ingress.
    IngressDefault(&'static str),
    /// `spec.hostnames[i]` of an HTTPRoute or GRPCRoute, or a listener hostname it attached with.
    RouteHostname(usize),
    /// `spec.rules[i].matches[j].<name>` of an HTTPRoute or GRPCRoute.
    RouteMatch(usize, usize, &'static str),
    /// `spec.rules[i].<name>` of an HTTPRoute or GRPCRoute.
    RouteRule(usize, &'static str),
    /// The hostname of the listener `spec.parentRefs[i]` attached to (the route names none).
    ParentHostname(usize),
}

impl std::fmt::Display for Field {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Field::Subject(i, name) => write!(f, "subjects[{i}].spec.{name}"),
            Field::Annotation(key) => write!(f, "metadata.annotations[{key}]"),
            Field::DefaultHostname => f.write_str("(default hostname)"),
            Field::IngressHost(i) => write!(f, "spec.rules[{i}].host"),
            Field::IngressPath(i, j, name) => write!(f, "spec.rules[{i}].http.paths[{j}].{name}"),
            Field::IngressDefault(name) => write!(f, "spec.defaultBackend.{name}"),
            Field::RouteHostname(i) => write!(f, "spec.hostnames[{i}]"),
            Field::RouteMatch(i, j, name) => write!(f, "spec.rules[{i}].matches[{j}].{name}"),
            Field::RouteRule(i, name) => write!(f, "spec.rules[{i}].{name}"),
            Field::ParentHostname(i) => write!(f, "spec.parentRefs[{i}] (listener hostname)"),
        }
    }
}

/// A Service port as a route names it: by number or by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PortRef<'a> {
    Number(i64),
    Name(&'a str),
}

impl<'a> PortRef<'a> {
    /// Digits are a number (a port name always holds a letter), anything else a name.
    pub fn parse(text: &'a str) -> PortRef<'a> {
        let text = text.trim();
        if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
            PortRef::Number(text.parse().unwrap_or(i64::MAX))
        } else {
            PortRef::Name(text)
        }
    }
}

impl std::fmt::Display for PortRef<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PortRef::Number(n) => write!(f, "{n}"),
            PortRef::Name(name) => write!(f, "{name:?}"),
        }
    }
}

/// One route as declared, borrowing its values from the declaring object.
#[derive(Clone, Debug, Default)]
pub(crate) struct RouteInput<'a> {
    /// Namespace of the declaring object (and of the Service).
    pub namespace: &'a str,
    pub service: &'a str,
    /// Explicit hostnames; empty means the default `<service>.<tunnel domain>`.
    pub fqdns: Vec<(Field, &'a str)>,
    pub protocol: Option<(Field, &'a str)>,
    pub path: Option<(Field, &'a str)>,
    pub target: Option<(Field, &'a str)>,
    pub ca_pool: Option<(Field, &'a str)>,
    pub proxy_address: Option<(Field, &'a str)>,
    pub proxy_port: Option<(Field, i64)>,
    pub proxy_type: Option<(Field, &'a str)>,
    pub durations: Vec<(Field, &'a str)>,
    /// Service port by name or number; `None` means the Service's first port.
    pub port: Option<(Field, PortRef<'a>)>,
    /// Only `true` counts: a route never turns off what the tunnel turned on (docs/design.md §3.4).
    pub no_tls_verify: bool,
    pub http2_origin: bool,
    pub http_host_header: Option<(Field, &'a str)>,
    pub origin_server_name: Option<(Field, &'a str)>,
    /// No DNS is written for this route (`tunnelRef.disableDNSUpdates`,
    /// `cfargotunnel.com/disable-dns`): its hostnames may lie outside the tunnel's domain.
    pub dns_updates_disabled: bool,
}

impl<'a> RouteInput<'a> {
    /// The hostnames this route claims: explicit ones, or the default when the tunnel is known.
    pub(crate) fn effective_fqdns(
        &self,
        tunnel: Option<&TunnelFacts>,
    ) -> Vec<(Field, Cow<'a, str>)> {
        if !self.fqdns.is_empty() {
            return self
                .fqdns
                .iter()
                .map(|(f, h)| (*f, Cow::Borrowed(*h)))
                .collect();
        }
        tunnel
            .map(|t| {
                vec![(
                    Field::DefaultHostname,
                    Cow::Owned(format!("{}.{}", self.service, t.domain)),
                )]
            })
            .unwrap_or_default()
    }

    pub(crate) fn path_value(&self) -> &'a str {
        self.path.map(|(_, p)| p).unwrap_or("")
    }
}

/// Field-level rules (docs/design.md §2.2 items 2 and 3). `zone_advice`: warn about hostnames
/// in no zone known here (admission does; the route model leaves that to the DNS placement,
/// which knows the account's zones).
pub(crate) fn check_fields(
    route: &RouteInput<'_>,
    tunnel: Option<&TunnelFacts>,
    zone_advice: bool,
    v: &mut Verdict,
) {
    for (field, fqdn) in &route.fqdns {
        check_fqdn(
            *field,
            fqdn,
            tunnel,
            route.dns_updates_disabled,
            zone_advice,
            v,
        );
    }
    if let Some((field, protocol)) = &route.protocol {
        if let Some(problem) = protocol_problem(protocol) {
            v.deny(field, problem);
        } else if *protocol == "udp" {
            v.warn(field, "udp is carried as a TCP stream over a public hostname; clients need cloudflared access or WARP");
        }
    }
    if let Some((field, path)) = &route.path
        // The rules of Go's regexp, which cloudflared compiles paths with (no automaton built).
        && let Err(e) = go_regex::check(path)
    {
        v.deny(
            field,
            format!(
                "{:?} is not a valid regular expression ({e}); fix or escape it",
                short(path)
            ),
        );
    }
    if let Some((field, target)) = &route.target {
        if let Some(problem) = service_problem(target) {
            v.deny(
                field,
                format!("{problem}; or leave target unset to route to the Service"),
            );
        } else if let Some(host) = url::Url::parse(target)
            .ok()
            .and_then(|u| u.host_str().map(str::to_string))
            && let Some(ns) = svc_namespace(&host)
            && ns != route.namespace
        {
            v.warn(
                field,
                format!("{target:?} points into namespace {ns:?}, outside this object's namespace"),
            );
        }
    }
    if let Some((field, port)) = &route.port
        && let Some(problem) = port_problem(*port)
    {
        v.deny(field, problem);
    }
    if let Some((field, key)) = &route.ca_pool
        && !is_secret_key(key)
    {
        v.deny(
            field,
            format!("{key:?} is not a key of a Secret; use a key of the tunnel's originCaPool Secret such as ca.crt"),
        );
    } else if let Some((field, key)) = &route.ca_pool
        && tunnel.is_some_and(|t| !t.has_origin_ca_pool)
    {
        v.warn(
            field,
            format!("caPool {key:?} has no effect: the tunnel sets no originCaPool Secret"),
        );
    }
    if let Some((field, address)) = &route.proxy_address
        && address.parse::<IpAddr>().is_err()
    {
        v.deny(
            field,
            format!("{address:?} is not an IP address; use e.g. 127.0.0.1"),
        );
    }
    if let Some((field, port)) = &route.proxy_port
        && !(0..=65535).contains(port)
    {
        v.deny(
            field,
            format!("{port} is out of range; use 0 to 65535 (0 picks a free port)"),
        );
    }
    if let Some((field, kind)) = &route.proxy_type
        && !matches!(*kind, "" | "socks")
    {
        v.deny(
            field,
            format!("{kind:?} is not supported; use \"\" or socks"),
        );
    }
    for (field, duration) in &route.durations {
        if parse_go_duration(duration).is_none() {
            v.deny(
                field,
                format!("{duration:?} is not a duration; use e.g. 30s, 1m30s or 500ms"),
            );
        }
    }
}

/// Why a route's `protocol` is refused, if it is (the names are case-sensitive).
pub(crate) fn protocol_problem(protocol: &str) -> Option<String> {
    (!PROTOCOLS.contains(&protocol)).then(|| {
        format!("{protocol:?} is not supported; use http, https, tcp, udp, ssh, rdp or smb")
    })
}

/// Why a port reference cannot name a Service port, if it cannot.
fn port_problem(port: PortRef<'_>) -> Option<String> {
    match port {
        PortRef::Number(n) if !(1..=65535).contains(&n) => Some(format!(
            "{n} is not a port number; use 1 to 65535, or a port name such as http"
        )),
        PortRef::Name(name) if !is_port_name(name) => Some(format!(
            "{name:?} is not a port name; use the name of a port of the Service (lowercase letters, digits and '-', at most 15) or its number"
        )),
        _ => None,
    }
}

/// An IANA service name, as Kubernetes requires of port names.
fn is_port_name(name: &str) -> bool {
    (1..=15).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && name.bytes().any(|b| b.is_ascii_lowercase())
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--")
}

/// A Secret data key that is a plain file name under the mounted `originCaPool` volume.
fn is_secret_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= 253
        && !key.starts_with('.')
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// A hostname's own rules: syntax and length (refused), and, for admission (`tunnel` given,
/// `advise`), a warning when it is in no zone known here: neither the tunnel's domain nor the
/// domain of another tunnel of the same account. Such a hostname is admitted: the webhook never
/// asks Cloudflare, and the account may hold its zone; the route reconciler places it in the
/// account's zone that is its longest suffix, or reports on the route that no zone holds it,
/// naming the account's zones. `disableDNSUpdates` routes (no DNS written) are never warned.
pub(crate) fn check_fqdn(
    field: impl std::fmt::Display,
    fqdn: &str,
    tunnel: Option<&TunnelFacts>,
    dns_updates_disabled: bool,
    advise: bool,
    v: &mut Verdict,
) {
    if let Some(problem) = hostname_problem(fqdn) {
        v.deny(
            field,
            format!("{fqdn:?} {problem}; give a hostname such as app.example.com or *.example.com"),
        );
        return;
    }
    if fqdn.len() > MAX_FQDN_LEN {
        v.deny(field, format!("{fqdn:?} is longer than {MAX_FQDN_LEN} characters (the _managed. TXT record must fit); use a shorter hostname"));
        return;
    }
    if !advise {
        return;
    }
    match tunnel {
        Some(t) if !dns_updates_disabled && !in_known_zone(fqdn, t) => {
            let known = std::iter::once(t.domain.as_str())
                .chain(t.account_zones.iter().map(String::as_str))
                .collect::<Vec<_>>()
                .join(", ");
            v.warn(
                field,
                format!("{fqdn:?} is outside the domain {:?} of {} and in no other zone known for its account ({known}); it gets a DNS record only if a zone of the tunnel's Cloudflare account holds it (otherwise its route reports DNSZoneNotFound)", t.domain, t.identity),
            )
        }
        Some(t) => {
            if let Some(advice) = deep_hostname_advice(fqdn, t) {
                v.warn(field, advice);
            }
        }
        None => v.warn(field, format!("{fqdn:?} cannot be checked against the tunnel's domain: the tunnel is not known yet")),
    }
}

/// A hostname more than one label below its zone (`a.b.example.com` in `example.com`): the
/// zone's Universal SSL certificate covers the apex and one level of subdomain only (Cloudflare
/// documents it; its Total TLS does not issue certificates for tunnel hostnames either), so the
/// edge answers it with a TLS error unless an advanced or uploaded certificate covers it. What
/// to do, naming the certificate to order; `None` for a first-level name or one in no zone
/// known here (that has its own warning).
pub(crate) fn deep_hostname_advice(fqdn: &str, tunnel: &TunnelFacts) -> Option<String> {
    let zone = std::iter::once(tunnel.domain.as_str())
        .chain(tunnel.account_zones.iter().map(String::as_str))
        .filter(|z| !z.is_empty() && in_domain(fqdn, z))
        .max_by_key(|z| z.len())?;
    let below = fqdn.len().checked_sub(zone.len() + 1)?;
    let labels: Vec<&str> = fqdn.get(..below)?.split('.').collect();
    if labels.len() < 2 {
        return None;
    }
    let parent = fqdn.split_once('.').map_or(fqdn, |(_, rest)| rest);
    let first_level = if labels.contains(&"*") {
        format!("*.{zone}")
    } else {
        format!("{}.{zone}", labels.join("-"))
    };
    Some(format!(
        "{fqdn:?} is {} labels below the zone {zone}, whose Universal SSL certificate covers {zone} and *.{zone} only: Cloudflare's edge answers it with a TLS error until a certificate covers it; order an advanced certificate for *.{parent} (or upload one), or use a first-level name such as {first_level}",
        labels.len()
    ))
}

/// In the tunnel's domain or the domain of another tunnel of its account.
pub(crate) fn in_known_zone(fqdn: &str, tunnel: &TunnelFacts) -> bool {
    in_domain(fqdn, &tunnel.domain) || tunnel.account_zones.iter().any(|z| in_domain(fqdn, z))
}

/// Item 5: one fqdn+path routes to one Service, one fqdn to one tunnel.
pub(crate) fn check_ownership(
    route: &RouteInput<'_>,
    tunnel: &TunnelFacts,
    object: &str,
    view: &AdmissionView,
    v: &mut Verdict,
) {
    for (field, fqdn) in route.effective_fqdns(Some(tunnel)) {
        let field = match field {
            Field::DefaultHostname => format!("{object} (default hostname)"),
            named => named.to_string(),
        };
        check_claim(
            &field,
            &fqdn,
            route.path_value(),
            &tunnel.identity,
            object,
            view,
            v,
        );
    }
}

/// Item 5 for one hostname and path (`""`: every path) a new route of `object` would take
/// through `tunnel`: refused when another object routes the hostname through another tunnel,
/// or exposes the same hostname and path.
pub(crate) fn check_claim(
    field: &str,
    fqdn: &str,
    path: &str,
    tunnel: &cftunnel_types::TunnelIdentity,
    object: &str,
    view: &AdmissionView,
    v: &mut Verdict,
) {
    for claim in view.claims_on(fqdn, object) {
        if claim.tunnel != *tunnel {
            v.deny(
                field,
                format!("{fqdn} is already routed through {} by {}; one hostname can use one tunnel, remove it there first", claim.tunnel, claim.owner),
            );
            return;
        }
        if claim.path == path {
            v.deny(
                field,
                format!(
                    "{fqdn} is already exposed by {}; remove it there first",
                    claim.owner
                ),
            );
            return;
        }
    }
}

/// The refusal when a tunnel's `allowedRoutes` does not admit a route's namespace.
pub(crate) fn deny_not_admitted(
    field: impl std::fmt::Display,
    tunnel: &TunnelFacts,
    namespace: &str,
    v: &mut Verdict,
) {
    v.deny(
        field,
        format!("{} does not admit routes from namespace {namespace:?} (allowedRoutes.namespaces); ask its owner to allow it, or use a tunnel of this namespace", tunnel.identity),
    );
}

/// `*.example.com` and `a.example.com` are inside `example.com`; `example.com` itself is too.
pub fn in_domain(fqdn: &str, domain: &str) -> bool {
    let (f, d) = (fqdn.as_bytes(), domain.as_bytes());
    let Some(split) = f.len().checked_sub(d.len()) else {
        return false;
    };
    f[split..].eq_ignore_ascii_case(d) && (split == 0 || f[split - 1] == b'.')
}

/// `svc.ns.svc` or `svc.ns.svc.cluster.local` → `ns`.
fn svc_namespace(host: &str) -> Option<&str> {
    let labels: Vec<&str> = host.split('.').collect();
    match labels.as_slice() {
        [_, ns, "svc"] | [_, ns, "svc", "cluster", "local"] => Some(ns),
        _ => None,
    }
}

/// A value quoted in a message, cut at 64 characters so an answer never carries a large payload.
fn short(s: &str) -> Cow<'_, str> {
    match s.char_indices().nth(64) {
        Some((cut, _)) => Cow::Owned(format!("{}…", &s[..cut])),
        None => Cow::Borrowed(s),
    }
}
