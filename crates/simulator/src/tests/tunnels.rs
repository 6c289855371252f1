use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use http::{Method, StatusCode};
use serde_json::{Value, json};

use super::*;

const SECRET: &str = "AQIDBAUGBwgBAgMEBQYHCAECAwQFBgcIAQIDBAUGBwg=";

#[tokio::test]
async fn create_returns_credentials_and_a_token_holding_the_sent_secret() {
    let sim = sim();
    let body = json!({ "name": "web", "tunnel_secret": SECRET, "config_src": "cloudflare" });
    let answer = call(&sim, Method::POST, &tunnels_path(&sim), Some(body)).await;
    assert_eq!(answer.status, StatusCode::OK);
    let result = answer.result();
    let id = result["id"].as_str().expect("id");
    assert!(uuid::Uuid::try_parse(id).is_ok());
    assert_eq!(result["name"], "web");
    assert_eq!(result["account_tag"], sim.account_id());
    assert_eq!(result["deleted_at"], Value::Null);
    assert_eq!(result["status"], "inactive");
    assert_eq!(result["remote_config"], true);
    assert_eq!(
        result["credentials_file"],
        json!({ "AccountTag": sim.account_id(), "TunnelID": id, "TunnelName": "web", "TunnelSecret": SECRET })
    );
    let token = result["token"].as_str().expect("token");
    let decoded: Value =
        serde_json::from_slice(&STANDARD.decode(token).expect("padded base64")).expect("json");
    assert_eq!(
        decoded,
        json!({ "a": sim.account_id(), "t": id, "s": SECRET })
    );

    let fetched = get(&sim, &format!("{}/{id}/token", tunnels_path(&sim))).await;
    assert_eq!(fetched.result(), &Value::String(token.to_string()));
    assert_eq!(sim.tunnels()[0].tunnel_secret, SECRET);
    assert!(!format!("{:?}", sim.tunnels()).contains(SECRET));
}

#[tokio::test]
async fn create_generates_a_secret_and_validates_the_body() {
    let sim = sim();
    let path = tunnels_path(&sim);
    let id = create_tunnel(&sim, "generated").await;
    let secret = STANDARD
        .decode(&sim.tunnels()[0].tunnel_secret)
        .expect("base64");
    assert_eq!(
        (secret.len(), sim.tunnels()[0].config_src.as_str()),
        (32, "local")
    );
    assert!(!id.is_empty());

    let cases = [
        (json!({}), "Invalid request: missing required field `name`"),
        (
            json!({ "name": "x", "tunnel_secret": "c2hvcnQ=" }),
            "Invalid request: `tunnel_secret` must decode to at least 32 bytes",
        ),
        (
            json!({ "name": "x", "tunnel_secret": "%%%" }),
            "Invalid request: `tunnel_secret` must be standard base64",
        ),
        (
            json!({ "name": "x", "config_src": "elsewhere" }),
            "Invalid request: `config_src` must be \"local\" or \"cloudflare\"",
        ),
        (
            json!({ "name": "f70ff985-a4ef-4643-bbbc-4a0ed4fc8415" }),
            "Invalid request: tunnel name must not be a UUID",
        ),
    ];
    for (body, message) in cases {
        let answer = call(&sim, Method::POST, &path, Some(body)).await;
        assert_refused(&answer, StatusCode::BAD_REQUEST, 1001, message);
        assert_eq!(
            (answer.body["success"].clone(), answer.result().clone()),
            (json!(false), Value::Null)
        );
    }
    assert_eq!(sim.tunnels().len(), 1);
}

#[tokio::test]
async fn duplicate_name_is_409_1013_until_the_tunnel_is_deleted() {
    let sim = sim();
    let path = tunnels_path(&sim);
    let first = create_tunnel(&sim, "app").await;
    let clash = call(&sim, Method::POST, &path, Some(json!({ "name": "app" }))).await;
    assert_refused(
        &clash,
        StatusCode::CONFLICT,
        1013,
        "You already have a tunnel with this name. Delete the existing tunnel, or choose a different name for your new tunnel",
    );
    let deleted = call(&sim, Method::DELETE, &format!("{path}/{first}"), None).await;
    assert_eq!(deleted.status, StatusCode::OK);
    assert!(deleted.result()["deleted_at"].is_string());
    let second = create_tunnel(&sim, "app").await;
    assert_ne!(first, second);
    let got = get(&sim, &format!("{path}/{first}")).await;
    assert_eq!(got.status, StatusCode::OK);
    assert!(got.result()["deleted_at"].is_string());
}

#[tokio::test]
async fn delete_with_connections_needs_cascade_or_cleanup() {
    let sim = sim();
    let path = tunnels_path(&sim);
    let a = create_tunnel(&sim, "a").await;
    let b = create_tunnel(&sim, "b").await;
    assert!(sim.connect_tunnel(&a) && sim.connect_tunnel(&b) && sim.connect_tunnel(&b));

    let refused = call(&sim, Method::DELETE, &format!("{path}/{a}"), None).await;
    assert_refused(
        &refused,
        StatusCode::BAD_REQUEST,
        1022,
        "Cannot delete tunnel because it has active connections",
    );
    let cascaded = call(
        &sim,
        Method::DELETE,
        &format!("{path}/{a}?cascade=true"),
        None,
    )
    .await;
    assert_eq!(cascaded.status, StatusCode::OK);
    // Cloudflare no longer sends the connections array on a tunnel (connectors: `…/connections`).
    assert_eq!(cascaded.result().get("connections"), None);
    assert_eq!(cascaded.result()["status"], "down");

    let listed = get(&sim, &format!("{path}/{b}/connections")).await;
    let clients = listed.result().as_array().expect("array").clone();
    assert_eq!((clients.len(), listed.body.get("result_info")), (2, None));
    assert_eq!(
        get(&sim, &format!("{path}/{b}")).await.result()["status"],
        "healthy"
    );
    let one = clients[0]["id"].as_str().expect("client id");
    let cleaned = call(
        &sim,
        Method::DELETE,
        &format!("{path}/{b}/connections?client_id={one}"),
        None,
    )
    .await;
    assert_eq!(
        (cleaned.status, cleaned.result().clone()),
        (StatusCode::OK, json!({}))
    );
    let still = call(&sim, Method::DELETE, &format!("{path}/{b}"), None).await;
    assert_eq!(still.code(), 1022);
    call(
        &sim,
        Method::DELETE,
        &format!("{path}/{b}/connections"),
        None,
    )
    .await;
    assert_eq!(
        get(&sim, &format!("{path}/{b}")).await.result()["status"],
        "down"
    );
    assert_eq!(
        call(&sim, Method::DELETE, &format!("{path}/{b}"), None)
            .await
            .status,
        StatusCode::OK
    );
}

#[tokio::test]
async fn unknown_and_deleted_tunnels_answer_404_envelopes() {
    let sim = sim();
    let path = tunnels_path(&sim);
    let unknown = get(
        &sim,
        &format!("{path}/f70ff985-a4ef-4643-bbbc-4a0ed4fc8415"),
    )
    .await;
    assert_refused(&unknown, StatusCode::NOT_FOUND, 1003, "Tunnel not found");
    assert_eq!(unknown.result(), &Value::Null);

    let id = create_tunnel(&sim, "gone").await;
    assert!(sim.delete_tunnel_out_of_band(&id));
    assert!(!sim.delete_tunnel_out_of_band(&id));
    for (method, suffix) in [(Method::DELETE, ""), (Method::GET, "/token")] {
        let answer = call(&sim, method, &format!("{path}/{id}{suffix}"), None).await;
        assert_refused(
            &answer,
            StatusCode::NOT_FOUND,
            1003,
            "Tunnel has been deleted",
        );
    }
}

#[tokio::test]
async fn list_filters_by_deletion_name_and_prefix() {
    let sim = sim();
    let path = tunnels_path(&sim);
    for name in ["vpc1-a", "vpc1-b", "other"] {
        create_tunnel(&sim, name).await;
    }
    let doomed = sim.tunnels()[1].id.clone();
    call(&sim, Method::DELETE, &format!("{path}/{doomed}"), None).await;
    let names = |answer: Answer| -> Vec<String> {
        answer
            .result()
            .as_array()
            .expect("array")
            .iter()
            .map(|t| t["name"].as_str().unwrap_or("").to_string())
            .collect()
    };
    let list = |query: &str| {
        let query = query.to_string();
        let (sim, path) = (sim.clone(), path.clone());
        async move { names(get(&sim, &format!("{path}?{query}")).await) }
    };
    assert_eq!(list("is_deleted=false").await, vec!["vpc1-a", "other"]);
    assert_eq!(list("is_deleted=true").await, vec!["vpc1-b"]);
    assert_eq!(list("").await, vec!["vpc1-a", "vpc1-b", "other"]);
    assert_eq!(
        list("name=vpc1-b&is_deleted=false").await,
        Vec::<String>::new()
    );
    assert_eq!(list("include_prefix=vpc1-").await, vec!["vpc1-a", "vpc1-b"]);
    assert_eq!(list("exclude_prefix=vpc1-").await, vec!["other"]);
    assert_eq!(list(&format!("uuid={doomed}")).await, vec!["vpc1-b"]);
}

#[tokio::test]
async fn tunnel_pages_are_stable_with_exact_result_info() {
    let sim = sim();
    let path = tunnels_path(&sim);
    for i in 0..5 {
        create_tunnel(&sim, &format!("t{i}")).await;
    }
    let mut seen = Vec::new();
    for page in 1..=3 {
        let answer = get(&sim, &format!("{path}?per_page=2&page={page}")).await;
        let count = if page == 3 { 1 } else { 2 };
        assert_eq!(
            answer.body["result_info"],
            json!({ "page": page, "per_page": 2, "count": count, "total_count": 5, "total_pages": 3 })
        );
        seen.extend(answer.names());
    }
    assert_eq!(seen, vec!["t0", "t1", "t2", "t3", "t4"]);
}

#[tokio::test]
async fn configuration_versions_increase_and_catch_all_is_enforced() {
    let sim = sim();
    let id = create_tunnel(&sim, "remote").await;
    let path = format!("{}/{id}/configurations", tunnels_path(&sim));
    let empty = get(&sim, &path).await;
    assert_eq!(
        (
            empty.result()["version"].clone(),
            empty.result()["config"].clone()
        ),
        (json!(0), Value::Null)
    );
    let config = json!({ "ingress": [
        { "hostname": "app.example.com", "service": "http://web:80" },
        { "service": "http_status:404" }
    ]});
    for version in 1..=2 {
        let put = call(&sim, Method::PUT, &path, Some(json!({ "config": config }))).await;
        assert_eq!(put.status, StatusCode::OK);
        assert_eq!(put.result()["version"], version);
    }
    let got = get(&sim, &path).await;
    // Answered with the fields Cloudflare fills in; stored as sent.
    let answered = json!({ "ingress": [
        { "hostname": "app.example.com", "service": "http://web:80", "originRequest": {} },
        { "service": "http_status:404", "originRequest": {} }
    ], "warp-routing": { "enabled": false } });
    assert_eq!(got.result()["config"], answered);
    assert_eq!(sim.tunnels()[0].config, Some(config.clone()));
    let own_warp = json!({ "ingress": [{ "service": "http_status:404", "originRequest": { "noTLSVerify": true } }],
        "warp-routing": { "enabled": true } });
    call(
        &sim,
        Method::PUT,
        &path,
        Some(json!({ "config": own_warp })),
    )
    .await;
    assert_eq!(get(&sim, &path).await.result()["config"], own_warp);
    assert_eq!(got.result()["tunnel_id"], id.as_str());
    assert_eq!(got.result()["account_id"], sim.account_id());
    let bad = json!({ "config": { "ingress": [{ "hostname": "a.example.com", "service": "http://a" }] } });
    let refused = call(&sim, Method::PUT, &path, Some(bad)).await;
    assert_eq!(
        (refused.status, refused.code()),
        (StatusCode::BAD_REQUEST, 1001)
    );
    let text = json!({ "config": { "ingress": [{ "service": "http_status:404",
        "originRequest": { "connectTimeout": "30s" } }] } });
    let refused = call(&sim, Method::PUT, &path, Some(text)).await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        refused.body["errors"][0]["message"],
        "Invalid request: ingress rule #1.originRequest.connectTimeout must be a whole number of seconds, not \"30s\""
    );
    let missing = call(&sim, Method::PUT, &path, Some(json!({}))).await;
    assert_eq!(
        missing.body["errors"][0]["message"],
        "Invalid request: missing required field `config`"
    );
}

#[tokio::test]
async fn a_test_sets_the_status_the_edge_reports_and_lists_filter_by_it() {
    let sim = sim();
    let path = tunnels_path(&sim);
    let a = create_tunnel(&sim, "a").await;
    assert!(sim.connect_tunnel(&a));
    let status_of = |answer: &Answer| answer.result()["status"].clone();
    assert_eq!(
        status_of(&get(&sim, &format!("{path}/{a}")).await),
        "healthy"
    );
    assert!(sim.set_tunnel_status(&a, Some("down")));
    assert_eq!(status_of(&get(&sim, &format!("{path}/{a}")).await), "down");
    let down = get(&sim, &format!("{path}?status=down")).await;
    assert_eq!(down.result()[0]["id"], json!(a));
    assert_eq!(down.result()[0].get("connections"), None);
    assert!(sim.set_tunnel_status(&a, None));
    assert_eq!(
        status_of(&get(&sim, &format!("{path}/{a}")).await),
        "healthy"
    );
    assert!(!sim.set_tunnel_status("no-such-tunnel", Some("down")));
}
