//! The computation: sources in age order, each route checked, claimed and resolved.
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::backend::{BackendFields, backend};
use super::gateway::{read_grpc, read_http, sources_of_read};
use super::ingress::from_ingress;
use super::source::{Declared, ServiceIndex, Source, from_binding, from_service};
use super::table::{DnsName, RouteEntry, RouteReason, RouteTable, SourceStatus, TunnelRoutes};
use super::world::{Age, AgeKey, RouteWorld, SourceKind};
use crate::routes::{ANY_HOST, OriginRequest, OriginSettings, Route};
use crate::rules::route::{Field, RouteInput, check_fields, check_fqdn, deny_not_admitted};
use crate::rules::service::exposure;
use crate::rules::view::admits_namespace;
use crate::rules::{TunnelFacts, Verdict};
use cftunnel_types::ServicePorts;
use cftunnel_types::gateway::{GRPCRoute, HTTPRoute};
use cftunnel_types::{TunnelBinding, TunnelIdentity};
use k8s_openapi::api::networking::v1::Ingress;

/// cloudflared's own default `proxyAddress`: not worth a per-rule override.
const DEFAULT_PROXY_ADDRESS: &str = "127.0.0.1";

/// The routes of every tunnel and the status of every source in `world`. Pure and
/// deterministic: the same world gives the same table whatever the order of its lists.
pub fn compute_routes(world: &RouteWorld) -> RouteTable {
    let mut table = RouteTable::default();
    let mut tunnels: BTreeMap<TunnelIdentity, TunnelRoutes> = BTreeMap::new();
    for tunnel in &world.tunnels {
        tunnels.entry(tunnel.identity.clone()).or_default();
    }
    let mut dns: BTreeMap<TunnelIdentity, BTreeMap<String, bool>> = BTreeMap::new();
    let mut since: BTreeMap<TunnelIdentity, BTreeMap<String, Age>> = BTreeMap::new();
    walk(world, |source, facts, routed| {
        if let (Some(id), Some(tunnel)) = (&source.tunnel, facts) {
            let routes = tunnels.entry(id.clone()).or_default();
            let names = dns.entry(id.clone()).or_default();
            for (declared, entry) in routed.declared_entries(source) {
                if entry.reason.is_served() {
                    routes.routes.push(Route {
                        hostname: entry.hostname.clone(),
                        path: entry.path.clone(),
                        path_kind: declared.path_kind,
                        service: entry.service.clone(),
                        origin_request: origin_request(&declared.input, tunnel),
                    });
                    if entry.hostname != ANY_HOST {
                        let disabled = names.entry(entry.hostname.clone()).or_insert(true);
                        *disabled &= source.disable_dns;
                        // Sources come oldest first: the first one serving it is the oldest.
                        since
                            .entry(id.clone())
                            .or_default()
                            .entry(entry.hostname.clone())
                            .or_insert_with(|| source.age.clone());
                    }
                }
                routes.entries.push(entry.clone());
            }
        }
        // A route attached to Gateways on two tunnels is two sources of one object: one status.
        match table.sources.entry(source.reference.clone()) {
            std::collections::btree_map::Entry::Vacant(slot) => {
                slot.insert(routed.status);
            }
            std::collections::btree_map::Entry::Occupied(mut slot) => {
                let status = slot.get_mut();
                status.routes.extend(routed.status.routes);
                status.reason = status.reason.max(routed.status.reason);
                if !routed.status.message.is_empty() {
                    status.message = format!("{}; {}", status.message, routed.status.message);
                }
            }
        }
    });
    for (id, routes) in &mut tunnels {
        routes
            .routes
            .sort_by(|a, b| (&a.hostname, &a.path).cmp(&(&b.hostname, &b.path)));
        routes.entries.sort_by(|a, b| {
            (&a.hostname, &a.path, &a.source).cmp(&(&b.hostname, &b.path, &b.source))
        });
        // Grown one push at a time, then held for as long as this table is: up to half of a
        // Vec would be spare room (a `Route` is hundreds of bytes), for every tunnel.
        routes.routes.shrink_to_fit();
        routes.entries.shrink_to_fit();
        routes.dns = dns
            .remove(id)
            .unwrap_or_default()
            .into_iter()
            .map(|(fqdn, dns_updates_disabled)| DnsName {
                fqdn,
                dns_updates_disabled,
            })
            .collect();
        routes.dns_since = since.remove(id).unwrap_or_default();
    }
    table.tunnels = tunnels
        .into_iter()
        .map(|(id, routes)| (id, Arc::new(routes)))
        .collect();
    #[cfg(test)]
    super::record::record_route_table(world, &table);
    table
}

/// Routes every source of `world`, oldest first, and hands each to `each` with its tunnel's
/// facts (`None`: no such tunnel) and what became of it. Holds no more than one object's
/// sources at a time and keeps nothing of them: what to keep is `each`'s choice (the route
/// table keeps everything; admission only the hostnames claimed).
pub(super) fn walk<'w>(
    world: &'w RouteWorld,
    mut each: impl FnMut(&Source<'_>, Option<&'w TunnelFacts>, Routed),
) {
    let services: ServiceIndex<'_> = world
        .services
        .iter()
        .filter_map(|s| {
            let meta = &s.metadata;
            Some((
                (meta.namespace.as_deref()?, meta.name.as_deref()?),
                s.as_ref(),
            ))
        })
        .collect();
    // Objects oldest first; each one's sources are read when its turn comes and dropped after
    // it: the routes a source declares are several times what the table keeps of them.
    let mut pending: Vec<(AgeKey<'_>, Pending<'_>)> = world
        .bindings
        .iter()
        .map(|b| Pending::Binding(b))
        .chain(
            world
                .services
                .iter()
                .filter(|s| {
                    s.metadata
                        .labels
                        .as_ref()
                        .is_some_and(|l| exposure(l).is_some())
                })
                .map(|s| Pending::Service(s)),
        )
        .chain(world.ingresses.iter().map(|i| Pending::Ingress(i)))
        .chain(world.http_routes.iter().map(|r| Pending::Http(r)))
        .chain(world.grpc_routes.iter().map(|r| Pending::Grpc(r)))
        .map(|object| (object.age_key(), object))
        .collect();
    pending.sort_by(|a, b| a.0.cmp(&b.0));
    // The first of a repeated identity, as a walk of `world.tunnels` would find it.
    let mut facts_of: BTreeMap<&TunnelIdentity, &TunnelFacts> = BTreeMap::new();
    for tunnel in &world.tunnels {
        facts_of.entry(&tunnel.identity).or_insert(tunnel);
    }
    let mut authority = Authority::default();
    for (object, source) in pending
        .iter()
        .enumerate()
        .flat_map(|(object, (_, pending))| {
            pending
                .sources(world, &services)
                .into_iter()
                .map(move |source| (object, source))
        })
    {
        let facts = source
            .tunnel
            .as_ref()
            .and_then(|id| facts_of.get(id).copied());
        let routed = route_source(&source, facts, world, &mut authority, object);
        each(&source, facts, routed);
    }
}

/// A source's status plus, per entry, the index of the route that declared it.
pub(super) struct Routed {
    pub(super) status: SourceStatus,
    declared_of: Vec<usize>,
}

impl Routed {
    fn declared_entries<'s, 'w>(
        &'s self,
        source: &'s Source<'w>,
    ) -> impl Iterator<Item = (&'s Declared<'w>, &'s Arc<RouteEntry>)> + 's {
        self.declared_of
            .iter()
            .zip(&self.status.routes)
            .filter_map(|(i, entry)| Some((source.routes.get(*i)?, entry)))
    }
}

/// Problems and warnings of one source, gathered in order, each once.
#[derive(Default)]
struct Report {
    reason: Option<RouteReason>,
    messages: Vec<String>,
    warnings: Vec<String>,
}

impl Report {
    fn add(&mut self, reason: RouteReason, message: &str) {
        self.reason = self.reason.max(Some(reason));
        if !message.is_empty() && !self.messages.iter().any(|m| m == message) {
            self.messages.push(message.to_string());
        }
    }

    fn add_violations(&mut self, verdict: &Verdict) {
        for violation in &verdict.violations {
            self.add(RouteReason::InvalidRoute, violation.message());
        }
    }
}

/// `object`: which object of the computation `source` is (an HTTPRoute on two tunnels is two
/// sources of one object).
fn route_source<'w>(
    source: &Source<'_>,
    facts: Option<&'w TunnelFacts>,
    world: &RouteWorld,
    authority: &mut Authority<'w>,
    object: usize,
) -> Routed {
    let mut report = Report::default();
    report.add_violations(&source.problems);
    let namespace = source
        .tunnel_user_namespace
        .as_deref()
        .unwrap_or(&source.reference.namespace);
    // A source its tunnel does not take: nothing it declares is served or claims a hostname.
    let gate = match (&source.tunnel, facts) {
        (None, _) => Some((RouteReason::InvalidRoute, String::new())),
        (Some(id), None) => Some((
            RouteReason::TunnelNotFound,
            format!(
                "{}: {id} does not exist; create it, or name an existing Tunnel or ClusterTunnel",
                source.tunnel_field
            ),
        )),
        (Some(_), Some(t))
            if !admits_namespace(
                &world.namespace_labels,
                &t.allowed,
                &t.identity.namespace,
                namespace,
            ) =>
        {
            let mut v = Verdict::default();
            deny_not_admitted(&source.tunnel_field, t, namespace, &mut v);
            let message = v.denial_message().unwrap_or_default();
            Some((RouteReason::NamespaceNotAllowed, message))
        }
        _ => None,
    };
    if let Some((reason, message)) = &gate {
        report.add(*reason, message);
    }
    let mut routes = Vec::new();
    let mut declared_of = Vec::new();
    for (index, declared) in source.routes.iter().enumerate() {
        let mut verdict = declared.problems.clone();
        check_fields(&declared.input, facts, false, &mut verdict);
        let fqdns = hostnames(declared, facts, &mut verdict);
        if facts.is_some() {
            report.warnings.extend(verdict.warnings.iter().cloned());
        }
        report.add_violations(&verdict);
        let invalid = verdict.denial_message();
        if gate.is_none() && invalid.is_none() {
            for note in &declared.legacy {
                report.add(RouteReason::LegacyRoute, note);
            }
        }
        let target = backend(
            &declared.input,
            declared.service,
            &BackendFields {
                service: declared.service_field.clone(),
                port: declared.port_field.clone(),
            },
        );
        let path = declared.path.clone();
        for (fqdn, field) in fqdns {
            // Without a gate the tunnel exists: `facts` is the one `source.tunnel` names.
            let (reason, message) = match (&gate, &invalid, facts) {
                (Some((reason, message)), _, _) => (*reason, message.clone()),
                (None, Some(message), _) => (RouteReason::InvalidRoute, message.clone()),
                (None, None, Some(tunnel)) => {
                    let claim = Claim {
                        fqdn: &fqdn,
                        path: path.as_deref(),
                        tunnel: &tunnel.identity,
                        object,
                        owner: &declared.owner,
                    };
                    match authority.claim(&claim, &field) {
                        Ok(())
                            if target.reason == RouteReason::Routed
                                && !declared.legacy.is_empty() =>
                        {
                            (RouteReason::LegacyRoute, declared.legacy.join("; "))
                        }
                        Ok(()) => (target.reason, target.message.clone()),
                        Err(message) => (RouteReason::HostnameConflict, message),
                    }
                }
                (None, None, None) => (RouteReason::InvalidRoute, String::new()),
            };
            // A legacy route's notes are in the report already, one by one.
            let reported = if reason == RouteReason::LegacyRoute {
                ""
            } else {
                &message
            };
            report.add(reason, reported);
            declared_of.push(index);
            routes.push(Arc::new(RouteEntry {
                hostname: fqdn,
                path: path.clone(),
                service: target.service.clone(),
                source: source.reference.clone(),
                reason,
                message,
            }));
        }
    }
    let status = finish(report, source, routes);
    Routed {
        status,
        declared_of,
    }
}

fn finish(report: Report, source: &Source<'_>, routes: Vec<Arc<RouteEntry>>) -> SourceStatus {
    let reason = report.reason.unwrap_or(RouteReason::Routed);
    let mut parts = report.messages;
    // Every route served as declared, or the Go operator's way: say where they go first.
    if parts.is_empty() || reason == RouteReason::LegacyRoute {
        let mut served: Vec<&str> = Vec::new();
        for entry in &routes {
            if !served.contains(&entry.hostname.as_str()) {
                served.push(&entry.hostname);
            }
        }
        if let Some(tunnel) = &source.tunnel {
            parts.insert(0, format!("routes {} through {tunnel}", served.join(", ")));
        }
    }
    for warning in report.warnings {
        if !parts.contains(&warning) {
            parts.push(warning);
        }
    }
    SourceStatus {
        tunnel: source.tunnel.clone(),
        routes,
        reason,
        message: parts.join("; "),
    }
}

/// The lowercase hostnames a route claims, each once, with the field a message names.
/// A default hostname is checked like a written one: a tunnel domain may predate validation.
fn hostnames(
    declared: &Declared<'_>,
    facts: Option<&TunnelFacts>,
    verdict: &mut Verdict,
) -> Vec<(String, String)> {
    let input = &declared.input;
    if declared.any_host {
        return vec![(ANY_HOST.to_string(), declared.fqdn_field.clone())];
    }
    let mut out: Vec<(String, String)> = Vec::new();
    for (field, fqdn) in input.effective_fqdns(facts) {
        let fqdn = fqdn.to_ascii_lowercase();
        let field = match field {
            Field::DefaultHostname => {
                check_fqdn(
                    &declared.fqdn_field,
                    &fqdn,
                    facts,
                    input.dns_updates_disabled,
                    false,
                    verdict,
                );
                default_field(declared)
            }
            named => named.to_string(),
        };
        if !out.iter().any(|(f, _)| *f == fqdn) {
            out.push((fqdn, field));
        }
    }
    out
}

/// Where a conflict on a default hostname is reported: the subject, or the hostname
/// annotation the fix would add.
fn default_field(declared: &Declared<'_>) -> String {
    match declared.fqdn_field.strip_suffix(".spec.fqdn") {
        Some(subject) => subject.to_string(),
        None => declared.fqdn_field.clone(),
    }
}

/// Route-level `originRequest`: only what the source set (docs/design.md §3.4 item 1). A `caPool` on a
/// tunnel without `originCaPool` is dropped (admission warned about it).
fn origin_request(route: &RouteInput<'_>, tunnel: &TunnelFacts) -> OriginRequest {
    let text = |value: Option<(Field, &str)>| value.map(|(_, v)| v.to_string());
    let duration = |name: &str| {
        route
            .durations
            .iter()
            .find(|(field, _)| matches!(field, Field::Subject(_, n) if *n == name))
            .map(|(_, d)| d.to_string())
    };
    OriginSettings {
        no_tls_verify: route.no_tls_verify.then_some(true),
        ca_pool: text(route.ca_pool).filter(|_| tunnel.has_origin_ca_pool),
        http2_origin: route.http2_origin.then_some(true),
        http_host_header: text(route.http_host_header),
        origin_server_name: text(route.origin_server_name),
        connect_timeout: duration("connectTimeout"),
        tls_timeout: duration("tlsTimeout"),
        keep_alive_timeout: duration("keepAliveTimeout"),
        proxy_address: text(route.proxy_address).filter(|a| a != DEFAULT_PROXY_ADDRESS),
        proxy_port: route
            .proxy_port
            .and_then(|(_, p)| u16::try_from(p).ok())
            .filter(|p| *p != 0),
        proxy_type: text(route.proxy_type).filter(|t| !t.is_empty()),
        // Set by Access protection at render time (`render::protection`), never by a route.
        access: None,
    }
    .into()
}

/// One hostname (+path) claim, in age order. `object` numbers the claimant's object (two
/// claims of one object are one owner's); its tunnel is the world's.
struct Claim<'a, 'w> {
    fqdn: &'a str,
    path: Option<&'a str>,
    tunnel: &'w TunnelIdentity,
    object: usize,
    owner: &'a str,
}

/// Hostname ownership: one tunnel per fqdn, one owner per fqdn+path; the first claim (the
/// oldest source) wins. It holds a key per hostname, the tunnel borrowed from the world and
/// the owner's name shared between its two maps; sources are read one at a time and do not
/// outlive their claims.
#[derive(Default)]
struct Authority<'w> {
    /// Per fqdn: its tunnel, and the object (number and name) that claimed it first.
    tunnel_of: HashMap<String, (&'w TunnelIdentity, usize, Arc<str>)>,
    owner_of: HashMap<(String, Option<String>), (usize, Arc<str>)>,
}

impl<'w> Authority<'w> {
    fn claim(&mut self, claim: &Claim<'_, 'w>, field: &str) -> Result<(), String> {
        let fqdn = claim.fqdn;
        // Every host of one tunnel is that tunnel's own business: no DNS name, no other tunnel.
        let key_host = if fqdn == ANY_HOST {
            format!("{ANY_HOST} {}", claim.tunnel)
        } else {
            fqdn.to_string()
        };
        let mut owner: Option<Arc<str>> = None;
        match self.tunnel_of.get(fqdn).filter(|_| fqdn != ANY_HOST) {
            // One route attached to Gateways of two tunnels: it is not older than itself.
            Some((tunnel, object, _)) if *tunnel != claim.tunnel && *object == claim.object => {
                return Err(format!(
                    "{field}: {fqdn} is already routed through {tunnel} by another parent of this route; one hostname can use one tunnel, attach the route to Gateways of one tunnel or give each parent its own hostnames"
                ));
            }
            Some((tunnel, _, owner)) if *tunnel != claim.tunnel => {
                return Err(format!(
                    "{field}: {fqdn} is already routed through {tunnel} by {owner}, which is older; one hostname can use one tunnel, remove it from one of them"
                ));
            }
            Some(_) => {}
            None if fqdn == ANY_HOST => {}
            None => {
                let name = owner.get_or_insert_with(|| Arc::from(claim.owner)).clone();
                self.tunnel_of
                    .insert(fqdn.to_string(), (claim.tunnel, claim.object, name));
            }
        }
        let key = (key_host, claim.path.map(str::to_string));
        match self.owner_of.get(&key) {
            Some((object, _)) if *object == claim.object => Err(format!(
                "{field}: {fqdn} (path {:?}) is listed twice in this binding; keep one subject per hostname and path",
                claim.path.unwrap_or("")
            )),
            Some((_, owner)) => {
                let path = claim
                    .path
                    .map(|p| format!(" (path {p:?})"))
                    .unwrap_or_default();
                Err(format!(
                    "{field}: {fqdn}{path} is already exposed by {owner}, which is older; remove it from one of them"
                ))
            }
            None => {
                let name = owner.unwrap_or_else(|| Arc::from(claim.owner));
                self.owner_of.insert(key, (claim.object, name));
                Ok(())
            }
        }
    }
}

/// An object that may declare routes, before they are read.
enum Pending<'w> {
    Binding(&'w TunnelBinding),
    /// A Service with an expose label.
    Service(&'w ServicePorts),
    Ingress(&'w Ingress),
    Http(&'w HTTPRoute),
    Grpc(&'w GRPCRoute),
}

impl<'w> Pending<'w> {
    fn age_key(&self) -> AgeKey<'w> {
        match *self {
            Pending::Binding(b) => AgeKey::of(SourceKind::TunnelBinding, &b.metadata),
            Pending::Service(s) => AgeKey::of(SourceKind::Service, &s.metadata),
            Pending::Ingress(i) => AgeKey::of(SourceKind::Ingress, &i.metadata),
            Pending::Http(r) => AgeKey::of(SourceKind::HTTPRoute, &r.metadata),
            Pending::Grpc(r) => AgeKey::of(SourceKind::GRPCRoute, &r.metadata),
        }
    }

    /// Its sources: none for an Ingress of another class or a route on no tunnel of ours.
    fn sources(&self, world: &'w RouteWorld, services: &ServiceIndex<'w>) -> Vec<Source<'w>> {
        match *self {
            Pending::Binding(b) => vec![from_binding(b, services)],
            Pending::Service(s) => from_service(s).into_iter().collect(),
            Pending::Ingress(i) => from_ingress(i, &world.ingress_classes, services)
                .into_iter()
                .collect(),
            Pending::Http(r) => sources_of_read(&read_http(world, services, r)),
            Pending::Grpc(r) => sources_of_read(&read_grpc(world, services, r)),
        }
    }
}
