//! The route model for labelled Services, origin settings, DNS, and sources a tunnel does not
//! take; exact outcomes.
use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::json;

use super::fixtures::{binding, identity, service, tunnel};
use super::*;
use crate::routes::{OriginRequest, OriginSettings};
use crate::rules::RouteNamespacePolicy;
use cftunnel_types::TunnelKind;

fn edge_org() -> cftunnel_types::TunnelIdentity {
    identity(TunnelKind::ClusterTunnel, "", "edge")
}

fn world(
    bindings: Vec<std::sync::Arc<cftunnel_types::TunnelBinding>>,
    services: Vec<std::sync::Arc<cftunnel_types::ServicePorts>>,
) -> RouteWorld {
    RouteWorld {
        tunnels: vec![tunnel(TunnelKind::ClusterTunnel, "", "edge", "example.org")],
        bindings,
        services,
        ..RouteWorld::default()
    }
}

fn status<'t>(table: &'t RouteTable, kind: SourceKind, name: &str) -> &'t SourceStatus {
    table
        .sources
        .iter()
        .find(|(r, _)| r.kind == kind && r.name == name)
        .map(|(_, s)| s)
        .unwrap_or_else(|| panic!("no status for {name}"))
}

fn to_edge() -> serde_json::Value {
    json!({"kind": "ClusterTunnel", "name": "edge"})
}

/// A binding whose one subject (named like the binding) routes `fqdn`.
fn fqdn_binding(
    namespace: &str,
    name: &str,
    created: i64,
    tunnel_ref: serde_json::Value,
    fqdn: &str,
) -> std::sync::Arc<cftunnel_types::TunnelBinding> {
    let subjects = json!([{"name": name, "spec": {"fqdn": fqdn}}]);
    binding(namespace, name, created, tunnel_ref, subjects)
}

#[test]
fn a_labelled_service_routes_through_its_annotations() {
    let svc = service(
        "shop",
        "api",
        1,
        json!({"cfargotunnel.com/expose-cluster-tunnel": "edge"}),
        json!({
            "cfargotunnel.com/hostname": "a.example.org, B.example.org",
            "cfargotunnel.com/path": "^/v1(/|$)",
            "cfargotunnel.com/port": "secure",
            "cfargotunnel.com/no-tls-verify": "true",
            "cfargotunnel.com/http-host-header": "api.internal",
            "cfargotunnel.com/disable-dns": "true",
        }),
        json!([{"name": "plain", "port": 80}, {"name": "secure", "port": 8443, "appProtocol": "https"}]),
    );
    let table = compute_routes(&world(Vec::new(), vec![svc]));
    let edge = &table.tunnels[&edge_org()];
    let expected_origin = OriginRequest::from(OriginSettings {
        no_tls_verify: Some(true),
        http_host_header: Some("api.internal".into()),
        ..OriginSettings::default()
    });
    let got: Vec<(&str, Option<&str>, &str, &OriginRequest)> = edge
        .routes
        .iter()
        .map(|r| {
            (
                r.hostname.as_str(),
                r.path.as_deref(),
                r.service.as_str(),
                &r.origin_request,
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (
                "a.example.org",
                Some("^/v1(/|$)"),
                "https://api.shop.svc:8443",
                &expected_origin
            ),
            (
                "b.example.org",
                Some("^/v1(/|$)"),
                "https://api.shop.svc:8443",
                &expected_origin
            ),
        ]
    );
    assert!(edge.dns.iter().all(|d| d.dns_updates_disabled));
    let s = status(&table, SourceKind::Service, "api");
    assert_eq!(
        s.message,
        "routes a.example.org, b.example.org through ClusterTunnel edge"
    );
    assert_eq!(s.routes[0].source.uid, "uid-svc-shop-api");
}

#[test]
fn hostnames_outside_the_tunnels_domain_are_routed_and_only_the_quiet_one_skips_dns() {
    let quiet = json!({"kind": "ClusterTunnel", "name": "edge", "disableDNSUpdates": true});
    let table = compute_routes(&world(
        vec![
            fqdn_binding("shop", "a", 1, quiet, "app.other.net"),
            fqdn_binding("shop", "b", 2, to_edge(), "b.other.net"),
        ],
        Vec::new(),
    ));
    let edge = &table.tunnels[&edge_org()];
    assert_eq!(
        edge.routes
            .iter()
            .map(|r| r.hostname.as_str())
            .collect::<Vec<_>>(),
        vec!["app.other.net", "b.other.net"]
    );
    // The zone of b.other.net is the DNS placement's to find (docs/design.md §3.3).
    assert_eq!(
        edge.dns,
        vec![
            DnsName {
                fqdn: "app.other.net".into(),
                dns_updates_disabled: true
            },
            DnsName {
                fqdn: "b.other.net".into(),
                dns_updates_disabled: false
            }
        ]
    );
    let routed = status(&table, SourceKind::TunnelBinding, "b");
    assert!(
        !routed.message.contains("outside the domain"),
        "no zone warning on the route: {}",
        routed.message
    );
}

#[test]
fn dns_is_wanted_unless_every_source_serving_the_name_disables_it() {
    let quiet = json!({"kind": "ClusterTunnel", "name": "edge", "disableDNSUpdates": true});
    let table = compute_routes(&world(
        vec![
            binding(
                "shop",
                "a",
                1,
                quiet.clone(),
                json!([{"name": "a", "spec": {"fqdn": "x.example.org", "path": "^/a"}}]),
            ),
            binding(
                "shop",
                "b",
                2,
                to_edge(),
                json!([{"name": "b", "spec": {"fqdn": "x.example.org", "path": "^/b"}}]),
            ),
            fqdn_binding("shop", "c", 3, quiet, "y.example.org"),
        ],
        Vec::new(),
    ));
    assert_eq!(
        table.tunnels[&edge_org()].dns,
        vec![
            DnsName {
                fqdn: "x.example.org".into(),
                dns_updates_disabled: false
            },
            DnsName {
                fqdn: "y.example.org".into(),
                dns_updates_disabled: true
            },
        ]
    );
}

#[test]
fn route_origin_settings_carry_only_what_the_source_turned_on() {
    let subjects = json!([
        {"name": "plain", "spec": {"fqdn": "plain.example.org", "noTlsVerify": false, "proxyAddress": "127.0.0.1", "proxyPort": 0}},
        {"name": "tuned", "spec": {"fqdn": "tuned.example.org", "noTlsVerify": true, "http2Origin": true,
            "caPool": "ca.crt", "proxyAddress": "0.0.0.0", "proxyPort": 1080, "proxyType": "socks",
            "connectTimeout": "5s", "tlsTimeout": "2s", "keepAliveTimeout": "1m", "originServerName": "tuned.internal"}},
    ]);
    let b = binding("shop", "b", 1, to_edge(), subjects);
    let origins = |table: &RouteTable| -> Vec<OriginRequest> {
        table.tunnels[&edge_org()]
            .routes
            .iter()
            .map(|r| r.origin_request.clone())
            .collect()
    };
    let mut tuned = OriginRequest::from(OriginSettings {
        no_tls_verify: Some(true),
        ca_pool: Some("ca.crt".into()),
        http2_origin: Some(true),
        origin_server_name: Some("tuned.internal".into()),
        connect_timeout: Some("5s".into()),
        tls_timeout: Some("2s".into()),
        keep_alive_timeout: Some("1m".into()),
        proxy_address: Some("0.0.0.0".into()),
        proxy_port: Some(1080),
        proxy_type: Some("socks".into()),
        ..OriginSettings::default()
    });
    let mut with_pool = world(vec![b.clone()], Vec::new());
    with_pool.tunnels[0].has_origin_ca_pool = true;
    assert_eq!(
        origins(&compute_routes(&with_pool)),
        vec![OriginRequest::default(), tuned.clone()]
    );
    // Without originCaPool the key is dropped, and the status says why.
    let table = compute_routes(&world(vec![b], Vec::new()));
    tuned.ca_pool = None;
    assert_eq!(origins(&table), vec![OriginRequest::default(), tuned]);
    let s = status(&table, SourceKind::TunnelBinding, "b");
    assert_eq!(s.reason, RouteReason::ServiceNotFound);
    assert!(
        s.message.ends_with("; subjects[1].spec.caPool: caPool \"ca.crt\" has no effect: the tunnel sets no originCaPool Secret"),
        "{}",
        s.message
    );
}

#[test]
fn a_source_whose_tunnel_does_not_exist_serves_and_claims_nothing() {
    let missing = json!({"kind": "Tunnel", "name": "gone"});
    let table = compute_routes(&world(
        vec![
            binding(
                "shop",
                "old",
                1,
                missing,
                json!([{"name": "web", "spec": {"fqdn": "app.example.org"}}]),
            ),
            binding(
                "shop",
                "new",
                2,
                to_edge(),
                json!([{"name": "web", "spec": {"fqdn": "app.example.org"}}]),
            ),
        ],
        vec![service(
            "shop",
            "lost",
            0,
            json!({"cfargotunnel.com/expose-tunnel": "gone"}),
            json!({}),
            json!([{"port": 80}]),
        )],
    ));
    let old = status(&table, SourceKind::TunnelBinding, "old");
    assert_eq!(
        (old.reason, old.ready_status()),
        (RouteReason::TunnelNotFound, "False")
    );
    assert_eq!(
        old.message,
        "tunnelRef: Tunnel shop/gone does not exist; create it, or name an existing Tunnel or ClusterTunnel"
    );
    assert_eq!(
        old.tunnel,
        Some(identity(TunnelKind::Tunnel, "shop", "gone"))
    );
    assert!(old.hostnames().is_empty());
    assert_eq!(
        status(&table, SourceKind::TunnelBinding, "new").reason,
        RouteReason::ServiceNotFound
    );
    let lost = status(&table, SourceKind::Service, "lost");
    assert_eq!(
        (lost.reason, lost.message.as_str(), lost.routes.len()),
        (
            RouteReason::TunnelNotFound,
            "metadata.labels[cfargotunnel.com/expose-tunnel]: Tunnel shop/gone does not exist; create it, or name an existing Tunnel or ClusterTunnel",
            0
        )
    );
    assert!(
        !table
            .tunnels
            .contains_key(&identity(TunnelKind::Tunnel, "shop", "gone"))
    );
}

#[test]
fn a_namespace_the_tunnel_does_not_admit_serves_nothing() {
    let mut w = world(
        vec![binding("blog", "b", 1, to_edge(), json!([{"name": "web"}]))],
        Vec::new(),
    );
    let selector =
        serde_json::from_value(json!({"matchLabels": {"team": "web"}})).unwrap_or_default();
    w.tunnels[0].allowed = RouteNamespacePolicy::Selector(selector);
    w.namespace_labels = BTreeMap::from([(
        "blog".to_string(),
        BTreeMap::from([("team".to_string(), "blog".to_string())]),
    )]);
    let table = compute_routes(&w);
    assert!(table.tunnels[&edge_org()].routes.is_empty());
    let s = status(&table, SourceKind::TunnelBinding, "b");
    assert_eq!(s.reason, RouteReason::NamespaceNotAllowed);
    assert_eq!(
        s.message,
        "tunnelRef: ClusterTunnel edge does not admit routes from namespace \"blog\" (allowedRoutes.namespaces); ask its owner to allow it, or use a tunnel of this namespace"
    );
    assert_eq!(
        table.tunnels[&edge_org()].entries[0].reason,
        RouteReason::NamespaceNotAllowed
    );
    w.namespace_labels.insert(
        "blog".into(),
        BTreeMap::from([("team".to_string(), "web".to_string())]),
    );
    assert_eq!(compute_routes(&w).tunnels[&edge_org()].routes.len(), 1);
}

#[test]
fn an_invalid_route_gets_the_admission_message_and_claims_nothing() {
    let table = compute_routes(&world(
        vec![
            binding(
                "shop",
                "old",
                1,
                to_edge(),
                json!([{"name": "web", "spec": {"fqdn": "app.example.org", "path": "("}}]),
            ),
            binding(
                "shop",
                "new",
                2,
                to_edge(),
                json!([{"name": "web", "spec": {"fqdn": "app.example.org"}}]),
            ),
        ],
        Vec::new(),
    ));
    let old = status(&table, SourceKind::TunnelBinding, "old");
    assert_eq!(old.reason, RouteReason::InvalidRoute);
    assert!(
        old.message
            .starts_with("subjects[0].spec.path: \"(\" is not a valid regular expression ("),
        "{}",
        old.message
    );
    let routes = &table.tunnels[&edge_org()].routes;
    assert_eq!((routes.len(), routes[0].path.as_deref()), (1, None));
}

#[test]
fn a_udp_port_is_served_with_a_warning() {
    let dns = service(
        "shop",
        "dns",
        0,
        json!({"cfargotunnel.com/expose-cluster-tunnel": "edge"}),
        json!({}),
        json!([{"name": "dns", "port": 53, "protocol": "UDP"}]),
    );
    let table = compute_routes(&world(Vec::new(), vec![dns]));
    let s = status(&table, SourceKind::Service, "dns");
    assert_eq!((s.reason, s.ready_status()), (RouteReason::UdpPort, "True"));
    assert_eq!(
        s.message,
        "metadata.annotations[cfargotunnel.com/port]: port 53 of Service shop/dns is UDP, and a public hostname carries only HTTP and TCP streams; name a TCP port"
    );
    assert_eq!(
        table.tunnels[&edge_org()].routes[0].service,
        "http://dns.shop.svc:53"
    );
}

#[test]
fn bad_references_and_annotations_are_refused_with_the_admission_messages() {
    let both = json!({"cfargotunnel.com/expose-cluster-tunnel": "edge", "cfargotunnel.com/expose-tunnel": "edge"});
    let table = compute_routes(&world(
        vec![binding(
            "shop",
            "b",
            1,
            json!({"kind": "Gateway", "name": "edge"}),
            json!([{"name": "web"}]),
        )],
        vec![
            service("shop", "both", 0, both, json!({}), json!([{"port": 80}])),
            service(
                "shop",
                "flag",
                0,
                json!({"cfargotunnel.com/expose-cluster-tunnel": "edge"}),
                json!({"cfargotunnel.com/no-tls-verify": "yes"}),
                json!([{"port": 80}]),
            ),
        ],
    ));
    let b = status(&table, SourceKind::TunnelBinding, "b");
    assert_eq!(
        (b.reason, b.tunnel.as_ref(), b.message.as_str()),
        (
            RouteReason::InvalidRoute,
            None,
            "tunnelRef.kind: \"Gateway\" is not a tunnel kind; use Tunnel (same namespace) or ClusterTunnel"
        )
    );
    assert!(
        !table.sources.keys().any(|r| r.name == "both"),
        "two expose labels: not a source"
    );
    let flag = status(&table, SourceKind::Service, "flag");
    assert_eq!(
        (flag.reason, flag.message.as_str()),
        (
            RouteReason::InvalidRoute,
            "metadata.annotations[cfargotunnel.com/no-tls-verify]: \"yes\" is not a boolean; use \"true\" or \"false\""
        )
    );
    assert!(table.tunnels[&edge_org()].routes.is_empty());
}

#[test]
fn a_default_hostname_under_a_domain_cloudflared_would_refuse_is_refused() {
    let mut w = world(
        vec![binding("shop", "b", 1, to_edge(), json!([{"name": "web"}]))],
        Vec::new(),
    );
    w.tunnels[0].domain = "Example.org.".into();
    let table = compute_routes(&w);
    let s = status(&table, SourceKind::TunnelBinding, "b");
    assert_eq!(s.reason, RouteReason::InvalidRoute);
    assert_eq!(
        s.message,
        "subjects[0].spec.fqdn: \"web.example.org.\" must not end with a dot; give a hostname such as app.example.com or *.example.com"
    );
    assert!(table.tunnels[&edge_org()].routes.is_empty());
}

#[test]
fn the_dns_part_of_a_table_keeps_every_tunnels_names_and_ages_and_nothing_else() {
    let table = compute_routes(&world(
        vec![
            fqdn_binding("shop", "a", 1, to_edge(), "a.example.org"),
            fqdn_binding("shop", "b", 2, to_edge(), "b.example.org"),
        ],
        Vec::new(),
    ));
    let dns = table.dns_only(None);
    let edge = &table.tunnels[&edge_org()];
    let slim = &dns.tunnels[&edge_org()];
    assert_eq!(slim.dns, edge.dns);
    assert_eq!(slim.dns_since, edge.dns_since);
    assert_eq!(slim.dns.len(), 2);
    assert_eq!(slim.dns_since.len(), 2);
    assert!(slim.routes.is_empty() && slim.entries.is_empty());
    assert!(dns.sources.is_empty() && !table.sources.is_empty());
    assert_eq!(dns.tunnels.len(), table.tunnels.len());
    // The next table's DNS part shares each tunnel's part that did not change.
    let again = table.dns_only(Some(&dns));
    assert!(Arc::ptr_eq(&again.tunnels[&edge_org()], slim));
    let changed = compute_routes(&world(
        vec![fqdn_binding("shop", "a", 1, to_edge(), "a.example.org")],
        Vec::new(),
    ));
    let next = changed.dns_only(Some(&again));
    assert!(!Arc::ptr_eq(&next.tunnels[&edge_org()], slim));
    assert_eq!(next.tunnels[&edge_org()].dns.len(), 1);
}

#[test]
fn a_recomputed_table_shares_unchanged_tunnels_and_their_entries_with_the_sources() {
    let labelled = |name: &str, created: i64, tunnel: &str| {
        service(
            "blog",
            name,
            created,
            json!({"cfargotunnel.com/expose-cluster-tunnel": tunnel}),
            json!({"cfargotunnel.com/hostname": format!("{name}.example.org")}),
            json!([{"name": "http", "port": 80}]),
        )
    };
    let mut before = world(vec![], vec![labelled("web", 1, "edge")]);
    before
        .tunnels
        .push(tunnel(TunnelKind::ClusterTunnel, "", "core", "example.org"));
    let previous = compute_routes(&before);
    let mut after = before.clone();
    after.services.push(labelled("api", 2, "core"));
    let mut table = compute_routes(&after);
    table.share_unchanged(&previous);

    let core = identity(TunnelKind::ClusterTunnel, "", "core");
    assert!(Arc::ptr_eq(
        &table.tunnels[&edge_org()],
        &previous.tunnels[&edge_org()]
    ));
    assert!(!Arc::ptr_eq(
        &table.tunnels[&core],
        &previous.tunnels[&core]
    ));
    // The unchanged source's entry is the one its (shared) tunnel holds, not a copy.
    let web = status(&table, SourceKind::Service, "web");
    assert!(Arc::ptr_eq(
        &web.routes[0],
        &previous.tunnels[&edge_org()].entries[0]
    ));
    // The changed tunnel's source keeps the entry of the new table's own tunnel routes.
    let api = status(&table, SourceKind::Service, "api");
    assert!(Arc::ptr_eq(
        &api.routes[0],
        &table.tunnels[&core].entries[0]
    ));
    assert_eq!(table, compute_routes(&after));
}
