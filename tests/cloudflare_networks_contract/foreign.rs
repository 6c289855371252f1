//! Objects someone else made on the account, and deletes nobody asked cftunnel for: the
//! simulator's controls store and delete them without a call, and the client sees them as
//! Cloudflare would show them.
use cftunnel_cloudflare::{
    HostnameRouteFilter, IpRouteFilter, NewHostnameRoute, NewIpRoute, VirtualNetworkFilter,
};
use serde_json::json;

use crate::harness::{Documents, Env, OURS, check_log, client, networks_of};

#[tokio::test]
async fn objects_made_or_deleted_behind_the_operators_back_are_seen_as_they_are() {
    let Env {
        sim,
        cf,
        account,
        office,
        lab,
    } = Env::with_tunnels().await;
    // Someone else's route holds the range: the create is refused and the lookup shows whose.
    let theirs = sim
        .put_ip_route(json!({"network": "192.168.0.0/16", "tunnel_id": lab, "comment": "vpn"}))
        .expect("their route");
    let refused = cf
        .create_ip_route(
            &account,
            &NewIpRoute::new("192.168.0.0/16", &office).with_comment(OURS),
        )
        .await
        .expect_err("the range is taken");
    assert!(refused.is_route_exists(), "{refused}");
    let default_id = sim.default_virtual_network_id().expect("default network");
    let holder = cf
        .list_ip_routes(
            &account,
            &IpRouteFilter::exact("192.168.0.0/16", &default_id),
        )
        .await
        .expect("lookup");
    assert_eq!(
        holder
            .iter()
            .map(|r| (&*r.id, &*r.comment))
            .collect::<Vec<_>>(),
        [(&*theirs.id, "vpn")]
    );
    // Deleted in the dashboard: the range is free again.
    assert!(sim.delete_route_out_of_band(&theirs.id));
    assert!(!sim.delete_route_out_of_band(&theirs.id), "already deleted");
    cf.create_ip_route(
        &account,
        &NewIpRoute::new("192.168.0.0/16", &office).with_comment(OURS),
    )
    .await
    .expect("the range is free");

    // Their network, deleted with its routes behind our back.
    let network = sim
        .put_virtual_network(json!({"name": "theirs", "comment": "not ours"}))
        .expect("their network");
    let route = sim
        .put_ip_route(json!({"network": "172.16.0.0/12", "tunnel_id": lab,
            "virtual_network_id": network.id}))
        .expect("their route in it");
    assert!(sim.delete_virtual_network_out_of_band(&network.id));
    assert!(
        !sim.delete_virtual_network_out_of_band(&default_id),
        "the default stays"
    );
    let hostname = sim
        .put_hostname_route(json!({"hostname": "wiki.corp", "tunnel_id": lab}))
        .expect("their hostname route");
    assert!(sim.delete_route_out_of_band(&hostname.id));
    let live = cf
        .list_ip_routes(&account, &IpRouteFilter::default())
        .await
        .expect("live routes");
    assert_eq!(networks_of(&live), ["192.168.0.0/16"]);
    assert!(!live.iter().any(|r| r.id == route.id));
    assert!(
        cf.list_virtual_networks(&account, &VirtualNetworkFilter::named("theirs"))
            .await
            .expect("by name")
            .is_empty()
    );
    assert!(
        cf.list_hostname_routes(&account, &HostnameRouteFilter::default())
            .await
            .expect("hostname routes")
            .is_empty()
    );
    // A second client with the same token is another tool on the account: its calls are the
    // API's, logged and checked like the operator's.
    let other = client(&sim);
    other
        .create_hostname_route(&account, &NewHostnameRoute::new("wiki.corp", &lab))
        .await
        .expect("created by another tool");
    check_log(&Documents::load(), &sim.request_log());
}
