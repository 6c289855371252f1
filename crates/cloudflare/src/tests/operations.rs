//! Paths, queries, bodies and pagination of the operations.
use axum::http::header::{AUTHORIZATION, CONTENT_TYPE};
use serde_json::json;

use super::*;
use crate::{
    CloudflareError, CommentFilter, ConfigSrc, DnsRecordFilter, DnsRecordType, NewDnsRecord,
    TokenStatus, TunnelFilter, TunnelToken, ZoneFilter,
};

fn query_param(seen: &Seen, key: &str) -> Option<String> {
    url::form_urlencoded::parse(seen.query.as_deref().unwrap_or("").as_bytes())
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.into_owned())
}

/// Serves `total` records in pages of the requested size.
fn paged_records(total: u32, with_total_pages: bool) -> (Router, Log) {
    fake(move |seen, _| {
        let page: u32 = query_param(seen, "page").unwrap().parse().unwrap();
        let per_page: u32 = query_param(seen, "per_page").unwrap().parse().unwrap();
        let first = (page - 1) * per_page;
        let items = (first..total.min(first + per_page))
            .map(|i| record_json(&format!("{i:032x}"), &format!("r{i}.example.com")))
            .collect();
        let pages = with_total_pages.then(|| total.div_ceil(per_page));
        ok_page(items, page, per_page, total, pages)
    })
}

/// Every record of the zone, listed 100 a page.
async fn list_by_hundred(router: axum::Router) -> Vec<crate::DnsRecord> {
    let filter = DnsRecordFilter {
        per_page: Some(100),
        ..Default::default()
    };
    client(router)
        .list_dns_records(ZONE, &filter)
        .await
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn pagination_walks_all_pages_and_stops_on_a_short_page() {
    let (router, log) = paged_records(250, false);
    let records = list_by_hundred(router).await;
    assert_eq!(records.len(), 250);
    assert_eq!(records[249].name, "r249.example.com");
    let pages: Vec<_> = log
        .all()
        .iter()
        .map(|s| query_param(s, "page").unwrap())
        .collect();
    assert_eq!(pages, ["1", "2", "3"]);
}

#[tokio::test(start_paused = true)]
async fn pagination_stops_at_total_pages() {
    let (router, log) = paged_records(300, true);
    let records = list_by_hundred(router).await;
    // 300 records fill three full pages: total_pages, not a short page, ends the walk.
    assert_eq!(records.len(), 300);
    assert_eq!(log.count(), 3);
}

#[tokio::test(start_paused = true)]
async fn dns_list_sends_filters_and_caps_page_size() {
    let (router, log) = paged_records(0, true);
    let filter = DnsRecordFilter {
        record_type: Some(DnsRecordType::Cname),
        content: Some(format!("{TUNNEL}.cfargotunnel.com")),
        comment: Some(CommentFilter::StartsWith("cftunnel ".into())),
        per_page: Some(50_000),
        ..Default::default()
    };
    assert!(
        client(router)
            .list_dns_records(ZONE, &filter)
            .await
            .unwrap()
            .is_empty()
    );
    let seen = &log.all()[0];
    assert_eq!(seen.path, format!("/zones/{ZONE}/dns_records"));
    assert_eq!(
        seen.query.as_deref(),
        Some(
            "type=CNAME&content=f70ff985-a4ef-4643-bbbc-4a0ed4fc8415.cfargotunnel.com&comment.startswith=cftunnel+&page=1&per_page=1000"
        )
    );
}

#[tokio::test(start_paused = true)]
async fn deletes_send_no_body() {
    let (router, log) = fake(|seen, _| {
        if seen.path.ends_with("/connections") {
            ok(json!({}))
        } else if seen.path.contains("dns_records") {
            ok(json!({"id": "abc"}))
        } else {
            let mut t = tunnel_json(TUNNEL, "blog");
            t["deleted_at"] = json!("2025-02-01T00:00:00Z");
            ok(t)
        }
    });
    let client = client(router);
    let deleted = client.delete_tunnel(ACCOUNT, TUNNEL, true).await.unwrap();
    assert!(deleted.is_deleted());
    client
        .clean_up_tunnel_connections(ACCOUNT, TUNNEL, Some("c-1"))
        .await
        .unwrap();
    client
        .clean_up_tunnel_connections(ACCOUNT, TUNNEL, None)
        .await
        .unwrap();
    client.delete_dns_record(ZONE, "abc").await.unwrap();
    let seen = log.all();
    assert_eq!(seen.len(), 4);
    for s in &seen {
        assert_eq!(s.method, Method::DELETE);
        assert!(s.body.is_empty(), "{} has a body", s.path);
        assert!(s.headers.get(CONTENT_TYPE).is_none());
    }
    assert_eq!(
        seen[0].path,
        format!("/accounts/{ACCOUNT}/cfd_tunnel/{TUNNEL}")
    );
    assert_eq!(seen[0].query.as_deref(), Some("cascade=true"));
    assert_eq!(seen[1].query.as_deref(), Some("client_id=c-1"));
    assert_eq!(seen[2].query, None);
    assert_eq!(seen[3].path, format!("/zones/{ZONE}/dns_records/abc"));
}

#[tokio::test(start_paused = true)]
async fn delete_without_cascade_sends_no_query() {
    let (router, log) = fake(|_, _| ok(tunnel_json(TUNNEL, "blog")));
    client(router)
        .delete_tunnel(ACCOUNT, TUNNEL, false)
        .await
        .unwrap();
    assert_eq!(log.all()[0].query, None);
}

#[tokio::test(start_paused = true)]
async fn record_writes_send_the_full_body() {
    let (router, log) = fake(|_, _| ok(record_json("r1", "app.example.com")));
    let client = client(router);
    let cname =
        NewDnsRecord::tunnel_cname("app.example.com", TUNNEL, Some("cftunnel default/t".into()));
    client.create_dns_record(ZONE, &cname).await.unwrap();
    client.update_dns_record(ZONE, "r1", &cname).await.unwrap();
    let txt = NewDnsRecord::txt("_managed.app.example.com", "\"v\"", None);
    client.patch_dns_record(ZONE, "r1", &txt).await.unwrap();
    let got = client.get_dns_record(ZONE, "r1").await.unwrap();
    assert_eq!(got.proxied, Some(true));
    let seen = log.all();
    let methods: Vec<_> = seen.iter().map(|s| s.method.clone()).collect();
    assert_eq!(
        methods,
        [Method::POST, Method::PUT, Method::PATCH, Method::GET]
    );
    let expected_cname = json!({"type": "CNAME", "name": "app.example.com",
        "content": format!("{TUNNEL}.cfargotunnel.com"), "ttl": 1, "proxied": true,
        "comment": "cftunnel default/t"});
    assert_eq!(body_json(&seen[0]), expected_cname);
    assert_eq!(body_json(&seen[1]), expected_cname);
    assert_eq!(
        body_json(&seen[2]),
        json!({"type": "TXT", "name": "_managed.app.example.com", "content": "\"v\"", "ttl": 1})
    );
    assert_eq!(seen[0].headers[CONTENT_TYPE], "application/json");
    assert!(seen[3].body.is_empty());
}

#[tokio::test(start_paused = true)]
async fn tunnel_list_walks_pages_with_filters() {
    let (router, log) = fake(|seen, _| {
        let page: u32 = query_param(seen, "page").unwrap().parse().unwrap();
        let items = if page == 1 {
            vec![tunnel_json(TUNNEL, "blog")]
        } else {
            vec![]
        };
        ok_page(items, page, 1, 1, None)
    });
    let client = client(router);
    let filter = TunnelFilter {
        per_page: Some(1),
        ..TunnelFilter::live_named("blog")
    };
    let tunnels = client.list_tunnels(ACCOUNT, &filter).await.unwrap();
    assert_eq!(tunnels.len(), 1);
    let seen = log.all();
    assert_eq!(seen.len(), 2);
    assert_eq!(
        seen[0].query.as_deref(),
        Some("name=blog&is_deleted=false&page=1&per_page=1")
    );
    assert_eq!(
        seen[1].query.as_deref(),
        Some("name=blog&is_deleted=false&page=2&per_page=1")
    );

    let found = client.find_live_tunnel(ACCOUNT, "blog").await.unwrap();
    assert_eq!(found.map(|t| t.id), Some(TUNNEL.to_owned()));
    assert_eq!(
        query_param(&log.all()[2], "per_page").as_deref(),
        Some("1000")
    );
}

#[tokio::test(start_paused = true)]
async fn token_endpoint_result_decodes_and_compares_secret_bytes() {
    let secret = [9u8; 32];
    let token = TunnelToken {
        account_tag: ACCOUNT.into(),
        tunnel_id: TUNNEL.into(),
        secret: crate::SecretString::new(base64::Engine::encode(
            &base64::engine::general_purpose::STANDARD,
            secret,
        )),
        endpoint: None,
    };
    let encoded = token.encode();
    let (router, log) = fake(move |_, _| ok(json!(encoded.clone())));
    let fetched = client(router).tunnel_token(ACCOUNT, TUNNEL).await.unwrap();
    let decoded = TunnelToken::decode(fetched.expose()).unwrap();
    assert_eq!(decoded.tunnel_id, TUNNEL);
    assert!(decoded.secret_matches(&secret));
    assert!(!decoded.secret_matches(&[8u8; 32]));
    assert_eq!(
        log.all()[0].path,
        format!("/accounts/{ACCOUNT}/cfd_tunnel/{TUNNEL}/token")
    );
}

#[tokio::test(start_paused = true)]
async fn verify_falls_back_to_the_account_endpoint_on_code_1000() {
    let (router, log) = fake(|seen, _| {
        if seen.path == "/user/tokens/verify" {
            fail(401, 1000, "Invalid API Token")
        } else {
            ok(json!({"id": "tok1", "status": "active"}))
        }
    });
    let client = client(router);
    let verified = client.verify_token(Some(ACCOUNT)).await.unwrap();
    assert_eq!(verified.status, TokenStatus::Active);
    let paths: Vec<_> = log.all().into_iter().map(|s| s.path).collect();
    assert_eq!(
        paths,
        [
            "/user/tokens/verify".to_owned(),
            format!("/accounts/{ACCOUNT}/tokens/verify")
        ]
    );
    // Without an account there is nothing to fall back to.
    let err = client.verify_token(None).await.unwrap_err();
    assert!(err.has_code(1000));
    assert_eq!(log.count(), 3);
}

#[tokio::test(start_paused = true)]
async fn zones_and_accounts_send_their_filters() {
    let (router, log) = fake(|seen, _| {
        if seen.path == "/zones" {
            ok_page(
                vec![
                    json!({"id": ZONE, "name": "example.com", "status": "active",
                "account": {"id": ACCOUNT, "name": "Acc"}, "name_servers": ["a.ns"]}),
                ],
                1,
                50,
                1,
                Some(1),
            )
        } else {
            ok_page(
                vec![json!({"id": ACCOUNT, "name": "Acc", "type": "standard", "settings": {}})],
                1,
                50,
                1,
                Some(1),
            )
        }
    });
    let client = client(router);
    let filter = ZoneFilter {
        name: Some("example.com".into()),
        account_id: Some(ACCOUNT.into()),
        status: None,
    };
    let zones = client.list_zones(&filter).await.unwrap();
    assert_eq!(zones[0].account.id, ACCOUNT);
    let accounts = client.list_accounts(Some("Acc")).await.unwrap();
    assert_eq!(accounts[0].account_type.as_deref(), Some("standard"));
    let seen = log.all();
    assert_eq!(
        seen[0].query.as_deref(),
        Some(format!("name=example.com&account.id={ACCOUNT}&page=1&per_page=50").as_str())
    );
    assert_eq!(
        seen[1].query.as_deref(),
        Some("name=Acc&page=1&per_page=50")
    );
}

#[tokio::test(start_paused = true)]
async fn credentials_are_sent_as_bearer_or_key_pair() {
    let (router, log) = fake(|_, _| ok(json!({"id": ZONE, "name": "x"})));
    client(router.clone()).get_zone(ZONE).await.unwrap();
    let keyed = CloudflareClient::builder(Credentials::ApiKey {
        email: "ops@example.com".into(),
        key: "k123".into(),
    })
    .transport(Transport::InProcess(router))
    .build()
    .unwrap();
    keyed.get_zone(ZONE).await.unwrap();
    let seen = log.all();
    assert_eq!(
        seen[0].headers[AUTHORIZATION],
        format!("Bearer {TOKEN}").as_str()
    );
    assert!(seen[0].headers.get("x-auth-key").is_none());
    assert_eq!(seen[1].headers["x-auth-email"], "ops@example.com");
    assert_eq!(seen[1].headers["x-auth-key"], "k123");
    assert!(seen[1].headers.get(AUTHORIZATION).is_none());
}

#[tokio::test(start_paused = true)]
async fn base_path_prefix_is_kept_and_ids_are_escaped() {
    let (inner, log) = fake(|_, _| ok(tunnel_json(TUNNEL, "blog")));
    let router = Router::new().nest("/client/v4", inner);
    let client = builder(router)
        .base_url("http://sim.invalid/client/v4/")
        .build()
        .unwrap();
    client.get_tunnel(ACCOUNT, "a/b?c").await.unwrap();
    assert_eq!(
        log.all()[0].path,
        format!("/accounts/{ACCOUNT}/cfd_tunnel/a%2Fb%3Fc")
    );
    assert_eq!(client.base_url().as_str(), "http://sim.invalid/client/v4/");
    for bad in ["", ".", ".."] {
        let err = client.get_tunnel(ACCOUNT, bad).await.unwrap_err();
        assert!(matches!(err, CloudflareError::InvalidInput(_)), "{err:?}");
    }
    assert_eq!(log.count(), 1);
}

#[tokio::test(start_paused = true)]
async fn invalid_inputs_are_refused_before_sending() {
    let (router, log) = fake(|_, _| ok(json!({})));
    let client = client(router);
    let short = client
        .create_tunnel(ACCOUNT, "blog", &[1u8; 31], ConfigSrc::Local)
        .await
        .unwrap_err();
    assert_eq!(
        short.to_string(),
        "invalid input: tunnel secret must have at least 32 bytes, got 31"
    );
    let uuid_name = client
        .create_tunnel(ACCOUNT, TUNNEL, &[1u8; 32], ConfigSrc::Local)
        .await
        .unwrap_err();
    assert!(matches!(uuid_name, CloudflareError::InvalidInput(_)));
    let bad_ttl = NewDnsRecord::new(
        DnsRecordType::Cname,
        "a.example.com",
        "b.example.com",
        10,
        true,
        None,
    );
    assert!(client.create_dns_record(ZONE, &bad_ttl).await.is_err());
    assert_eq!(log.count(), 0);
    for bad in [
        "ftp://x",
        "not a url",
        "http://u:p@host/v4",
        "http://h/?q=1",
    ] {
        let err = CloudflareClient::builder(Credentials::ApiToken("t".into()))
            .base_url(bad)
            .build()
            .unwrap_err();
        assert!(matches!(err, CloudflareError::InvalidInput(_)), "{bad}");
    }
}

#[tokio::test(start_paused = true)]
async fn connections_list_parses_clients_without_result_info() {
    let (router, log) = fake(|_, _| {
        ok(json!([{
            "id": "1bedc50d-42b3-473c-b108-ff3d10c0d925", "arch": "linux_amd64",
            "version": "2025.1.0", "run_at": "2025-01-25T18:22:34Z", "config_version": 0,
            "features": ["ha-origin"],
            "conns": [{"id": "c1", "uuid": "c1", "colo_name": "AMS", "is_pending_reconnect": false,
                       "origin_ip": "192.0.2.7", "opened_at": "2025-01-25T18:22:34Z",
                       "client_id": "1bedc50d-42b3-473c-b108-ff3d10c0d925", "client_version": "2025.1.0"}]
        }]))
    });
    let clients = client(router)
        .list_tunnel_connections(ACCOUNT, TUNNEL)
        .await
        .unwrap();
    assert_eq!(clients.len(), 1);
    assert_eq!(clients[0].features, ["ha-origin"]);
    assert_eq!(clients[0].conns[0].colo_name.as_deref(), Some("AMS"));
    let seen = log.all();
    assert_eq!(seen[0].method, Method::GET);
    assert_eq!(
        seen[0].path,
        format!("/accounts/{ACCOUNT}/cfd_tunnel/{TUNNEL}/connections")
    );
    assert_eq!(seen[0].query, None);
}
