//! Hostname routes round-tripped: stored normalised, listed by a part of the name, deleted
//! softly.
use cftunnel_cloudflare::{HostnameRouteFilter, HostnameRouteUpdate, NewHostnameRoute};
use cftunnel_sim::Operation;

use crate::harness::{Documents, Env, OURS, check_log, operations};

#[tokio::test]
async fn every_hostname_route_call_round_trips_and_validates() {
    let Env {
        sim,
        cf,
        account,
        office,
        lab,
    } = Env::with_tunnels().await;
    let wildcard = cf
        .create_hostname_route(
            &account,
            &NewHostnameRoute::new("*.Internal.Local", &office).with_comment(OURS),
        )
        .await
        .expect("create hostname route");
    assert_eq!(
        (wildcard.hostname.as_str(), wildcard.tunnel_name.as_deref()),
        ("internal.local", Some("office"))
    );
    let db = cf
        .create_hostname_route(&account, &NewHostnameRoute::new("db.corp", &lab))
        .await
        .expect("second hostname route");
    let got = cf
        .get_hostname_route(&account, &db.id)
        .await
        .expect("get hostname route");
    assert_eq!(got, db);
    let updated = cf
        .update_hostname_route(
            &account,
            &db.id,
            &HostnameRouteUpdate {
                comment: Some(OURS.into()),
                tunnel_id: Some(office.clone()),
                ..HostnameRouteUpdate::default()
            },
        )
        .await
        .expect("update hostname route");
    assert_eq!(
        (updated.comment.as_str(), updated.tunnel_id.as_str()),
        (OURS, &*office)
    );
    let by_part = cf
        .list_hostname_routes(
            &account,
            &HostnameRouteFilter {
                hostname: Some("INTERNAL".into()),
                ..HostnameRouteFilter::default()
            },
        )
        .await
        .expect("by part of the hostname");
    assert_eq!(by_part, std::slice::from_ref(&wildcard));
    let through_office = cf
        .list_hostname_routes(&account, &HostnameRouteFilter::through_tunnel(&office))
        .await
        .expect("hostname routes by tunnel");
    assert_eq!(through_office.len(), 2);
    let existing = cf
        .list_hostname_routes(
            &account,
            &HostnameRouteFilter {
                existed_at: Some(jiff::Timestamp::now()),
                comment: Some(OURS.into()),
                ..HostnameRouteFilter::default()
            },
        )
        .await
        .expect("existing now, ours");
    assert_eq!(existing.len(), 2);

    // Deletes are soft: gone from the lists unless deleted ones are asked for.
    cf.delete_hostname_route(&account, &db.id)
        .await
        .expect("delete hostname route");
    assert!(
        cf.get_hostname_route(&account, &db.id)
            .await
            .expect("a deleted route still answers")
            .is_deleted()
    );
    let deleted = HostnameRouteFilter {
        is_deleted: Some(true),
        ..HostnameRouteFilter::default()
    };
    let gone = cf
        .list_hostname_routes(&account, &deleted)
        .await
        .expect("deleted hostname routes");
    assert_eq!(gone.iter().map(|r| &*r.id).collect::<Vec<_>>(), [&*db.id]);
    assert_eq!(
        cf.list_hostname_routes(&account, &HostnameRouteFilter::default())
            .await
            .expect("live hostname routes"),
        [wildcard]
    );

    let seen = check_log(&Documents::load(), &sim.request_log());
    assert_eq!(
        seen,
        operations(Operation::is_hostname_routes),
        "every hostname route call is exercised"
    );
}
