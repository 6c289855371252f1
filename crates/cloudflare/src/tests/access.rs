//! Paths, bodies, pagination and errors of the Access operations.
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde_json::json;

use super::*;
use crate::{AccessDecision, AccessRule, CloudflareError, NewAccessApp, NewAccessPolicy};

const APP: &str = "0b5e0f7c-3f35-4a54-9e68-4f1f7d0e5c11";
const POLICY: &str = "f174e90a-fafe-4643-bbbc-4a0ed4fc8415";
const AUD: &str = "737646a56ab1df6ec9bddc7e5ca84eaf3b0768850f3ffb5d74f1534911fe3893";

fn policy_json(id: &str) -> Value {
    json!({
        "id": id, "name": "ops", "decision": "allow", "reusable": true, "app_count": 1,
        "include": [{"email": {"email": "ops@example.com"}}], "exclude": [], "require": [],
        "session_duration": "24h", "created_at": "2024-08-01T10:00:00Z",
        "updated_at": "2024-08-01T10:00:00Z"
    })
}

fn app_json(id: &str, domain: &str, extra_domains: &[&str]) -> Value {
    let mut policy = policy_json(POLICY);
    policy["precedence"] = json!(1);
    let mut domains = vec![domain];
    domains.extend_from_slice(extra_domains);
    json!({
        "id": id, "aud": AUD, "type": "self_hosted", "name": domain, "domain": domain,
        "self_hosted_domains": domains, "session_duration": "24h", "policies": [policy],
        "created_at": "2024-08-01T10:00:00Z", "updated_at": "2024-08-01T10:00:00Z",
        "scim_config": {"authentication": {"scheme": "httpbasic", "user": "u", "password": "hunter2"}}
    })
}

/// A success envelope with another 2xx status, as the Access creates (201) and deletes (202).
fn ok_with(status: u16, result: Value) -> Response {
    let body = json!({"success": true, "errors": [], "messages": [], "result": result});
    (StatusCode::from_u16(status).unwrap(), axum::Json(body)).into_response()
}

#[tokio::test(start_paused = true)]
async fn application_calls_send_their_paths_and_self_hosted_bodies() {
    let (router, log) = fake(|seen, _| match seen.method {
        Method::POST => ok_with(201, app_json(APP, "app.example.com", &[])),
        Method::DELETE => ok_with(202, json!({"id": APP})),
        _ => ok(app_json(APP, "app.example.com", &[])),
    });
    let cf = client(router);
    let new = NewAccessApp::self_hosted("App", "app.example.com")
        .with_policies([POLICY, "5d1f0f0e-59d3-4a4a-9d5f-1b1c1d1e1f10"])
        .with_session_duration("8h");
    let created = cf.create_access_app(ACCOUNT, &new).await.unwrap();
    assert_eq!((created.id.as_str(), created.aud.as_str()), (APP, AUD));
    assert_eq!(created.policies[0].precedence, Some(1));
    assert_eq!(created.policies[0].policy.decision, AccessDecision::Allow);
    assert!(
        !format!("{created:?}").contains("hunter2"),
        "scim_config is not kept"
    );
    cf.get_access_app(ACCOUNT, APP).await.unwrap();
    cf.update_access_app(
        ACCOUNT,
        APP,
        &NewAccessApp::self_hosted("App", "app.example.com"),
    )
    .await
    .unwrap();
    cf.delete_access_app(ACCOUNT, APP).await.unwrap();

    let seen = log.all();
    let calls: Vec<(Method, String)> = seen
        .iter()
        .map(|s| (s.method.clone(), s.path.clone()))
        .collect();
    let apps = format!("/accounts/{ACCOUNT}/access/apps");
    assert_eq!(
        calls,
        [
            (Method::POST, apps.clone()),
            (Method::GET, format!("{apps}/{APP}")),
            (Method::PUT, format!("{apps}/{APP}")),
            (Method::DELETE, format!("{apps}/{APP}")),
        ]
    );
    assert_eq!(
        body_json(&seen[0]),
        json!({
            "type": "self_hosted", "name": "App", "domain": "app.example.com",
            "session_duration": "8h",
            "policies": [
                {"id": POLICY, "precedence": 1},
                {"id": "5d1f0f0e-59d3-4a4a-9d5f-1b1c1d1e1f10", "precedence": 2}
            ]
        })
    );
    assert_eq!(
        body_json(&seen[2]),
        json!({"type": "self_hosted", "name": "App", "domain": "app.example.com", "policies": []}),
        "a PUT always sends the policies, none detaching them all"
    );
    assert!(seen[1].body.is_empty() && seen[3].body.is_empty());
}

#[tokio::test(start_paused = true)]
async fn policy_calls_send_rules_in_cloudflares_shape() {
    let (router, log) = fake(|seen, _| match seen.method {
        Method::POST => ok_with(201, policy_json(POLICY)),
        Method::DELETE => ok_with(202, json!({"id": POLICY})),
        _ => ok(policy_json(POLICY)),
    });
    let cf = client(router);
    let mut policy = NewAccessPolicy::new(
        "robots",
        AccessDecision::NonIdentity,
        vec![
            AccessRule::any_valid_service_token(),
            AccessRule::service_token("tok-1"),
        ],
    );
    policy.exclude = vec![
        AccessRule::email("eve@example.com"),
        AccessRule::group("g-1"),
    ];
    policy.require = vec![
        AccessRule::email_domain("example.com"),
        AccessRule::everyone(),
    ];
    let created = cf.create_access_policy(ACCOUNT, &policy).await.unwrap();
    assert_eq!(
        (created.reusable, created.app_count, created.include.clone()),
        (
            Some(true),
            Some(1),
            vec![AccessRule::email("ops@example.com")]
        )
    );
    cf.get_access_policy(ACCOUNT, POLICY).await.unwrap();
    cf.update_access_policy(ACCOUNT, POLICY, &policy)
        .await
        .unwrap();
    cf.delete_access_policy(ACCOUNT, POLICY).await.unwrap();
    let seen = log.all();
    let policies = format!("/accounts/{ACCOUNT}/access/policies");
    let paths: Vec<&str> = seen.iter().map(|s| s.path.as_str()).collect();
    let one = format!("{policies}/{POLICY}");
    assert_eq!(paths, [policies.as_str(), &one, &one, &one]);
    let expected = json!({
        "name": "robots", "decision": "non_identity",
        "include": [{"any_valid_service_token": {}}, {"service_token": {"token_id": "tok-1"}}],
        "exclude": [{"email": {"email": "eve@example.com"}}, {"group": {"id": "g-1"}}],
        "require": [{"email_domain": {"domain": "example.com"}}, {"everyone": {}}]
    });
    assert_eq!(
        (body_json(&seen[0]), body_json(&seen[2])),
        (expected.clone(), expected)
    );
    assert_eq!(seen[2].method, Method::PUT);
}

#[test]
fn rules_of_other_kinds_are_kept_as_sent() {
    let rules = json!([
        {"email": {"email": "a@example.com"}},
        {"ip": {"ip": "192.0.2.0/24"}},
        {"email": {"email": "b@example.com"}, "everyone": {}}
    ]);
    let parsed: Vec<AccessRule> = serde_json::from_value(rules.clone()).unwrap();
    assert_eq!(parsed[0], AccessRule::email("a@example.com"));
    assert_eq!(
        parsed[1],
        AccessRule::Other(json!({"ip": {"ip": "192.0.2.0/24"}}))
    );
    assert!(matches!(parsed[2], AccessRule::Other(_)));
    assert_eq!(serde_json::to_value(&parsed).unwrap(), rules);
    let unknown: crate::AccessPolicy =
        serde_json::from_value(json!({"id": POLICY, "decision": "escalate"})).unwrap();
    assert_eq!(unknown.decision, AccessDecision::Unknown);
}

#[tokio::test(start_paused = true)]
async fn the_app_list_walks_pages_and_filters_by_domain_here() {
    let (router, log) = fake(|seen, _| {
        let query = seen.query.clone().unwrap_or_default();
        let page = if query.contains("page=2") { 2 } else { 1 };
        let items = if page == 1 {
            (0..50)
                .map(|i| {
                    app_json(
                        &format!("{i:08}-0000-4000-8000-000000000000"),
                        &format!("a{i}.example.com"),
                        &[],
                    )
                })
                .collect()
        } else {
            vec![
                app_json(APP, "App.Example.com/admin", &[]),
                app_json(
                    "11111111-2222-4333-8444-555555555555",
                    "other.example.com",
                    &["app.example.com/admin/"],
                ),
            ]
        };
        ok_page(items, page, 50, 52, None)
    });
    let cf = client(router);
    let all = cf.list_access_apps(ACCOUNT, None).await.unwrap();
    assert_eq!(all.len(), 52);
    let mine = cf
        .list_access_apps(ACCOUNT, Some("app.example.com/admin"))
        .await
        .unwrap();
    let ids: Vec<&str> = mine.iter().map(|a| a.id.as_str()).collect();
    assert_eq!(ids, [APP, "11111111-2222-4333-8444-555555555555"]);
    assert!(
        cf.list_access_apps(ACCOUNT, Some("app.example.com/ADMIN"))
            .await
            .unwrap()
            .is_empty(),
        "paths compare exactly"
    );
    let queries: Vec<String> = log
        .all()
        .iter()
        .take(2)
        .map(|s| s.query.clone().unwrap_or_default())
        .collect();
    assert_eq!(queries, ["page=1&per_page=50", "page=2&per_page=50"]);
}

#[tokio::test(start_paused = true)]
async fn the_organization_is_none_on_an_account_without_zero_trust() {
    let answers = [
        ok(
            json!({"name": "Acme", "auth_domain": "acme.cloudflareaccess.com", "session_duration": "24h"}),
        ),
        fail(
            400,
            9999,
            "access.api.error.not_enabled: Access is not enabled",
        ),
        fail(404, 12135, "access.api.error.not_found"),
        fail(403, 10000, "Authentication error"),
    ];
    let answers = std::sync::Arc::new(Mutex::new(answers.into_iter()));
    let (router, log) = fake(move |_, _| answers.lock().unwrap().next().unwrap());
    let cf = client(router);
    let org = cf
        .access_organization(ACCOUNT)
        .await
        .unwrap()
        .expect("organization");
    assert_eq!(
        (org.team(), org.auth_domain.as_str()),
        (Some("acme"), "acme.cloudflareaccess.com")
    );
    assert_eq!(cf.access_organization(ACCOUNT).await.unwrap(), None);
    assert_eq!(cf.access_organization(ACCOUNT).await.unwrap(), None);
    let denied = cf.access_organization(ACCOUNT).await.unwrap_err();
    assert!(
        denied.is_auth() && !denied.is_access_not_enabled(),
        "{denied}"
    );
    assert_eq!(
        log.all()[0].path,
        format!("/accounts/{ACCOUNT}/access/organizations")
    );
}

#[test]
fn not_enabled_is_recognised_by_its_marker_or_its_code() {
    let api = |status: u16, code: u32, message: &str| CloudflareError::Api {
        operation: "access.app.list",
        status,
        errors: vec![crate::ApiErrorItem {
            code,
            message: message.into(),
            error_chain: Vec::new(),
        }],
    };
    assert!(
        api(
            403,
            1,
            "access.api.error.not_enabled: Access is not enabled"
        )
        .is_access_not_enabled()
    );
    assert!(api(400, 9999, "whatever").is_access_not_enabled());
    assert!(!api(500, 9999, "whatever").is_access_not_enabled());
    assert!(!api(404, 12135, "access.api.error.not_found").is_access_not_enabled());
}

#[tokio::test(start_paused = true)]
async fn invalid_access_inputs_are_refused_before_sending() {
    let (router, log) = fake(|_, _| ok(json!({})));
    let cf = client(router);
    let mut twice =
        NewAccessApp::self_hosted("App", "app.example.com").with_policies([POLICY, "p2"]);
    twice.policies[1].precedence = 1;
    let apps = [
        NewAccessApp::self_hosted("App", " "),
        NewAccessApp::self_hosted("", "app.example.com"),
        NewAccessApp::self_hosted("App", "app.example.com").with_policies([""]),
        twice,
    ];
    for app in &apps {
        let err = cf.create_access_app(ACCOUNT, app).await.unwrap_err();
        assert!(matches!(err, CloudflareError::InvalidInput(_)), "{err}");
        let err = cf.update_access_app(ACCOUNT, APP, app).await.unwrap_err();
        assert!(matches!(err, CloudflareError::InvalidInput(_)), "{err}");
    }
    let email = || vec![AccessRule::email("ops@example.com")];
    let policies = [
        NewAccessPolicy::new(" ", AccessDecision::Allow, email()),
        NewAccessPolicy::new("p", AccessDecision::Unknown, email()),
        NewAccessPolicy::new("p", AccessDecision::Allow, Vec::new()),
    ];
    for policy in &policies {
        let err = cf.create_access_policy(ACCOUNT, policy).await.unwrap_err();
        assert!(matches!(err, CloudflareError::InvalidInput(_)), "{err}");
        let err = cf
            .update_access_policy(ACCOUNT, POLICY, policy)
            .await
            .unwrap_err();
        assert!(matches!(err, CloudflareError::InvalidInput(_)), "{err}");
    }
    assert_eq!(log.count(), 0);
}
