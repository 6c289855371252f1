//! Every parent of a route judged on its own: a tunnel's `allowedRoutes`, a missing tunnel, the
//! listener hostnames and hostname conflicts count for the parent they concern, in what each
//! tunnel serves and in each `status.parents[]` entry.
use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use serde_json::{Value, json};

use super::status::{GatewayApiStatus, StatusInput, gateway_statuses};
use super::tests::{cluster_edge, condition, decode, gateway_world, http_route};
use crate::routes::fixtures::*;
use crate::routes::*;
use crate::rules::RouteNamespacePolicy;
use cftunnel_types::TunnelKind;
use cftunnel_types::gateway::Gateway;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// A Gateway `namespace/name` of the class `cftunnel` on the tunnel `parameters` names (`null`:
/// the class's), with one HTTP listener taking routes from every namespace.
fn gateway(namespace: &str, name: &str, hostname: Option<&str>, parameters: Value) -> Arc<Gateway> {
    let mut listener = json!({"name": "http", "port": 80, "protocol": "HTTP",
                              "allowedRoutes": {"namespaces": {"from": "All"}}});
    if let Some(hostname) = hostname {
        listener["hostname"] = json!(hostname);
    }
    let mut spec = json!({"gatewayClassName": "cftunnel", "listeners": [listener]});
    if !parameters.is_null() {
        spec["infrastructure"] = json!({"parametersRef": parameters});
    }
    decode(json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
        "metadata": {"name": name, "namespace": namespace, "generation": 1},
        "spec": spec,
    }))
}

fn cluster_tunnel(name: &str) -> Value {
    json!({"group": "networking.cfargotunnel.com", "kind": "ClusterTunnel", "name": name})
}

/// The Tunnel `shop/edge` (domain example.com, routes from `shop` only).
fn shop_tunnel() -> Value {
    json!({"group": "networking.cfargotunnel.com", "kind": "Tunnel", "name": "edge"})
}

/// A ClusterTunnel for `example.org` that takes routes only from namespaces labelled `team=shop`.
fn picky(name: &str) -> crate::rules::TunnelFacts {
    let mut facts = tunnel(TunnelKind::ClusterTunnel, "", name, "example.org");
    facts.allowed = RouteNamespacePolicy::Selector(LabelSelector {
        match_labels: Some(BTreeMap::from([("team".into(), "shop".into())])),
        match_expressions: None,
    });
    facts
}

fn statuses_of(world: &RouteWorld, table: &RouteTable) -> GatewayApiStatus {
    let ids = world
        .tunnels
        .iter()
        .map(|t| (t.identity.clone(), format!("id-{}", t.identity.name)))
        .collect();
    gateway_statuses(
        world,
        table,
        &StatusInput {
            tunnel_ids: &ids,
            dns: &BTreeMap::new(),
            now: Time(jiff::Timestamp::UNIX_EPOCH),
            changed_routes_only: false,
        },
    )
}

/// cftunnel's entry for the parent Gateway `gateway` of HTTPRoute `shop/name`.
fn parent<'s>(statuses: &'s GatewayApiStatus, name: &str, gateway: &str) -> &'s [Condition] {
    statuses.routes[&(SourceKind::HTTPRoute, "shop".to_string(), name.to_string())]
        .iter()
        .find(|p| p.parent_ref.name == gateway)
        .map(|p| p.conditions.as_slice())
        .unwrap_or_else(|| panic!("no entry for parent {gateway}"))
}

fn served(table: &RouteTable, tunnel: &cftunnel_types::TunnelIdentity) -> Vec<(String, String)> {
    table
        .routes_of(tunnel)
        .into_iter()
        .map(|r| (r.hostname, r.service))
        .collect()
}

fn pair(host: &str, service: &str) -> (String, String) {
    (host.to_string(), service.to_string())
}

#[test]
fn a_tunnel_that_refuses_the_gateways_namespace_gets_none_of_the_routes_rules_and_only_its_parent_says_so()
 {
    let mut world = gateway_world();
    world.tunnels.push(picky("closed"));
    world.namespace_labels.insert(
        "shop".into(),
        BTreeMap::from([("team".into(), "other".into())]),
    );
    world
        .gateways
        .push(gateway("shop", "closed", None, cluster_tunnel("closed")));
    world.http_routes.push(http_route(
        "two",
        0,
        json!({"parentRefs": [{"name": "closed"}, {"name": "web"}], "hostnames": ["app.example.org"],
               "rules": [{"backendRefs": [{"name": "web", "port": 80}]}]}),
    ));
    let table = compute_routes(&world);
    assert_eq!(
        served(&table, &cluster_edge()),
        vec![pair("app.example.org", "http://web.shop.svc:80")]
    );
    let closed = identity(TunnelKind::ClusterTunnel, "", "closed");
    assert_eq!(served(&table, &closed), Vec::new());
    // The refusal is recorded against the tunnel that refuses, as for a binding.
    assert_eq!(
        table.tunnels[&closed]
            .entries
            .iter()
            .map(|e| (e.hostname.as_str(), e.reason))
            .collect::<Vec<_>>(),
        vec![("app.example.org", RouteReason::NamespaceNotAllowed)]
    );

    let statuses = statuses_of(&world, &table);
    let web = parent(&statuses, "two", "web");
    assert_eq!(condition(web, "Accepted"), ("True", "Accepted", ""));
    assert_eq!(condition(web, "ResolvedRefs"), ("True", "ResolvedRefs", ""));
    assert_eq!(condition(web, "PartiallyInvalid"), ("", "", ""));
    let refused = "Gateway shop/closed cannot serve routes: ClusterTunnel closed does not admit routes from namespace \"shop\", the Gateway's (its allowedRoutes.namespaces); ask its owner to allow it, or name another tunnel";
    assert_eq!(
        condition(parent(&statuses, "two", "closed"), "Accepted"),
        ("False", "NoMatchingParent", refused)
    );
    // The Gateway itself is not accepted by a tunnel that refuses it.
    let gateway = &statuses.gateways[&("shop".into(), "closed".into())];
    assert_eq!(
        condition(&gateway.conditions, "Accepted"),
        (
            "False",
            "InvalidParameters",
            "ClusterTunnel closed does not admit routes from namespace \"shop\", the Gateway's (its allowedRoutes.namespaces); ask its owner to allow it, or name another tunnel"
        )
    );
    assert_eq!(condition(&gateway.conditions, "Programmed").0, "False");
    assert!(gateway.addresses.is_empty());
}

#[test]
fn two_gateways_of_two_namespaces_on_one_tunnel_are_each_asked_about_their_own_namespace() {
    let mut world = gateway_world();
    world.tunnels.push(picky("picky"));
    world.namespace_labels.insert(
        "shop".into(),
        BTreeMap::from([("team".into(), "shop".into())]),
    );
    // The refused parent comes first: its namespace must not decide for the other one.
    world.gateways.push(gateway(
        "other",
        "b",
        Some("b.example.org"),
        cluster_tunnel("picky"),
    ));
    world.gateways.push(gateway(
        "shop",
        "a",
        Some("a.example.org"),
        cluster_tunnel("picky"),
    ));
    world.http_routes.push(http_route(
        "both",
        0,
        json!({"parentRefs": [{"name": "b", "namespace": "other"}, {"name": "a"}],
               "rules": [{"backendRefs": [{"name": "web", "port": 80}]}]}),
    ));
    let table = compute_routes(&world);
    let tunnel = identity(TunnelKind::ClusterTunnel, "", "picky");
    assert_eq!(
        served(&table, &tunnel),
        vec![pair("a.example.org", "http://web.shop.svc:80")]
    );
    let statuses = statuses_of(&world, &table);
    assert_eq!(
        condition(parent(&statuses, "both", "a"), "Accepted"),
        ("True", "Accepted", "")
    );
    let (status, reason, message) = condition(parent(&statuses, "both", "b"), "Accepted");
    assert_eq!((status, reason), ("False", "NoMatchingParent"));
    assert!(
        message.starts_with("Gateway other/b cannot serve routes: ClusterTunnel picky does not admit routes from namespace \"other\""),
        "{message}"
    );
}

#[test]
fn each_parent_serves_the_hostnames_its_own_listener_shares_with_the_route() {
    let mut world = gateway_world();
    world
        .gateways
        .push(gateway("shop", "org", Some("*.example.org"), Value::Null));
    world
        .gateways
        .push(gateway("shop", "com", Some("*.example.com"), shop_tunnel()));
    world.http_routes.push(http_route(
        "split",
        0,
        json!({"parentRefs": [{"name": "org"}, {"name": "com"}],
               "hostnames": ["app.example.org", "app.example.com", "app.example.net"],
               "rules": [{"backendRefs": [{"name": "web", "port": 80}]}]}),
    ));
    let table = compute_routes(&world);
    assert_eq!(
        served(&table, &cluster_edge()),
        vec![pair("app.example.org", "http://web.shop.svc:80")]
    );
    assert_eq!(
        served(&table, &shop_edge()),
        vec![pair("app.example.com", "http://web.shop.svc:80")]
    );
    let statuses = statuses_of(&world, &table);
    for gateway in ["org", "com"] {
        let conditions = parent(&statuses, "split", gateway);
        assert_eq!(condition(conditions, "Accepted"), ("True", "Accepted", ""));
        assert_eq!(condition(conditions, "PartiallyInvalid"), ("", "", ""));
    }
}

#[test]
fn a_parent_whose_tunnel_is_missing_leaves_the_other_parent_accepted() {
    let mut world = gateway_world();
    world
        .gateways
        .push(gateway("shop", "gone", None, cluster_tunnel("missing")));
    world.http_routes.push(http_route(
        "two",
        0,
        json!({"parentRefs": [{"name": "web"}, {"name": "gone"}], "hostnames": ["app.example.org"],
               "rules": [{"backendRefs": [{"name": "web", "port": 80}]}]}),
    ));
    let table = compute_routes(&world);
    assert_eq!(
        served(&table, &cluster_edge()),
        vec![pair("app.example.org", "http://web.shop.svc:80")]
    );
    let statuses = statuses_of(&world, &table);
    assert_eq!(
        condition(parent(&statuses, "two", "web"), "Accepted"),
        ("True", "Accepted", "")
    );
    assert_eq!(
        condition(parent(&statuses, "two", "gone"), "Accepted"),
        (
            "False",
            "NoMatchingParent",
            "Gateway shop/gone cannot serve routes: ClusterTunnel missing does not exist; create it or name an existing tunnel"
        )
    );
}

#[test]
fn a_hostname_lost_on_one_tunnel_marks_only_the_parent_on_that_tunnel_partially_invalid() {
    let mut world = gateway_world();
    world.bindings.push(binding(
        "shop",
        "older",
        -10,
        to_edge(),
        json!([{"kind": "Service", "name": "web", "spec": {"fqdn": "b.example.com"}}]),
    ));
    world
        .gateways
        .push(gateway("shop", "org", Some("*.example.org"), Value::Null));
    world
        .gateways
        .push(gateway("shop", "com", Some("*.example.com"), shop_tunnel()));
    world.http_routes.push(http_route(
        "late",
        0,
        json!({"parentRefs": [{"name": "org"}, {"name": "com"}],
               "hostnames": ["a.example.org", "a.example.com", "b.example.com"],
               "rules": [{"backendRefs": [{"name": "web", "port": 80}]}]}),
    ));
    let table = compute_routes(&world);
    assert_eq!(
        served(&table, &shop_edge()),
        vec![
            pair("a.example.com", "http://web.shop.svc:80"),
            pair("b.example.com", "http://web.shop.svc:80"),
        ]
    );
    let statuses = statuses_of(&world, &table);
    let org = parent(&statuses, "late", "org");
    assert_eq!(condition(org, "Accepted"), ("True", "Accepted", ""));
    assert_eq!(condition(org, "PartiallyInvalid"), ("", "", ""));
    let com = parent(&statuses, "late", "com");
    assert_eq!(condition(com, "Accepted"), ("True", "Accepted", ""));
    assert_eq!(
        condition(com, "PartiallyInvalid"),
        (
            "True",
            "HostnameConflict",
            "spec.hostnames[2]: b.example.com is already exposed by TunnelBinding shop/older (subject web), which is older; remove it from one of them"
        )
    );
}

#[test]
fn a_hostname_two_parents_would_serve_through_two_tunnels_goes_through_one_and_the_other_parent_is_told()
 {
    let mut world = gateway_world();
    world
        .gateways
        .push(gateway("shop", "com", None, shop_tunnel()));
    world.http_routes.push(http_route(
        "twice",
        0,
        json!({"parentRefs": [{"name": "web"}, {"name": "com"}], "hostnames": ["same.example.org"],
               "rules": [{"backendRefs": [{"name": "web", "port": 80}]}]}),
    ));
    let table = compute_routes(&world);
    // One hostname, one tunnel: a Tunnel sorts before a ClusterTunnel.
    assert_eq!(
        served(&table, &shop_edge()),
        vec![pair("same.example.org", "http://web.shop.svc:80")]
    );
    assert_eq!(served(&table, &cluster_edge()), Vec::new());
    let statuses = statuses_of(&world, &table);
    assert_eq!(
        condition(parent(&statuses, "twice", "com"), "Accepted"),
        ("True", "Accepted", "")
    );
    let (status, reason, message) = condition(parent(&statuses, "twice", "web"), "Accepted");
    assert_eq!((status, reason), ("False", "HostnameConflict"));
    // The route is told its own other parent holds the hostname, not an older route.
    assert_eq!(
        message,
        "spec.hostnames[0]: same.example.org is already routed through Tunnel shop/edge by another parent of this route; one hostname can use one tunnel, attach the route to Gateways of one tunnel or give each parent its own hostnames"
    );
}

#[test]
fn a_parent_tells_the_dns_problems_of_the_hostnames_it_serves_and_only_those() {
    let mut world = gateway_world();
    let route = |name: &str, host: &str| {
        http_route(
            name,
            0,
            json!({"parentRefs": [{"name": "web"}], "hostnames": [host],
                   "rules": [{"backendRefs": [{"name": "web", "port": 80}]}]}),
        )
    };
    world.http_routes.push(route("full", "full.example.org"));
    world.http_routes.push(route("fine", "fine.example.org"));
    let table = compute_routes(&world);
    let quota = "no DNS record for full.example.org: zone example.org is at its Cloudflare record quota (…)";
    let dns = BTreeMap::from([(
        super::tests::cluster_edge(),
        vec![super::status::DnsNote {
            hostname: Some("FULL.example.org".into()),
            reason: "QuotaExceeded".into(),
            message: quota.into(),
        }],
    )]);
    let ids = BTreeMap::new();
    let statuses = gateway_statuses(
        &world,
        &table,
        &StatusInput {
            tunnel_ids: &ids,
            dns: &dns,
            now: Time(jiff::Timestamp::UNIX_EPOCH),
            changed_routes_only: false,
        },
    );
    let full = parent(&statuses, "full", "web");
    assert_eq!(condition(full, "Accepted"), ("True", "Accepted", ""));
    assert_eq!(
        condition(full, super::status::DNS_CONDITION),
        ("False", "QuotaExceeded", quota)
    );
    let fine = parent(&statuses, "fine", "web");
    assert_eq!(condition(fine, super::status::DNS_CONDITION), ("", "", ""));
}
