//! The private routes Gateways ask for: the backends of the TCPRoutes and UDPRoutes accepted
//! through them, as addresses and cluster DNS names, in the network the annotation names.
use serde_json::json;

use super::*;
use crate::dns::ClusterId;
use crate::private::{IpKey, desired_routes};
use crate::routes::gateway::l4_tests::{l4_world, tcp_route, udp_route};

const TUNNEL: &str = "11111111-1111-4111-8111-111111111111";

/// `l4_world` with a TCPRoute to `shop/postgres` and a UDPRoute to `shop/dns` on the Gateway
/// `shop/private`, and a TCPRoute on the HTTP Gateway `shop/web`, which takes none.
fn routes() -> L4Routes {
    let on = |gateway: &str, service: &str, port: i32| {
        json!({"parentRefs": [{"name": gateway}],
               "rules": [{"backendRefs": [{"name": service, "port": port}]}]})
    };
    L4Routes {
        tcp: vec![
            tcp_route("db", on("private", "postgres", 5432)),
            tcp_route("refused", on("web", "postgres", 5432)),
            tcp_route("missing", on("private", "nothing", 5432)),
        ],
        udp: vec![udp_route("dns", on("private", "dns", 53))],
    }
}

fn ip(cidr: &str) -> IpKey {
    IpKey {
        virtual_network_id: None,
        cidr: crate::private::Cidr::parse(cidr).unwrap_or_else(|e| panic!("{cidr}: {e}")),
    }
}

#[test]
fn a_gateways_accepted_routes_ask_for_their_backends_addresses_and_names() {
    let world = l4_world();
    let sources = gateway_network_sources(&world, &routes());
    // The HTTP Gateway has no TCP or UDP listener: it asks for nothing.
    assert_eq!(sources.len(), 1, "{sources:?}");
    let gateway = &sources[0];
    assert_eq!(
        gateway.owner(),
        Owner::new(OwnerKind::Gateway, "shop", "private")
    );
    assert_eq!(gateway.tunnel.to_string(), "ClusterTunnel edge");
    let source = &gateway.source;
    assert_eq!(
        source.created.map(|t| t.to_string()).as_deref(),
        Some("2024-05-01T00:00:00Z")
    );
    assert_eq!(
        source.spec.tunnel_ref.kind.as_deref(),
        Some("ClusterTunnel")
    );
    assert_eq!(source.spec.virtual_network_ref, None);
    let services: Vec<&str> = source
        .spec
        .services
        .iter()
        .map(|s| s.name.as_str())
        .collect();
    assert_eq!(services, ["shop/dns", "shop/postgres"]);
    assert_eq!(
        source.spec.hostnames,
        [
            "dns.shop.svc.cluster.local",
            "postgres.shop.svc.cluster.local"
        ]
    );

    // Fed to the planner with its tunnel resolved: each address a /32 or /128 in the default
    // network, each name a hostname route, all through the Gateway's tunnel.
    let mut resolved = source.clone();
    resolved.tunnel_id = Some(TUNNEL.into());
    let cluster = ClusterId::new("prod-eu").unwrap_or_else(|e| panic!("{e}"));
    let desired = desired_routes(&cluster, &[resolved]);
    let keys: Vec<&IpKey> = desired.ip.keys().collect();
    assert_eq!(
        keys,
        [
            &ip("10.96.0.10/32"),
            &ip("10.96.0.53/32"),
            &ip("fd00::53/128")
        ]
    );
    let hostnames: Vec<&str> = desired.hostnames.keys().map(String::as_str).collect();
    assert_eq!(
        hostnames,
        [
            "dns.shop.svc.cluster.local",
            "postgres.shop.svc.cluster.local"
        ]
    );
    assert!(
        desired
            .ip
            .values()
            .chain(desired.hostnames.values())
            .all(|r| r.tunnel_id.as_deref() == Some(TUNNEL))
    );
    assert!(desired.refusals.is_empty(), "{:?}", desired.refusals);
}

#[test]
fn the_annotation_names_the_virtual_network_and_a_gateway_without_routes_still_asks() {
    let mut world = l4_world();
    let private = world
        .gateways
        .iter_mut()
        .find(|g| g.metadata.name.as_deref() == Some("private"))
        .unwrap_or_else(|| panic!("no Gateway private"));
    std::sync::Arc::make_mut(private)
        .metadata
        .annotations
        .get_or_insert_default()
        .insert(ANNOTATION_VIRTUAL_NETWORK.into(), "prod".into());
    let sources = gateway_network_sources(&world, &L4Routes::default());
    assert_eq!(sources.len(), 1);
    let source = &sources[0].source;
    assert_eq!(
        source
            .spec
            .virtual_network_ref
            .as_ref()
            .map(|r| r.name.as_str()),
        Some("prod")
    );
    // No route accepted: nothing asked for, so the planner deletes what it made before.
    assert!(source.spec.services.is_empty() && source.spec.hostnames.is_empty());
}

#[test]
fn a_gateway_whose_tunnel_is_missing_asks_for_nothing() {
    let mut world = l4_world();
    world
        .tunnels
        .retain(|t| t.identity.name != "edge" || !t.identity.namespace.is_empty());
    assert!(gateway_network_sources(&world, &routes()).is_empty());
}
