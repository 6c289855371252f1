//! Refusals: a range taken in a network, a hostname taken, a network in use or the default
//! one, unknown objects, the account's route limit, malformed bodies and queries, rate limits
//! and outages. Each answer validates against its document.
use cftunnel_cloudflare::{
    CODE_ROUTE_NOT_FOUND, NewHostnameRoute, NewIpRoute, NewVirtualNetwork, VirtualNetworkUpdate,
};
use cftunnel_sim::{Fault, Operation};
use http::Method;
use serde_json::json;

use crate::harness::{Documents, Env, check_answers, check_log, raw};

#[tokio::test]
async fn the_account_route_limit_counts_both_kinds_of_route() {
    let Env {
        sim,
        cf,
        account,
        office,
        ..
    } = Env::with_tunnels().await;
    assert_eq!(sim.route_limit(), 1000);
    // Cloudflare's 1,000, filled cheaply: half IP routes, half hostname routes.
    for i in 0..500 {
        let cidr = format!("10.{}.{}.0/24", i / 256, i % 256);
        sim.put_ip_route(json!({"network": cidr, "tunnel_id": office}))
            .expect("route");
        sim.put_hostname_route(json!({"hostname": format!("h{i}.corp"), "tunnel_id": office}))
            .expect("hostname route");
    }
    assert!(
        sim.put_ip_route(json!({"network": "10.9.0.0/24", "tunnel_id": office}))
            .is_none(),
        "the 1,001st route"
    );
    let full = cf
        .create_hostname_route(&account, &NewHostnameRoute::new("one-more.corp", &office))
        .await
        .expect_err("the account is full");
    assert!(
        full.is_route_limit_reached() && !full.is_hostname_route_exists(),
        "{full}"
    );
    let full = cf
        .create_ip_route(&account, &NewIpRoute::new("10.9.0.0/24", &office))
        .await
        .expect_err("the account is full");
    assert!(
        full.is_route_limit_reached() && !full.is_route_exists(),
        "{full}"
    );
    let log = sim.request_log();
    assert_eq!(log.iter().map(|l| l.status).collect::<Vec<_>>(), [400, 400]);
    check_log(&Documents::load(), &log);

    // A lower limit, as a test sets it; a delete of either kind makes room.
    let Env {
        sim,
        cf,
        account,
        office,
        ..
    } = Env::with_tunnels().await;
    sim.set_route_limit(2);
    let ip = cf
        .create_ip_route(&account, &NewIpRoute::new("10.0.0.0/8", &office))
        .await
        .expect("first route");
    cf.create_hostname_route(&account, &NewHostnameRoute::new("a.corp", &office))
        .await
        .expect("second route");
    let full = cf
        .create_ip_route(&account, &NewIpRoute::new("10.1.0.0/16", &office))
        .await
        .expect_err("limit of two");
    assert!(full.is_route_limit_reached(), "{full}");
    cf.delete_ip_route(&account, &ip.id).await.expect("delete");
    cf.create_hostname_route(&account, &NewHostnameRoute::new("b.corp", &office))
        .await
        .expect("room again");
    let log = sim.request_log();
    let statuses: Vec<u16> = log.iter().map(|l| l.status).collect();
    assert_eq!(statuses, [200, 200, 400, 200, 200]);
    check_log(&Documents::load(), &log);
}

#[tokio::test]
async fn refusals_validate_against_the_documents() {
    let Env {
        sim,
        cf,
        account,
        office,
        lab,
    } = Env::with_tunnels().await;
    let default_id = sim.default_virtual_network_id().expect("default network");
    let staging = cf
        .create_virtual_network(&account, &NewVirtualNetwork::new("staging"))
        .await
        .expect("network"); // 200
    let taken = cf
        .create_virtual_network(&account, &NewVirtualNetwork::new("staging"))
        .await
        .expect_err("the name is taken"); // 409
    assert!(taken.is_virtual_network_name_exists(), "{taken}");

    let route = NewIpRoute::new("10.0.0.0/8", &office).in_virtual_network(&staging.id);
    cf.create_ip_route(&account, &route).await.expect("route"); // 200
    let duplicate = cf
        .create_ip_route(&account, &route.clone().with_comment("again"))
        .await
        .expect_err("the range is routed in this network"); // 409
    assert!(
        duplicate.is_route_exists() && duplicate.status() == Some(409),
        "{duplicate}"
    );
    cf.create_ip_route(&account, &NewIpRoute::new("10.0.0.0/8", &lab))
        .await
        .expect("the same range in the default network"); // 200

    cf.create_hostname_route(&account, &NewHostnameRoute::new("db.corp", &office))
        .await
        .expect("hostname route"); // 200
    let hostname_taken = cf
        .create_hostname_route(&account, &NewHostnameRoute::new("*.DB.corp.", &lab))
        .await
        .expect_err("the hostname is routed already, whatever its spelling"); // 409
    assert!(
        hostname_taken.is_hostname_route_exists() && !hostname_taken.is_route_exists(),
        "{hostname_taken}"
    );

    let in_use = cf
        .delete_virtual_network(&account, &staging.id)
        .await
        .expect_err("a route uses it"); // 400
    assert!(in_use.is_virtual_network_in_use(), "{in_use}");
    let keep_default = cf
        .update_virtual_network(
            &account,
            &default_id,
            &VirtualNetworkUpdate {
                is_default_network: Some(false),
                ..VirtualNetworkUpdate::default()
            },
        )
        .await
        .expect_err("the default stays until another is made the default"); // 400
    assert_eq!(keep_default.status(), Some(400), "{keep_default}");
    let default_delete = cf
        .delete_virtual_network(&account, &default_id)
        .await
        .expect_err("the default cannot go"); // 400
    assert_eq!(default_delete.status(), Some(400), "{default_delete}");

    let unknown = "6ff42ae2-765d-4adf-8112-31c55c1551ef";
    let gone = cf
        .delete_ip_route(&account, unknown)
        .await
        .expect_err("no such route"); // 404
    assert!(
        gone.is_not_found() && gone.has_code(CODE_ROUTE_NOT_FOUND),
        "{gone}"
    );
    let gone = cf
        .delete_hostname_route(&account, unknown)
        .await
        .expect_err("no such hostname route"); // 404
    assert!(gone.is_not_found(), "{gone}");
    let gone = cf
        .delete_virtual_network(&account, unknown)
        .await
        .expect_err("no such network"); // 404
    assert!(gone.is_not_found(), "{gone}");

    let routes = format!("/accounts/{account}/teamnet/routes");
    let networks = format!("/accounts/{account}/teamnet/virtual_networks");
    let hostnames = format!("/accounts/{account}/zerotrust/routes/hostname");
    for body in [
        json!({"tunnel_id": office}),                            // no network
        json!({"network": "10.0.0.1/8", "tunnel_id": office}),   // host bits set
        json!({"network": "10.2.0.0/16", "tunnel_id": unknown}), // no such tunnel
        json!({"network": "10.2.0.0/16", "tunnel_id": office, "virtual_network_id": unknown}),
        json!({"network": "10.2.0.0/16", "tunnel_id": office, "comment": "x".repeat(101)}),
    ] {
        raw(&sim, Method::POST, &routes, Some(body)).await; // 400
    }
    raw(
        &sim,
        Method::POST,
        &networks,
        Some(json!({"comment": "no name"})),
    )
    .await; // 400
    raw(
        &sim,
        Method::POST,
        &hostnames,
        Some(json!({"hostname": "a.*.corp", "tunnel_id": office})),
    )
    .await; // 400
    raw(
        &sim,
        Method::POST,
        &hostnames,
        Some(json!({"tunnel_id": office})),
    )
    .await; // 400
    raw(
        &sim,
        Method::GET,
        &format!("{routes}?existed_at=yesterday"),
        None,
    )
    .await; // 400
    raw(
        &sim,
        Method::GET,
        &format!("{networks}?is_deleted=maybe"),
        None,
    )
    .await; // 400
    raw(&sim, Method::GET, &format!("{hostnames}/{unknown}"), None).await; // 404
    sim.inject(Operation::ListIpRoutes, Fault::rate_limit_next(1, 5));
    raw(&sim, Method::GET, &routes, None).await; // 429
    sim.inject(Operation::CreateHostnameRoute, Fault::fail_next(1, 503));
    let failed = cf
        .create_hostname_route(&account, &NewHostnameRoute::new("wiki.corp", &office))
        .await
        .expect_err("503");
    assert!(failed.is_transient(), "{failed}");

    let log = sim.request_log();
    let statuses: Vec<u16> = log.iter().map(|l| l.status).collect();
    assert_eq!(
        statuses,
        [
            200, 409, 200, 409, 200, 200, 409, 400, 400, 400, 404, 404, 404, 400, 400, 400, 400,
            400, 400, 400, 400, 400, 400, 404, 429, 503
        ]
    );
    check_answers(&Documents::load(), &log);
}

/// A tunnel that private routes point at: its delete without `cascade` is refused (1023, as
/// reported of Cloudflare), with `cascade` its routes of both kinds go with it.
#[tokio::test]
async fn a_tunnel_with_routes_goes_only_with_cascade_and_takes_them() {
    let Env {
        sim,
        cf,
        account,
        office,
        lab,
    } = Env::with_tunnels().await;
    cf.create_ip_route(&account, &NewIpRoute::new("10.50.0.0/24", &office))
        .await
        .expect("route");
    cf.create_hostname_route(&account, &NewHostnameRoute::new("db.corp", &office))
        .await
        .expect("hostname route");
    cf.create_ip_route(&account, &NewIpRoute::new("10.51.0.0/24", &lab))
        .await
        .expect("another tunnel's route");
    let refused = cf
        .delete_tunnel(&account, &office, false)
        .await
        .expect_err("routes point at it");
    assert!(refused.is_tunnel_has_routes(), "{refused}");
    cf.delete_tunnel(&account, &office, true)
        .await
        .expect("deleted with cascade");
    let live: Vec<String> = sim
        .ip_routes()
        .into_iter()
        .filter(|r| r.deleted_at.is_none())
        .map(|r| r.network)
        .collect();
    assert_eq!(
        live,
        ["10.51.0.0/24"],
        "only the other tunnel's route is left"
    );
    assert!(sim.hostname_routes().iter().all(|r| r.deleted_at.is_some()));
}
