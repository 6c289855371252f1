//! Each rule of a NetworkRoute: a refused case and an accepted neighbour.
use std::sync::Arc;

use serde_json::{Value, json};

use super::validate;
use crate::rules::Verdict;
use crate::rules::view::{AdmissionView, RouteNamespacePolicy, TunnelFacts};
use cftunnel_types::{NetworkRoute, NetworkRouteSpec, TunnelIdentity, TunnelKind, VirtualNetwork};

const ACCOUNT: &str = "0123456789abcdef0123456789abcdef";
const OTHER_ACCOUNT: &str = "fedcba9876543210fedcba9876543210";

fn spec(value: Value) -> NetworkRouteSpec {
    serde_json::from_value(value).unwrap_or_else(|e| panic!("spec: {e}"))
}

/// A spec through the Tunnel `edge` with these entries.
fn entries(cidrs: &[&str], hostnames: &[&str]) -> NetworkRouteSpec {
    spec(json!({"tunnelRef": {"name": "edge"}, "cidrs": cidrs, "hostnames": hostnames}))
}

fn stored(namespace: &str, name: &str, spec: NetworkRouteSpec) -> Arc<NetworkRoute> {
    let mut route = NetworkRoute::new(name, spec);
    route.metadata.namespace = Some(namespace.into());
    Arc::new(route)
}

fn tunnel(kind: TunnelKind, namespace: &str, name: &str, account: &str) -> TunnelFacts {
    TunnelFacts {
        identity: TunnelIdentity {
            kind,
            namespace: namespace.into(),
            name: name.into(),
        },
        domain: "example.com".into(),
        allowed: match kind {
            TunnelKind::Tunnel => RouteNamespacePolicy::Same,
            TunnelKind::ClusterTunnel => RouteNamespacePolicy::All,
        },
        has_origin_ca_pool: false,
        account: format!("id:{account}"),
        account_zones: Vec::new(),
    }
}

fn judged(spec: &NetworkRouteSpec, view: &AdmissionView) -> Verdict {
    validate(spec, "shop", "lan", view)
}

/// The violations of `spec` in namespace `shop`, as messages.
fn refusals(spec: &NetworkRouteSpec, view: &AdmissionView) -> Vec<String> {
    judged(spec, view)
        .violations
        .iter()
        .map(|v| v.message().to_string())
        .collect()
}

fn no_refusal(spec: &NetworkRouteSpec, view: &AdmissionView) {
    let verdict = judged(spec, view);
    assert!(verdict.is_allowed(), "{:?}", verdict.violations);
}

/// A view knowing the Tunnel `shop/edge` (in [`ACCOUNT`]), and these routes.
fn view_with(routes: Vec<Arc<NetworkRoute>>) -> AdmissionView {
    let mut view = AdmissionView::default();
    view.tunnels
        .push(tunnel(TunnelKind::Tunnel, "shop", "edge", ACCOUNT));
    view.network_routes = routes;
    view
}

#[test]
fn a_cidr_with_host_bits_is_refused_naming_the_canonical_range() {
    let view = view_with(Vec::new());
    assert_eq!(
        refusals(&entries(&["10.30.0.0/16", "10.20.0.7/24"], &[]), &view),
        ["spec.cidrs[1]: 10.20.0.7/24 has host bits set; use 10.20.0.0/24"]
    );
    assert_eq!(
        refusals(&entries(&["10.0.0.1"], &[]), &view),
        ["spec.cidrs[0]: 10.0.0.1 is not in CIDR notation; use 10.0.0.1/32"]
    );
    no_refusal(&entries(&["10.20.0.0/24", "fd00:10::/64"], &[]), &view);
}

#[test]
fn a_cidr_listed_twice_is_refused_in_any_spelling() {
    let view = view_with(Vec::new());
    assert_eq!(
        refusals(&entries(&["fd00:10::/64", "FD00:10:0::/64"], &[]), &view),
        ["spec.cidrs[1]: fd00:10::/64 is listed twice (also spec.cidrs[0]); list each CIDR once"]
    );
    no_refusal(&entries(&["fd00:10::/64", "fd00:11::/64"], &[]), &view);
}

#[test]
fn a_hostname_that_is_not_a_private_hostname_or_is_listed_twice_is_refused() {
    let view = view_with(Vec::new());
    assert_eq!(
        refusals(&entries(&[], &["db internal"]), &view),
        ["spec.hostnames[0]: \"db internal\" has ' ', not a letter, digit, '-' or '_'"]
    );
    assert_eq!(
        refusals(&entries(&[], &["db.internal", "*.DB.Internal."]), &view),
        [
            "spec.hostnames[1]: \"*.DB.Internal.\" is the hostname db.internal again (also spec.hostnames[0]): Cloudflare routes it once, without a leading `*.` or trailing dot, in any case; list it once"
        ]
    );
    no_refusal(&entries(&[], &["db.internal", "*.cache.internal"]), &view);
}

#[test]
fn a_service_must_be_named_as_services_are_and_once() {
    let view = view_with(Vec::new());
    let services = |names: &[&str]| {
        let list: Vec<Value> = names.iter().map(|n| json!({"name": n})).collect();
        spec(json!({"tunnelRef": {"name": "edge"}, "services": list}))
    };
    assert_eq!(
        refusals(&services(&["Web"]), &view),
        [
            "spec.services[0].name: \"Web\" is not a valid Service name; use lowercase letters, digits and '-', starting with a letter"
        ]
    );
    assert_eq!(
        refusals(&services(&["web", "db", "web"]), &view),
        [
            "spec.services[2].name: Service web is listed twice (also spec.services[0]); list each Service once"
        ]
    );
    no_refusal(&services(&["web", "db"]), &view);
}

#[test]
fn a_route_must_route_something() {
    let view = view_with(Vec::new());
    assert_eq!(
        refusals(&entries(&[], &[]), &view),
        ["spec: routes nothing; list at least one of spec.cidrs, spec.services and spec.hostnames"]
    );
    no_refusal(&entries(&[], &["db.internal"]), &view);
}

#[test]
fn the_tunnel_kind_is_tunnel_or_cluster_tunnel_as_written() {
    let mut view = view_with(Vec::new());
    view.tunnels
        .push(tunnel(TunnelKind::ClusterTunnel, "", "edge", ACCOUNT));
    let with_kind = |kind: &str| {
        spec(json!({"tunnelRef": {"kind": kind, "name": "edge"}, "cidrs": ["10.0.0.0/24"]}))
    };
    assert_eq!(
        refusals(&with_kind("clustertunnel"), &view),
        [
            "spec.tunnelRef.kind: \"clustertunnel\" is not a tunnel kind; use Tunnel (a tunnel of this namespace) or ClusterTunnel, written so"
        ]
    );
    for kind in ["Tunnel", "ClusterTunnel"] {
        let verdict = judged(&with_kind(kind), &view);
        assert!(verdict.is_allowed(), "{kind}: {:?}", verdict.violations);
        assert!(
            verdict.warnings.is_empty(),
            "{kind}: {:?}",
            verdict.warnings
        );
    }
    let unset = judged(&entries(&["10.0.0.0/24"], &[]), &view);
    assert!(unset.is_allowed() && unset.warnings.is_empty(), "{unset:?}");
}

#[test]
fn a_cluster_tunnel_must_admit_the_namespace() {
    let mut view = view_with(Vec::new());
    let mut closed = tunnel(TunnelKind::ClusterTunnel, "", "closed", ACCOUNT);
    closed.allowed = RouteNamespacePolicy::Same;
    view.tunnels.push(closed);
    view.tunnels
        .push(tunnel(TunnelKind::ClusterTunnel, "", "open", ACCOUNT));
    let through = |name: &str| {
        spec(
            json!({"tunnelRef": {"kind": "ClusterTunnel", "name": name}, "cidrs": ["10.0.0.0/24"]}),
        )
    };
    assert_eq!(
        refusals(&through("closed"), &view),
        [
            "spec.tunnelRef: ClusterTunnel closed does not admit routes from namespace \"shop\" (allowedRoutes.namespaces); ask its owner to allow it, or use a tunnel of this namespace"
        ]
    );
    no_refusal(&through("open"), &view);
}

#[test]
fn a_tunnel_not_known_yet_is_a_warning() {
    let view = view_with(Vec::new());
    let elsewhere = spec(json!({"tunnelRef": {"name": "gone"}, "cidrs": ["10.0.0.0/24"]}));
    let verdict = judged(&elsewhere, &view);
    assert!(verdict.is_allowed(), "{:?}", verdict.violations);
    assert_eq!(
        verdict.warnings,
        [
            "spec.tunnelRef: Tunnel shop/gone is not known yet: whether it admits this namespace, and its account, cannot be checked; the NetworkRoute reports TunnelNotFound until it exists"
        ]
    );
    let known = judged(&entries(&["10.0.0.0/24"], &[]), &view);
    assert!(known.warnings.is_empty(), "{:?}", known.warnings);
}

#[test]
fn a_cidr_another_namespace_routes_in_the_same_network_is_refused_naming_it() {
    let view = view_with(vec![stored("blog", "lan", entries(&["10.20.0.0/24"], &[]))]);
    assert_eq!(
        refusals(&entries(&["10.20.0.0/24"], &[]), &view),
        [
            "spec.cidrs[0]: 10.20.0.0/24 is already routed by NetworkRoute blog/lan in the account's default network; remove it there first"
        ]
    );
    // The same range in another VirtualNetwork is another route.
    let elsewhere = spec(
        json!({"tunnelRef": {"name": "edge"}, "virtualNetworkRef": {"name": "staging"}, "cidrs": ["10.20.0.0/24"]}),
    );
    let verdict = judged(&elsewhere, &view);
    assert!(verdict.is_allowed(), "{:?}", verdict.violations);
    // Both named: the same network, whatever the accounts the view knows.
    let in_staging = view_with(vec![stored("blog", "lan", elsewhere.clone())]);
    assert_eq!(
        refusals(&elsewhere, &in_staging),
        [
            "spec.cidrs[0]: 10.20.0.0/24 is already routed by NetworkRoute blog/lan in VirtualNetwork staging; remove it there first"
        ]
    );
}

#[test]
fn the_default_networks_of_two_known_accounts_are_two_networks() {
    let mut view = view_with(vec![stored(
        "blog",
        "lan",
        spec(
            json!({"tunnelRef": {"name": "far"}, "cidrs": ["10.20.0.0/24"], "hostnames": ["db.internal"]}),
        ),
    )]);
    // Its tunnel is not known: it may be in the same account.
    assert_eq!(
        refusals(&entries(&["10.20.0.0/24"], &["db.internal"]), &view).len(),
        2
    );
    view.tunnels
        .push(tunnel(TunnelKind::Tunnel, "blog", "far", OTHER_ACCOUNT));
    no_refusal(&entries(&["10.20.0.0/24"], &["db.internal"]), &view);
}

#[test]
fn an_overlapping_range_in_the_same_network_is_refused_in_any_namespace() {
    for namespace in ["blog", "shop"] {
        let view = view_with(vec![stored(
            namespace,
            "wide",
            entries(&["10.20.0.0/16"], &[]),
        )]);
        assert_eq!(
            refusals(&entries(&["10.20.5.0/24"], &[]), &view),
            [format!(
                "spec.cidrs[0]: 10.20.5.0/24 overlaps 10.20.0.0/16, routed by NetworkRoute {namespace}/wide in the account's default network: Cloudflare routes by longest prefix, so 10.20.5.0/24 would take the traffic of its addresses from the route of 10.20.0.0/16; route ranges that do not overlap, or put one in another VirtualNetwork"
            )]
        );
        no_refusal(&entries(&["10.21.0.0/24"], &[]), &view);
    }
    let narrow = view_with(vec![stored("blog", "db", entries(&["10.20.5.7/32"], &[]))]);
    assert_eq!(
        refusals(&entries(&["10.20.0.0/16"], &[]), &narrow),
        [
            "spec.cidrs[0]: 10.20.0.0/16 overlaps 10.20.5.7/32, routed by NetworkRoute blog/db in the account's default network: Cloudflare routes by longest prefix, so 10.20.5.7/32 would take the traffic of its addresses from the route of 10.20.0.0/16; route ranges that do not overlap, or put one in another VirtualNetwork"
        ]
    );
}

#[test]
fn a_hostname_another_namespace_routes_is_refused_in_any_network_of_the_account() {
    let view = view_with(vec![stored("blog", "lan", entries(&[], &["DB.Internal."]))]);
    let elsewhere = spec(
        json!({"tunnelRef": {"name": "edge"}, "virtualNetworkRef": {"name": "staging"}, "hostnames": ["*.db.internal"]}),
    );
    assert_eq!(
        refusals(&elsewhere, &view),
        [
            "spec.hostnames[0]: db.internal is already routed by NetworkRoute blog/lan: a private hostname is routed once per account, in every network; remove it there first"
        ]
    );
    no_refusal(&entries(&[], &["cache.internal"]), &view);
}

#[test]
fn the_route_itself_and_routes_being_deleted_claim_nothing() {
    let mut going = NetworkRoute::new("old", entries(&["10.20.0.0/24"], &[]));
    going.metadata.namespace = Some("blog".into());
    going.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        jiff::Timestamp::UNIX_EPOCH,
    ));
    let view = view_with(vec![
        stored("shop", "lan", entries(&["10.20.0.0/24"], &[])),
        Arc::new(going),
    ]);
    no_refusal(&entries(&["10.20.0.0/24"], &[]), &view);
    let other = validate(&entries(&["10.20.0.0/24"], &[]), "shop", "lan2", &view);
    assert!(
        !other.is_allowed(),
        "another name in the namespace is another route"
    );
}

#[test]
fn more_routes_than_an_account_holds_is_a_warning() {
    let big = |offset: usize| {
        let list: Vec<String> = (0..200)
            .map(|i| format!("10.{}.{}.0/24", 200 + offset, i))
            .collect();
        spec(json!({"tunnelRef": {"name": "edge"}, "cidrs": list}))
    };
    // Four stored routes of 200 entries and one of 199: 999, plus one asked for is 1,000.
    let mut routes: Vec<Arc<NetworkRoute>> = (0..4)
        .map(|i| stored("blog", &format!("r{i}"), big(i)))
        .collect();
    let mut last = big(4);
    last.cidrs.pop();
    routes.push(stored("blog", "r4", last));
    let mut view = view_with(routes);
    view.tunnels
        .push(tunnel(TunnelKind::Tunnel, "blog", "edge", ACCOUNT));
    let one = entries(&["192.168.0.0/24"], &[]);
    assert!(judged(&one, &view).warnings.is_empty());
    let two = entries(&["192.168.0.0/24"], &["db.internal"]);
    assert_eq!(
        judged(&two, &view).warnings,
        [format!(
            "spec: the NetworkRoutes through tunnels of account {ACCOUNT} ask for 1001 private routes (one per CIDR, Service and hostname), more than the 1000 Cloudflare holds in one account: the routes past the limit are refused and their NetworkRoutes report CloudflareError; route wider CIDRs, fewer entries, or use tunnels of another account"
        )]
    );
    // Routes through another account's tunnel are not counted.
    view.tunnels.retain(|t| t.identity.namespace != "blog");
    view.tunnels
        .push(tunnel(TunnelKind::Tunnel, "blog", "edge", OTHER_ACCOUNT));
    assert!(judged(&two, &view).warnings.is_empty());
    // With the tunnel's account unknown, every NetworkRoute counts.
    let unknown = spec(
        json!({"tunnelRef": {"name": "new"}, "cidrs": ["192.168.0.0/24"], "hostnames": ["db.internal"]}),
    );
    let warnings = judged(&unknown, &view).warnings;
    assert!(
        warnings.iter().any(|w| w.starts_with("spec: the NetworkRoutes known here (their accounts are not known, so all are counted) ask for 1001 private routes")),
        "{warnings:?}"
    );
}

#[test]
fn a_virtual_network_not_known_or_in_another_account_is_a_warning() {
    let mut view = view_with(Vec::new());
    let named = spec(
        json!({"tunnelRef": {"name": "edge"}, "virtualNetworkRef": {"name": "staging"}, "cidrs": ["10.0.0.0/24"]}),
    );
    let verdict = judged(&named, &view);
    assert!(verdict.is_allowed());
    assert_eq!(
        verdict.warnings,
        [
            "spec.virtualNetworkRef: VirtualNetwork staging is not known yet; the NetworkRoute reports VirtualNetworkNotFound until it exists"
        ]
    );
    let network = |account: &str| {
        let spec = serde_json::from_value(json!({"name": "staging", "cloudflare": {"accountId": account, "secret": "cloudflare"}}))
            .unwrap_or_else(|e| panic!("network: {e}"));
        Arc::new(VirtualNetwork::new("staging", spec))
    };
    view.virtual_networks = vec![network(OTHER_ACCOUNT)];
    assert_eq!(
        judged(&named, &view).warnings,
        [format!(
            "spec.virtualNetworkRef: VirtualNetwork staging is in account {OTHER_ACCOUNT} and Tunnel shop/edge in account {ACCOUNT}: a route goes through a tunnel of its network's account, so the NetworkRoute reports AccountsDiffer; use a tunnel and a network of one account"
        )]
    );
    view.virtual_networks = vec![network(&ACCOUNT.to_ascii_uppercase())];
    assert!(judged(&named, &view).warnings.is_empty());
}
