//! Contract between the Cloudflare client, the simulator and Cloudflare's private-network API:
//! every virtual network, IP route and hostname route operation is round-tripped client →
//! simulator, and every request the client sends and every answer the simulator gives,
//! refusals included, validates against its document: the networks subset
//! (`tests/data/cloudflare-openapi-networks-subset.json`) for virtual networks and IP routes,
//! the hostname routes document (`tests/data/cloudflare-openapi-hostname-routes.json`, written
//! down from Cloudflare's generated SDKs) for hostname routes.
#[path = "cloudflare_networks_contract/foreign.rs"]
mod foreign;
#[path = "cloudflare_networks_contract/harness.rs"]
mod harness;
#[path = "cloudflare_networks_contract/hostname_routes.rs"]
mod hostname_routes;
#[allow(dead_code)] // the DNS and tunnel contract test uses the rest of it
mod openapi;
#[path = "cloudflare_networks_contract/refusals.rs"]
mod refusals;
#[path = "cloudflare_networks_contract/validators.rs"]
mod validators;

use std::collections::BTreeSet;

use cftunnel_cloudflare::{
    HostnameRouteFilter, IpRoute, IpRouteFilter, IpRouteUpdate, NewIpRoute, NewVirtualNetwork,
    VirtualNetworkFilter, VirtualNetworkUpdate,
};
use cftunnel_sim::Operation;
use harness::{Documents, Env, OURS, check_log, networks_of, operations};
use serde_json::{Value, json};

const NETWORKS: &str = include_str!("data/cloudflare-openapi-networks-subset.json");
const HOSTNAME_ROUTES: &str = include_str!("data/cloudflare-openapi-hostname-routes.json");

fn operation_ids(document: &str) -> BTreeSet<String> {
    let spec: Value = serde_json::from_str(document).expect("document");
    spec["paths"]
        .as_object()
        .expect("paths")
        .values()
        .flat_map(|item| item.as_object().expect("path item").values())
        .filter_map(|op| op["operationId"].as_str().map(str::to_string))
        .collect()
}

/// The `operationId`s of the operations `filter` picks.
fn served(filter: fn(&Operation) -> bool) -> BTreeSet<String> {
    operations(filter)
        .iter()
        .map(|op| op.operation_id().expect("operation id").to_string())
        .collect()
}

#[test]
fn the_network_operations_are_those_of_the_two_documents() {
    let networks = operation_ids(NETWORKS);
    let served_networks = served(Operation::is_networks);
    assert_eq!(served_networks.len(), 8);
    let not_served: BTreeSet<&str> = networks
        .iter()
        .filter(|id| !served_networks.contains(*id))
        .map(String::as_str)
        .collect();
    // The lookup by IP is not needed; the configuration calls are the tunnel ones, served and
    // checked against the main subset by the DNS and tunnel contract test.
    assert_eq!(
        not_served,
        BTreeSet::from([
            "tunnel-route-get-tunnel-route-by-ip",
            "cloudflare-tunnel-configuration-get-configuration",
            "cloudflare-tunnel-configuration-put-configuration",
        ])
    );
    assert_eq!(
        served(Operation::is_hostname_routes),
        operation_ids(HOSTNAME_ROUTES)
    );
    let docs = Documents::load();
    for op in operations(|op| op.is_networks() || op.is_hostname_routes()) {
        let id = op.operation_id().expect("operation id");
        assert!(docs.of(op).has_operation(id), "{op:?} → {id}");
        assert!(!op.is_access() && !op.is_certificates(), "{op:?}");
    }
    assert!(
        !docs
            .networks
            .has_operation("zero-trust-networks-route-hostname-list")
    );
}

#[tokio::test]
async fn every_virtual_network_and_ip_route_call_round_trips_and_validates() {
    let Env {
        sim,
        cf,
        account,
        office,
        lab,
    } = Env::with_tunnels().await;
    let before = jiff::Timestamp::now();

    let networks = cf
        .list_virtual_networks(&account, &VirtualNetworkFilter::default())
        .await
        .expect("list networks");
    let default = networks
        .iter()
        .find(|n| n.is_default_network)
        .expect("the account starts with its default network");
    assert_eq!((networks.len(), default.name.as_str()), (1, "default"));
    let default_id = default.id.clone();

    let staging = cf
        .create_virtual_network(
            &account,
            &NewVirtualNetwork::new("staging").with_comment(OURS),
        )
        .await
        .expect("create network");
    assert!(!staging.is_default_network && !staging.is_deleted());
    let renamed = cf
        .update_virtual_network(
            &account,
            &staging.id,
            &VirtualNetworkUpdate {
                name: Some("staging-eu".into()),
                ..VirtualNetworkUpdate::default()
            },
        )
        .await
        .expect("rename network");
    assert_eq!(
        (renamed.name.as_str(), renamed.comment.as_str()),
        ("staging-eu", OURS)
    );
    let found = cf
        .list_virtual_networks(&account, &VirtualNetworkFilter::named("staging-eu"))
        .await
        .expect("by name");
    assert_eq!(found, [renamed]);

    // Promoting a network demotes the old default; promoting the old one back restores it.
    let promote = |yes| VirtualNetworkUpdate {
        is_default_network: Some(yes),
        ..VirtualNetworkUpdate::default()
    };
    cf.update_virtual_network(&account, &staging.id, &promote(true))
        .await
        .expect("promote");
    let defaults = cf
        .list_virtual_networks(
            &account,
            &VirtualNetworkFilter {
                is_default: Some(true),
                ..VirtualNetworkFilter::default()
            },
        )
        .await
        .expect("defaults");
    assert_eq!(defaults.len(), 1);
    assert_eq!(defaults[0].id, staging.id);
    cf.update_virtual_network(&account, &default_id, &promote(true))
        .await
        .expect("promote back");
    assert_eq!(sim.default_virtual_network_id(), Some(default_id.clone()));

    // One range in two networks; a route without a network goes to the default one.
    let in_default = cf
        .create_ip_route(
            &account,
            &NewIpRoute::new("10.0.0.0/8", &office).with_comment(OURS),
        )
        .await
        .expect("route in the default network");
    assert_eq!(in_default.virtual_network_id.as_deref(), Some(&*default_id));
    let in_staging = cf
        .create_ip_route(
            &account,
            &NewIpRoute::new("10.0.0.0/8", &office).in_virtual_network(&staging.id),
        )
        .await
        .expect("the same range in another network");
    assert_eq!(in_staging.comment, "");
    let v6 = cf
        .create_ip_route(
            &account,
            &NewIpRoute::new("fd00::/8", &lab)
                .in_virtual_network(&staging.id)
                .with_comment(OURS),
        )
        .await
        .expect("an IPv6 route");

    let exact = cf
        .list_ip_routes(&account, &IpRouteFilter::exact("10.0.0.0/8", &staging.id))
        .await
        .expect("exact lookup");
    assert_eq!(exact.len(), 1);
    assert_eq!(exact[0].id, in_staging.id);
    assert_eq!(
        (
            exact[0].tunnel_name.as_deref(),
            exact[0].virtual_network_name.as_deref(),
            exact[0].tun_type.as_deref()
        ),
        (Some("office"), Some("staging-eu"), Some("cfd_tunnel"))
    );
    let through_office = cf
        .list_ip_routes(&account, &IpRouteFilter::through_tunnel(&office))
        .await
        .expect("by tunnel");
    assert_eq!(networks_of(&through_office), ["10.0.0.0/8", "10.0.0.0/8"]);
    let ours = cf
        .list_ip_routes(
            &account,
            &IpRouteFilter {
                comment: Some(OURS.into()),
                ..IpRouteFilter::default()
            },
        )
        .await
        .expect("by comment");
    assert_eq!(networks_of(&ours), ["10.0.0.0/8", "fd00::/8"]);
    let within = cf
        .list_ip_routes(
            &account,
            &IpRouteFilter {
                network_subset: Some("10.0.0.0/7".into()),
                virtual_network_id: Some(staging.id.clone()),
                ..IpRouteFilter::default()
            },
        )
        .await
        .expect("within a range");
    assert_eq!(networks_of(&within), ["10.0.0.0/8"]);
    let containing = cf
        .list_ip_routes(
            &account,
            &IpRouteFilter {
                network_superset: Some("fd00:1::/32".into()),
                ..IpRouteFilter::default()
            },
        )
        .await
        .expect("containing a range");
    assert_eq!(networks_of(&containing), ["fd00::/8"]);
    let earlier = cf
        .list_ip_routes(
            &account,
            &IpRouteFilter {
                existed_at: Some(before),
                ..IpRouteFilter::default()
            },
        )
        .await
        .expect("existed before");
    assert!(earlier.is_empty(), "{earlier:?}");

    let moved = cf
        .update_ip_route(
            &account,
            &in_staging.id,
            &IpRouteUpdate {
                tunnel_id: Some(lab.clone()),
                comment: Some(OURS.into()),
                ..IpRouteUpdate::default()
            },
        )
        .await
        .expect("update route");
    assert_eq!(
        (
            moved.id.as_str(),
            moved.tunnel_id.as_str(),
            moved.comment.as_str()
        ),
        (in_staging.id.as_str(), lab.as_str(), OURS)
    );

    for route in [&in_staging, &v6] {
        cf.delete_ip_route(&account, &route.id)
            .await
            .expect("delete route");
    }
    let live = cf
        .list_ip_routes(&account, &IpRouteFilter::default())
        .await
        .expect("live routes");
    assert_eq!(live.len(), 1);
    assert_eq!(live[0].id, in_default.id);
    let deleted_routes = cf
        .list_ip_routes(
            &account,
            &IpRouteFilter {
                is_deleted: Some(true),
                ..IpRouteFilter::default()
            },
        )
        .await
        .expect("deleted routes");
    assert!(deleted_routes.iter().all(IpRoute::is_deleted));
    assert_eq!(deleted_routes.len(), 2);

    // Its routes gone, the network can go too.
    cf.delete_virtual_network(&account, &staging.id)
        .await
        .expect("delete network");
    let deleted_networks = cf
        .list_virtual_networks(
            &account,
            &VirtualNetworkFilter {
                is_deleted: Some(true),
                ..VirtualNetworkFilter::default()
            },
        )
        .await
        .expect("deleted networks");
    assert_eq!(deleted_networks.len(), 1);
    assert!(deleted_networks[0].is_deleted());
    assert_eq!(
        cf.list_virtual_networks(&account, &VirtualNetworkFilter::default())
            .await
            .expect("live networks")
            .len(),
        1
    );

    let seen = check_log(&Documents::load(), &sim.request_log());
    assert_eq!(
        seen,
        operations(Operation::is_networks),
        "every virtual network and IP route call is exercised"
    );
}

#[tokio::test]
async fn the_route_lists_walk_every_page() {
    let Env {
        sim,
        cf,
        account,
        office,
        ..
    } = Env::with_tunnels().await;
    for i in 0..5 {
        let route = json!({"network": format!("10.{i}.0.0/16"), "tunnel_id": office});
        sim.put_ip_route(route).expect("seeded route");
        let hostname = json!({"hostname": format!("h{i}.corp"), "tunnel_id": office});
        sim.put_hostname_route(hostname)
            .expect("seeded hostname route");
    }
    let routes = cf
        .list_ip_routes(
            &account,
            &IpRouteFilter {
                per_page: Some(2),
                ..IpRouteFilter::through_tunnel(&office)
            },
        )
        .await
        .expect("routes");
    assert_eq!(routes.len(), 5);
    let hostnames = cf
        .list_hostname_routes(
            &account,
            &HostnameRouteFilter {
                per_page: Some(2),
                ..HostnameRouteFilter::default()
            },
        )
        .await
        .expect("hostname routes");
    assert_eq!(hostnames.len(), 5);
    let queries: Vec<String> = sim.request_log().iter().map(|l| l.query.clone()).collect();
    let ip = |page| format!("tunnel_id={office}&is_deleted=false&page={page}&per_page=2");
    let host = |page| format!("is_deleted=false&page={page}&per_page=2");
    assert_eq!(queries, [ip(1), ip(2), ip(3), host(1), host(2), host(3)]);
    check_log(&Documents::load(), &sim.request_log());
}
