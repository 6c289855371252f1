//! Zero Trust Access: the organization, applications and reusable policies (their body checks
//! are in `access_checks`), and the fault and limit machinery they share with the other calls.
use std::collections::BTreeSet;
use std::time::Duration;

use http::{Method, StatusCode};
use serde_json::{Value, json};

use super::*;
use crate::{Fault, FaultTarget, Operation, RequestBudget};

const TEAM: &str = "acme";

pub(super) fn access_sim() -> Simulator {
    let sim = sim();
    sim.set_access_team(Some(TEAM.into()));
    sim
}

pub(super) fn access_path(sim: &Simulator, rest: &str) -> String {
    format!("/accounts/{}/access/{rest}", sim.account_id())
}

pub(super) fn allow_ops() -> Value {
    json!({
        "name": "ops",
        "decision": "allow",
        "include": [{ "email": { "email": "ops@example.com" } }],
    })
}

/// Creates a reusable policy and returns its id.
pub(super) async fn create_policy(sim: &Simulator, body: Value) -> String {
    let answer = call(sim, Method::POST, &access_path(sim, "policies"), Some(body)).await;
    assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.body);
    answer.result()["id"].as_str().expect("id").to_string()
}

/// Creates an application; the whole answer.
pub(super) async fn create_app(sim: &Simulator, body: Value) -> Answer {
    call(sim, Method::POST, &access_path(sim, "apps"), Some(body)).await
}

pub(super) fn app(domain: &str) -> Value {
    json!({ "type": "self_hosted", "name": domain, "domain": domain })
}

#[tokio::test]
async fn the_organization_exists_only_with_a_team() {
    let sim = sim();
    let path = access_path(&sim, "organizations");
    let refused = get(&sim, &path).await;
    assert_refused(
        &refused,
        StatusCode::BAD_REQUEST,
        9999,
        "access.api.error.not_enabled: Access is not enabled",
    );
    for rest in ["apps", "policies"] {
        let answer = get(&sim, &access_path(&sim, rest)).await;
        assert_eq!(
            (answer.status, answer.code()),
            (StatusCode::BAD_REQUEST, 9999)
        );
    }
    assert_eq!(sim.access_organization(), None);

    sim.set_access_team(Some(TEAM.into()));
    let org = get(&sim, &path).await;
    assert_eq!(org.status, StatusCode::OK, "{}", org.body);
    assert_eq!(
        (&org.result()["name"], &org.result()["auth_domain"]),
        (&json!(TEAM), &json!("acme.cloudflareaccess.com"))
    );
    let created = org.result()["created_at"].clone();
    sim.set_access_team(Some(TEAM.into()));
    assert_eq!(get(&sim, &path).await.result()["created_at"], created);

    sim.set_access_team(None);
    assert_eq!(get(&sim, &path).await.code(), 9999);

    let configured = Simulator::new(SimConfig {
        tokens: vec![TOKEN.into()],
        access_team: Some("team-b".into()),
        ..SimConfig::default()
    });
    let answer = get(&configured, &access_path(&configured, "organizations")).await;
    assert_eq!(
        answer.result()["auth_domain"],
        "team-b.cloudflareaccess.com"
    );
}

#[tokio::test]
async fn another_account_is_refused_before_the_organization_is_consulted() {
    let sim = access_sim();
    let answer = get(&sim, &format!("/accounts/{}/access/apps", "0".repeat(32))).await;
    assert_refused(
        &answer,
        StatusCode::FORBIDDEN,
        10000,
        "Authentication error",
    );
}

#[tokio::test]
async fn every_application_gets_a_uuid_and_its_own_64_hex_audience_tag() {
    let sim = access_sim();
    let mut auds = BTreeSet::new();
    for i in 0..20 {
        let answer = create_app(&sim, app(&format!("app{i}.example.com"))).await;
        assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.body);
        let result = answer.result();
        assert!(uuid::Uuid::try_parse(result["id"].as_str().expect("id")).is_ok());
        let aud = result["aud"].as_str().expect("aud");
        assert!(
            aud.len() == 64
                && aud
                    .chars()
                    .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()),
            "{aud}"
        );
        auds.insert(aud.to_string());
        assert_eq!(
            (&result["type"], &result["session_duration"]),
            (&json!("self_hosted"), &json!("24h"))
        );
        assert_eq!(result["created_at"], result["updated_at"]);
    }
    assert_eq!(auds.len(), 20, "audience tags are unique");
    let stored: BTreeSet<String> = sim.access_apps().into_iter().map(|a| a.aud).collect();
    assert_eq!(stored, auds);
}

#[tokio::test]
async fn reusable_policies_are_attached_in_precedence_order_and_counted() {
    let sim = access_sim();
    let ops = create_policy(&sim, allow_ops()).await;
    let robots = create_policy(
        &sim,
        json!({
            "name": "robots",
            "decision": "non_identity",
            "include": [{ "any_valid_service_token": {} }],
            "exclude": [{ "service_token": { "token_id": "5d1f0f0e-59d3-4a4a-9d5f-1b1c1d1e1f10" } }],
            "require": [{ "email_domain": { "domain": "example.com" } }],
            "session_duration": "30m",
        }),
    )
    .await;
    let mut body = app("admin.example.com/panel");
    body["policies"] = json!([{ "id": ops, "precedence": 2 }, { "id": robots, "precedence": 1 }]);
    body["session_duration"] = json!("2h45m");
    let created = create_app(&sim, body).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let policies = created.result()["policies"].as_array().expect("policies");
    let order: Vec<(&Value, &Value)> = policies
        .iter()
        .map(|p| (&p["name"], &p["precedence"]))
        .collect();
    assert_eq!(
        order,
        [(&json!("robots"), &json!(1)), (&json!("ops"), &json!(2))]
    );
    assert_eq!(policies[0]["decision"], "non_identity");
    assert_eq!(policies[1]["include"], allow_ops()["include"]);
    assert_eq!(policies[0]["reusable"], true);

    let fetched = get(&sim, &access_path(&sim, &format!("policies/{ops}"))).await;
    assert_eq!(
        (
            &fetched.result()["app_count"],
            &fetched.result()["reusable"]
        ),
        (&json!(1), &json!(true))
    );
    let stored = &sim.access_apps()[0];
    assert_eq!(
        (
            stored.policies[0].id.as_str(),
            stored.policies[1].id.as_str()
        ),
        (robots.as_str(), ops.as_str())
    );

    // Plain ids are linked in list order; an updated policy shows through the app.
    let id = created.result()["id"].as_str().expect("id").to_string();
    let mut relinked = app("admin.example.com/panel");
    relinked["policies"] = json!([ops]);
    let put = call(
        &sim,
        Method::PUT,
        &access_path(&sim, &format!("apps/{id}")),
        Some(relinked),
    )
    .await;
    assert_eq!(put.status, StatusCode::OK, "{}", put.body);
    assert_eq!(
        put.result()["session_duration"],
        "24h",
        "a PUT replaces the whole app"
    );
    let mut renamed = allow_ops();
    renamed["name"] = json!("operators");
    let policy_path = access_path(&sim, &format!("policies/{ops}"));
    assert_eq!(
        call(&sim, Method::PUT, &policy_path, Some(renamed))
            .await
            .status,
        StatusCode::OK
    );
    let app_now = get(&sim, &access_path(&sim, &format!("apps/{id}"))).await;
    assert_eq!(
        (
            &app_now.result()["policies"][0]["name"],
            &app_now.result()["policies"][0]["precedence"]
        ),
        (&json!("operators"), &json!(1))
    );
}

#[tokio::test]
async fn a_policy_in_use_cannot_be_deleted_until_no_app_links_it() {
    let sim = access_sim();
    let ops = create_policy(&sim, allow_ops()).await;
    let mut body = app("app.example.com");
    body["policies"] = json!([ops]);
    let id = create_app(&sim, body).await.result()["id"]
        .as_str()
        .expect("id")
        .to_string();
    let policy_path = access_path(&sim, &format!("policies/{ops}"));
    let refused = call(&sim, Method::DELETE, &policy_path, None).await;
    assert_eq!(
        (refused.status, refused.code()),
        (StatusCode::CONFLICT, 12130)
    );
    assert_eq!(sim.access_policies().len(), 1);
    let app_path = access_path(&sim, &format!("apps/{id}"));
    call(&sim, Method::PUT, &app_path, Some(app("app.example.com"))).await;
    let done = call(&sim, Method::DELETE, &policy_path, None).await;
    assert_eq!(
        (done.status, done.result()),
        (StatusCode::ACCEPTED, &json!({ "id": ops }))
    );
}

#[tokio::test]
async fn deletes_are_real() {
    let sim = access_sim();
    let ops = create_policy(&sim, allow_ops()).await;
    let id = create_app(&sim, app("app.example.com")).await.result()["id"]
        .as_str()
        .expect("id")
        .to_string();
    for (path, id) in [
        (access_path(&sim, &format!("apps/{id}")), id.as_str()),
        (access_path(&sim, &format!("policies/{ops}")), ops.as_str()),
    ] {
        let deleted = call(&sim, Method::DELETE, &path, None).await;
        assert_eq!(
            (deleted.status, deleted.result()),
            (StatusCode::ACCEPTED, &json!({ "id": id }))
        );
        for method in [Method::GET, Method::DELETE] {
            let gone = call(&sim, method, &path, None).await;
            assert_refused(
                &gone,
                StatusCode::NOT_FOUND,
                12135,
                "access.api.error.not_found",
            );
        }
    }
    assert!(sim.access_apps().is_empty() && sim.access_policies().is_empty());
    assert_eq!(
        get(&sim, &access_path(&sim, "apps")).await.result(),
        &json!([])
    );
    let update = call(
        &sim,
        Method::PUT,
        &access_path(&sim, &format!("apps/{id}")),
        Some(app("app.example.com")),
    )
    .await;
    assert_eq!(update.code(), 12135);
}

#[tokio::test]
async fn someone_elses_application_on_the_same_domain_is_listed_beside_ours() {
    let sim = access_sim();
    let theirs = sim
        .put_access_app(
            json!({ "type": "self_hosted", "name": "theirs", "domain": "app.example.com" }),
        )
        .expect("seeded");
    assert_eq!(
        sim.calls(Operation::CreateAccessApp),
        0,
        "seeding is no call"
    );
    assert_eq!(theirs.aud.len(), 64);
    assert!(
        sim.put_access_app(json!({ "type": "self_hosted", "domain": "x.elsewhere.net" }))
            .is_none()
    );
    let ours = create_app(&sim, app("app.example.com")).await;
    assert_eq!(
        ours.status,
        StatusCode::CREATED,
        "a shared domain is accepted: {}",
        ours.body
    );
    assert_ne!(ours.result()["aud"], json!(theirs.aud));
    let listed = get(&sim, &access_path(&sim, "apps")).await;
    assert_eq!(listed.names(), [json!("theirs"), json!("app.example.com")]);
}

#[tokio::test]
async fn lists_are_paged() {
    let sim = access_sim();
    for i in 0..5 {
        create_app(&sim, app(&format!("p{i}.example.com"))).await;
        let mut policy = allow_ops();
        policy["name"] = json!(format!("policy {i}"));
        create_policy(&sim, policy).await;
    }
    for rest in ["apps", "policies"] {
        let page = get(
            &sim,
            &format!("{}?page=3&per_page=2", access_path(&sim, rest)),
        )
        .await;
        assert_eq!(page.result().as_array().map(Vec::len), Some(1), "{rest}");
        assert_eq!(
            page.body["result_info"],
            json!({ "page": 3, "per_page": 2, "count": 1, "total_count": 5, "total_pages": 3 })
        );
    }
}

#[tokio::test]
async fn faults_and_counters_apply_to_access_calls() {
    let sim = access_sim();
    sim.inject(Operation::CreateAccessApp, Fault::fail_next(1, 503));
    let failed = create_app(&sim, app("app.example.com")).await;
    assert_eq!(
        (failed.status, failed.code()),
        (StatusCode::SERVICE_UNAVAILABLE, 10001)
    );
    assert!(
        sim.access_apps().is_empty(),
        "a rejected call has no effect"
    );

    sim.inject(
        Operation::CreateAccessPolicy,
        Fault::fail_after_apply(1, 504),
    );
    let lost = call(
        &sim,
        Method::POST,
        &access_path(&sim, "policies"),
        Some(allow_ops()),
    )
    .await;
    assert_eq!(lost.status, StatusCode::GATEWAY_TIMEOUT);
    assert_eq!(
        sim.access_policies().len(),
        1,
        "the write happened before the failure"
    );

    sim.inject_on(
        FaultTarget::Path {
            method: Some(Method::GET),
            contains: "/access/".into(),
        },
        Fault::rate_limit_next(1, 7),
    );
    let limited = get(&sim, &access_path(&sim, "organizations")).await;
    assert_eq!(
        (limited.status, header(&limited, "retry-after")),
        (StatusCode::TOO_MANY_REQUESTS, Some("7"))
    );
    sim.inject(Operation::ListAccessApps, Fault::drop_next(1));
    let dropped = try_send_raw(
        &sim,
        Method::GET,
        &access_path(&sim, "apps"),
        &[("authorization", &format!("Bearer {TOKEN}"))],
        None,
    )
    .await;
    assert!(dropped.is_err(), "the connection is dropped");
    assert_eq!(
        [
            Operation::CreateAccessApp,
            Operation::CreateAccessPolicy,
            Operation::GetAccessOrganization,
            Operation::ListAccessApps
        ]
        .map(|op| sim.calls(op)),
        [1, 1, 1, 1]
    );
    let logged: Vec<(Option<Operation>, u16)> = sim
        .request_log()
        .iter()
        .map(|l| (l.operation, l.status))
        .collect();
    assert_eq!(
        logged,
        [
            (Some(Operation::CreateAccessApp), 503),
            (Some(Operation::CreateAccessPolicy), 504),
            (Some(Operation::GetAccessOrganization), 429),
            (Some(Operation::ListAccessApps), 0),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn access_calls_spend_the_request_budget_like_the_others() {
    let sim = access_sim();
    sim.set_budget(Some(RequestBudget {
        requests: 2,
        window: Duration::from_secs(60),
        block: Duration::from_secs(30),
    }));
    let org = access_path(&sim, "organizations");
    let statuses = [
        get(&sim, &org).await,
        get(&sim, "/zones").await,
        get(&sim, &access_path(&sim, "policies")).await,
    ]
    .map(|a| {
        (
            a.status.as_u16(),
            header(&a, "retry-after").map(str::to_string),
        )
    });
    assert_eq!(
        statuses,
        [(200, None), (200, None), (429, Some("30".into()))]
    );
    assert_eq!(sim.budget_refusals(), 1);
    let answer = get(&sim, &org).await;
    assert_eq!(answer.code(), 971, "blocked for every call of the token");
}

#[test]
fn every_access_operation_is_routed_to_its_own_path() {
    let access: Vec<Operation> = Operation::ALL
        .into_iter()
        .filter(Operation::is_access)
        .collect();
    assert_eq!(access.len(), 11);
    let routes: BTreeSet<(String, &str)> = access
        .iter()
        .map(|op| (op.method().to_string(), op.path_template()))
        .collect();
    assert_eq!(routes.len(), 11);
    assert!(access.iter().all(|op| op.operation_id().is_some()));
}
