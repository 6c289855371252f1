use http::{Method, StatusCode};
use serde_json::json;

use super::*;

#[tokio::test]
async fn missing_credentials_401_wrong_token_403_malformed_400() {
    let sim = sim();
    let path = tunnels_path(&sim);
    let missing = send_raw(&sim, Method::GET, &path, &[], None).await;
    assert_refused(
        &missing,
        StatusCode::UNAUTHORIZED,
        10000,
        "Authentication error",
    );
    let wrong = send_raw(
        &sim,
        Method::GET,
        &path,
        &[("authorization", "Bearer nope")],
        None,
    )
    .await;
    assert_eq!((wrong.status, wrong.code()), (StatusCode::FORBIDDEN, 10000));
    let malformed = send_raw(
        &sim,
        Method::GET,
        &path,
        &[("authorization", "Token abc")],
        None,
    )
    .await;
    assert_eq!(
        (malformed.status, malformed.code()),
        (StatusCode::BAD_REQUEST, 6003)
    );
    assert_eq!(
        malformed.body["errors"][0]["error_chain"][0],
        json!({ "code": 6111, "message": "Invalid format for Authorization header" })
    );
    let key_only = send_raw(
        &sim,
        Method::GET,
        &path,
        &[("x-auth-email", "ops@example.com")],
        None,
    )
    .await;
    assert_eq!(
        (key_only.status, key_only.code()),
        (StatusCode::BAD_REQUEST, 6003)
    );
    let bad_pair = [("x-auth-email", "ops@example.com"), ("x-auth-key", "wrong")];
    assert_eq!(
        send_raw(&sim, Method::GET, &path, &bad_pair, None)
            .await
            .status,
        StatusCode::FORBIDDEN
    );
    let good_pair = [
        ("x-auth-email", "ops@example.com"),
        ("x-auth-key", "global-key"),
    ];
    assert_eq!(
        send_raw(&sim, Method::GET, &path, &good_pair, None)
            .await
            .status,
        StatusCode::OK
    );
    assert!(sim.tunnels().is_empty());
}

#[tokio::test]
async fn verify_endpoints_accept_only_known_tokens() {
    let sim = sim();
    let account_verify = format!("/accounts/{}/tokens/verify", sim.account_id());
    for path in ["/user/tokens/verify", account_verify.as_str()] {
        let ok = get(&sim, path).await;
        assert_eq!(ok.status, StatusCode::OK);
        assert_eq!(ok.result()["status"], "active");
        assert_eq!(ok.result()["id"].as_str().map(str::len), Some(32));
        assert_eq!(
            ok.body["messages"],
            json!([{ "code": 10000, "message": "This API Token is valid and active" }])
        );
        let bad = send_raw(
            &sim,
            Method::GET,
            path,
            &[("authorization", "Bearer unknown")],
            None,
        )
        .await;
        assert_refused(&bad, StatusCode::UNAUTHORIZED, 1000, "Invalid API Token");
    }
    let other = get(
        &sim,
        "/accounts/0123456789abcdef0123456789abcdef/tokens/verify",
    )
    .await;
    assert_eq!((other.status, other.code()), (StatusCode::FORBIDDEN, 10000));
}

#[tokio::test]
async fn unknown_account_is_403_and_unknown_zone_404() {
    let sim = sim();
    let other = "/accounts/0123456789abcdef0123456789abcdef/cfd_tunnel";
    for method in [Method::GET, Method::POST] {
        let answer = call(&sim, method, other, Some(json!({ "name": "x" }))).await;
        assert_eq!(
            (answer.status, answer.code()),
            (StatusCode::FORBIDDEN, 10000)
        );
    }
    let zone = get(&sim, "/zones/0123456789abcdef0123456789abcdef").await;
    assert_eq!((zone.status, zone.code()), (StatusCode::NOT_FOUND, 7003));
    let nowhere = get(&sim, "/no/such/route").await;
    assert_eq!(
        (nowhere.status, nowhere.code()),
        (StatusCode::NOT_FOUND, 7003)
    );
    let wrong_method = call(&sim, Method::PATCH, "/zones", None).await;
    assert_eq!(
        (wrong_method.status, wrong_method.code()),
        (StatusCode::NOT_FOUND, 7003)
    );
    assert!(sim.tunnels().is_empty());
}

#[tokio::test]
async fn malformed_json_and_wrong_shapes_are_400() {
    let sim = sim();
    let auth = format!("Bearer {TOKEN}");
    let headers = [("authorization", auth.as_str())];
    let path = tunnels_path(&sim);
    let broken = send_raw(
        &sim,
        Method::POST,
        &path,
        &headers,
        Some("{\"name\":".into()),
    )
    .await;
    assert_eq!(
        (broken.status, broken.code()),
        (StatusCode::BAD_REQUEST, 9207)
    );
    let message = broken.body["errors"][0]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(
        message.starts_with("Request body is invalid: malformed JSON: EOF while parsing"),
        "{message}"
    );
    let array = send_raw(&sim, Method::POST, &path, &headers, Some("[]".into())).await;
    assert_eq!(
        array.body["errors"][0]["message"],
        "Request body is invalid: expected a JSON object"
    );
    let empty = send_raw(
        &sim,
        Method::POST,
        &records_path(&sim, "example.com"),
        &headers,
        None,
    )
    .await;
    assert_eq!(
        empty.body["errors"][0]["message"],
        "Request body is invalid: a JSON object is required"
    );
    assert_eq!(sim.request_log()[0].request_body, None);
}

#[tokio::test]
async fn accounts_and_zones_list_with_filters() {
    let sim = sim();
    let accounts = get(&sim, "/accounts").await;
    assert_eq!(accounts.result()[0]["id"], sim.account_id());
    assert_eq!(accounts.result()[0]["name"], "Test Account");
    assert_eq!(accounts.body["result_info"]["per_page"], 20);
    assert_eq!(get(&sim, "/accounts?name=Other").await.result(), &json!([]));

    let zones = |query: &str| {
        let (sim, url) = (sim.clone(), format!("/zones?{query}"));
        async move {
            let answer = get(&sim, &url).await;
            answer
                .result()
                .as_array()
                .expect("array")
                .iter()
                .map(|z| z["name"].clone())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(zones("").await, vec!["example.com", "example.org"]);
    assert_eq!(zones("name=example.org").await, vec!["example.org"]);
    assert_eq!(
        zones("name=app.example.org").await,
        Vec::<serde_json::Value>::new()
    );
    assert_eq!(
        zones("name=ends_with:.com&status=active").await,
        vec!["example.com"]
    );
    assert_eq!(
        zones(&format!("account.id={}", sim.account_id()))
            .await
            .len(),
        2
    );
    assert_eq!(zones("account.name=Someone").await.len(), 0);
    let id = sim.zone_id("example.org").expect("zone");
    let zone = get(&sim, &format!("/zones/{id}")).await;
    assert_eq!(
        (
            zone.result()["id"].clone(),
            zone.result()["account"]["id"].clone()
        ),
        (json!(id), json!(sim.account_id()))
    );
}
