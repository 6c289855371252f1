//! Envelope parsing and typed errors.
use serde_json::json;

use super::*;
use crate::{CloudflareError, ConfigSrc, DnsRecordType, NewDnsRecord, TunnelStatus};

#[tokio::test(start_paused = true)]
async fn success_false_with_200_is_an_api_error_with_its_chain() {
    let (router, log) = fake(|_, _| {
        axum::Json(json!({
            "success": false,
            "errors": [{"code": 1004, "message": "DNS Validation Error",
                        "error_chain": [{"code": 9003, "message": "Invalid 'content'"}],
                        "documentation_url": "https://example.invalid", "source": {"pointer": "/content"}}],
            "messages": [], "result": null
        }))
        .into_response()
    });
    let err = client(router).get_zone(ZONE).await.unwrap_err();
    assert_eq!(log.count(), 1);
    assert!(
        matches!(err, CloudflareError::Api { status: 200, .. }),
        "{err:?}"
    );
    assert!(err.has_code(1004));
    assert!(err.has_code(9003));
    assert!(!err.has_code(1000));
    assert_eq!(
        err.to_string(),
        "cloudflare zone.get: HTTP 200: [1004] DNS Validation Error (caused by [9003] Invalid 'content')"
    );
    assert_eq!(err.metric_label(), "api_error");
}

#[tokio::test(start_paused = true)]
async fn typed_errors_keep_code_message_and_status() {
    let (router, log) = fake(|seen, _| match (seen.method.as_str(), seen.path.as_str()) {
        ("POST", p) if p.ends_with("/cfd_tunnel") => fail(
            409,
            1013,
            "You already have a tunnel with this name. Delete the existing tunnel, or choose a different name for your new tunnel",
        ),
        ("DELETE", p) if p.contains("/cfd_tunnel/") => fail(
            400,
            1022,
            "Cannot delete tunnel because it has active connections",
        ),
        ("POST", p) if p.ends_with("/dns_records") => fail(
            400,
            81053,
            "An A, AAAA, or CNAME record with that host already exists.",
        ),
        _ => fail(404, 1004, "Tunnel not found"),
    });
    let client = client(router);

    let err = client
        .create_tunnel(ACCOUNT, "blog", &[7u8; 32], ConfigSrc::Local)
        .await
        .unwrap_err();
    assert!(err.is_conflict_tunnel_name());
    assert!(err.has_code(1013));
    assert_eq!(err.status(), Some(409));
    assert_eq!(err.metric_label(), "conflict");
    assert_eq!(
        err.errors()[0].message,
        "You already have a tunnel with this name. Delete the existing tunnel, or choose a different name for your new tunnel"
    );

    let err = client
        .delete_tunnel(ACCOUNT, TUNNEL, false)
        .await
        .unwrap_err();
    assert!(err.is_active_connections());
    assert!(!err.is_conflict_tunnel_name());
    assert_eq!(
        err.to_string(),
        "cloudflare tunnel.delete: HTTP 400: [1022] Cannot delete tunnel because it has active connections"
    );
    assert_eq!(err.metric_label(), "client_error");

    let record = NewDnsRecord::tunnel_cname("app.example.com", TUNNEL, None);
    let err = client.create_dns_record(ZONE, &record).await.unwrap_err();
    assert!(err.is_record_exists());
    assert!(!err.is_not_found());
    assert_eq!(err.errors()[0].code, 81053);

    let err = client.get_tunnel(ACCOUNT, TUNNEL).await.unwrap_err();
    assert!(err.is_not_found());
    assert!(!err.is_record_exists());
    assert_eq!(err.metric_label(), "not_found");
    assert_eq!(
        err.to_string(),
        "cloudflare tunnel.get: HTTP 404: [1004] Tunnel not found"
    );

    // None of these is retried.
    assert_eq!(log.count(), 4);
}

#[tokio::test(start_paused = true)]
async fn create_answer_parses_with_token_credentials_and_unknown_fields() {
    let (router, log) = fake(|_, _| {
        let mut tunnel = tunnel_json(TUNNEL, "blog");
        tunnel["token"] = json!("eyJhIjoiYWJjIn0=");
        tunnel["credentials_file"] = json!({
            "AccountTag": ACCOUNT, "TunnelID": TUNNEL, "TunnelName": "blog",
            "TunnelSecret": "AQIDBAUGBwgBAgMEBQYHCAECAwQFBgcIAQIDBAUGBwg="
        });
        tunnel["brand_new_field"] = json!({"x": 1});
        ok(tunnel)
    });
    let tunnel = client(router)
        .create_tunnel(ACCOUNT, "blog", &[1u8; 32], ConfigSrc::Local)
        .await
        .unwrap();
    assert_eq!(tunnel.id, TUNNEL);
    assert_eq!(tunnel.account_tag, ACCOUNT);
    assert_eq!(tunnel.status, Some(TunnelStatus::Inactive));
    assert_eq!(tunnel.config_src, Some(ConfigSrc::Local));
    assert!(!tunnel.is_deleted());
    assert!(!tunnel.is_remotely_managed());
    assert_eq!(tunnel.token.as_ref().unwrap().expose(), "eyJhIjoiYWJjIn0=");
    let creds = tunnel.credentials_file.as_ref().unwrap();
    assert_eq!(creds.tunnel_name.as_deref(), Some("blog"));
    let debug = format!("{tunnel:?}");
    assert!(!debug.contains("eyJhIjoiYWJjIn0="), "{debug}");
    assert!(
        !debug.contains("AQIDBAUGBwgBAgMEBQYHCAECAwQFBgcIAQIDBAUGBwg="),
        "{debug}"
    );

    let sent = body_json(&log.all()[0]);
    assert_eq!(
        sent,
        json!({"name": "blog", "tunnel_secret": "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=", "config_src": "local"})
    );
}

#[tokio::test(start_paused = true)]
async fn deleted_tunnel_and_record_lists_parse() {
    let (router, _) = fake(|seen, _| {
        if seen.path.contains("dns_records") {
            let mut txt = record_json("aa", "_managed.app.example.com");
            txt["type"] = json!("TXT");
            txt["content"] = json!("\"heritage=x\"");
            txt["proxied"] = json!(false);
            txt["comment"] = json!("cftunnel default/t");
            txt["zone_id"] = json!(ZONE);
            txt["locked"] = json!(false);
            ok_page(vec![txt], 1, 1000, 1, Some(1))
        } else {
            let mut tunnel = tunnel_json(TUNNEL, "blog");
            tunnel["deleted_at"] = json!("2025-02-01T00:00:00Z");
            tunnel["connections"] = json!([{"id": "c1", "uuid": "c1", "colo_name": "FRA",
                "is_pending_reconnect": false, "origin_ip": "192.0.2.1",
                "opened_at": "2025-01-25T18:22:34Z", "client_id": "k1", "client_version": "2025.1.0"}]);
            ok(tunnel)
        }
    });
    let client = client(router);
    let tunnel = client.get_tunnel(ACCOUNT, TUNNEL).await.unwrap();
    assert!(tunnel.is_deleted());
    assert_eq!(tunnel.connections[0].colo_name.as_deref(), Some("FRA"));
    let records = client
        .list_dns_records(ZONE, &Default::default())
        .await
        .unwrap();
    assert_eq!(records.len(), 1);
    assert!(records[0].is_type(DnsRecordType::Txt));
    assert_eq!(records[0].comment.as_deref(), Some("cftunnel default/t"));
    assert_eq!(records[0].content, "\"heritage=x\"");
}

#[tokio::test(start_paused = true)]
async fn malformed_answers_are_decode_errors_without_echo() {
    let (router, log) = fake(|seen, _| {
        if seen.path.ends_with("/token") {
            // A token where an object is expected must not leak into the error text.
            axum::Json(json!({"success": true, "errors": [], "messages": [], "result": {"x": "SECRETTOKENVALUE"}}))
                .into_response()
        } else {
            axum::Json(json!({"errors": [], "result": {}})).into_response()
        }
    });
    let client = client(router);
    let err = client.tunnel_token(ACCOUNT, TUNNEL).await.unwrap_err();
    assert!(
        matches!(err, CloudflareError::Decode { status: 200, .. }),
        "{err:?}"
    );
    assert!(!err.to_string().contains("SECRETTOKENVALUE"));
    assert!(!format!("{err:?}").contains("SECRETTOKENVALUE"));
    let err = client.get_zone(ZONE).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "cloudflare zone.get: cannot decode HTTP 200 answer: answer has no `success` field"
    );
    assert_eq!(err.metric_label(), "decode");
    assert_eq!(log.count(), 2);
}

#[tokio::test(start_paused = true)]
async fn missing_required_field_is_named() {
    let (router, _) = fake(|_, _| ok(json!({"name": "example.com"})));
    let err = client(router).get_zone(ZONE).await.unwrap_err();
    let text = err.to_string();
    assert!(
        text.starts_with(
            "cloudflare zone.get: cannot decode HTTP 200 answer: missing field `id` at line 1 column "
        ),
        "{text}"
    );
}

#[tokio::test(start_paused = true)]
async fn non_json_error_body_keeps_the_status() {
    let (router, log) = fake(|_, _| raw(403, "<html>forbidden</html>"));
    let err = client(router).get_zone(ZONE).await.unwrap_err();
    assert!(matches!(&err, CloudflareError::Api { status: 403, errors, .. } if errors.is_empty()));
    assert!(err.is_auth());
    assert_eq!(
        err.to_string(),
        "cloudflare zone.get: HTTP 403: no error details"
    );
    assert_eq!(log.count(), 1);
}
