//! The checks of Access bodies: what an application and a reusable policy must hold.
use http::{Method, StatusCode};
use serde_json::{Value, json};

use super::access::{access_path, access_sim, allow_ops, app, create_app, create_policy};
use super::*;

#[tokio::test]
async fn application_bodies_are_checked_like_cloudflare() {
    let sim = access_sim();
    sim.set_zone_status("example.org", "pending");
    let ops = create_policy(&sim, allow_ops()).await;
    let unknown = "6ff42ae2-765d-4adf-8112-31c55c1551ef";
    let with = |field: &str, value: Value| {
        let mut body = app("app.example.com");
        body[field] = value;
        body
    };
    let cases = [
        (
            json!({ "domain": "app.example.com" }),
            "app type is missing or invalid",
        ),
        (
            with("type", json!("saas")),
            "app type `saas` is not simulated (only self_hosted is)",
        ),
        (json!({ "type": "self_hosted" }), "`domain` is required"),
        (app("app.elsewhere.net"), "domain does not belong to zone"),
        (app("app.example.org"), "domain does not belong to zone"),
        (
            with("self_hosted_domains", json!(["x.elsewhere.net"])),
            "domain does not belong to zone",
        ),
        (
            with("session_duration", json!("1d")),
            "`session_duration` must be a duration such as 24h or 2h45m",
        ),
        (
            with("policies", json!([unknown])),
            &format!("policies[0]: policy {unknown} does not exist"),
        ),
        (
            with("policies", json!([ops, ops])),
            &format!("policy {ops} is linked twice"),
        ),
        (
            with("policies", json!([{ "id": ops, "precedence": 0 }])),
            "policies[0].precedence must be a whole number of at least 1",
        ),
        (
            with("policies", json!([allow_ops()])),
            "policies[0]: application-scoped policies are not simulated; link a reusable policy",
        ),
    ];
    for (body, detail) in cases {
        let answer = create_app(&sim, body).await;
        let message = format!("access.api.error.invalid_request: {detail}");
        assert_refused(&answer, StatusCode::BAD_REQUEST, 12130, &message);
    }
    let other = create_policy(&sim, allow_ops()).await;
    let clash = with(
        "policies",
        json!([{ "id": ops, "precedence": 1 }, { "id": other, "precedence": 1 }]),
    );
    assert_eq!(create_app(&sim, clash).await.code(), 12130);
    assert!(sim.access_apps().is_empty());

    let wildcard = create_app(&sim, app("*.example.com")).await;
    assert_eq!(wildcard.status, StatusCode::CREATED, "{}", wildcard.body);
    let unnamed = create_app(
        &sim,
        json!({ "type": "self_hosted", "domain": "apex.example.com/x" }),
    )
    .await;
    assert_eq!(unnamed.result()["name"], "apex.example.com/x");
}

#[tokio::test]
async fn policy_bodies_are_checked_like_cloudflare() {
    let sim = access_sim();
    let with = |field: &str, value: Value| {
        let mut body = allow_ops();
        body[field] = value;
        body
    };
    let without = |field: &str| {
        let mut body = allow_ops();
        body.as_object_mut().map(|b| b.remove(field));
        body
    };
    let cases = [
        (without("name"), "`name` is required".to_string()),
        (without("decision"), "`decision` is required".to_string()),
        (without("include"), "`include` is required".to_string()),
        (
            with("decision", json!("maybe")),
            "`decision` must be one of allow, deny, non_identity, bypass, not \"maybe\"".into(),
        ),
        (
            with("include", json!([{ "email": { "email": "nobody" } }])),
            "include[0].email.email is not an email address".into(),
        ),
        (
            with("include", json!([{ "group": {} }])),
            "include[0].group.id is required".into(),
        ),
        (
            with("exclude", json!([{ "ip": { "ip": "192.0.2.0/24" } }])),
            "exclude[0]: `ip` rules are not simulated".into(),
        ),
        (
            with("require", json!([{ "teapot": {} }])),
            "require[0]: unknown selector `teapot`".into(),
        ),
        (
            with(
                "include",
                json!([{ "everyone": {}, "email": { "email": "a@example.com" } }]),
            ),
            "include[0] must hold exactly one selector".into(),
        ),
        (
            with("session_duration", json!(24)),
            "`session_duration` must be a duration such as 24h or 2h45m".into(),
        ),
    ];
    for (body, detail) in cases {
        let answer = call(
            &sim,
            Method::POST,
            &access_path(&sim, "policies"),
            Some(body),
        )
        .await;
        let message = format!("access.api.error.invalid_request: {detail}");
        assert_refused(&answer, StatusCode::BAD_REQUEST, 12130, &message);
    }
    assert!(sim.access_policies().is_empty());
    for decision in ["allow", "deny", "non_identity", "bypass"] {
        create_policy(&sim, with("decision", json!(decision))).await;
    }
    let stored = &sim.access_policies()[0];
    assert_eq!(
        (stored.session_duration.as_str(), stored.exclude.len()),
        ("24h", 0)
    );
}
