//! Contract between the Cloudflare client, the simulator and Cloudflare's Zero Trust Access
//! subset: every Access operation is round-tripped client → simulator, and every request the
//! client sends and every answer the simulator gives, refusals included, validates against
//! the Access subset (`tests/data/cloudflare-openapi-access-subset.json`).
#[allow(dead_code)] // the DNS and tunnel contract test uses the rest of it
mod openapi;

use std::collections::BTreeSet;

use axum::body::Body;
use cftunnel_cloudflare::{
    AccessDecision, AccessRule, CloudflareClient, Credentials, NewAccessApp, NewAccessPolicy,
    RateLimit, Transport,
};
use cftunnel_sim::{Fault, LoggedRequest, Operation, SimConfig, Simulator};
use http::{Method, Request};
use openapi::OpenApi;
use serde_json::{Value, json};
use tower::ServiceExt;

const TOKEN: &str = "access-contract-token";
const TEAM: &str = "contract";

fn simulator(team: Option<&str>) -> Simulator {
    Simulator::new(SimConfig {
        account_name: "Access contract".into(),
        zones: vec!["example.com".into()],
        tokens: vec![TOKEN.into()],
        access_team: team.map(str::to_string),
        ..SimConfig::default()
    })
}

fn client(sim: &Simulator) -> CloudflareClient {
    CloudflareClient::builder(Credentials::ApiToken(TOKEN.into()))
        .transport(Transport::InProcess(sim.router()))
        .rate_limit(RateLimit {
            per_second: 1000,
            burst: 1000,
        })
        .max_attempts(1)
        .build()
        .expect("client")
}

/// The subset's application schemas are an `anyOf` of every type, loose enough to take almost
/// any object; the self-hosted branch (the first) is what the client sends and the simulator
/// answers, so bodies are held to it as well.
const SELF_HOSTED_REQUEST: &str = "#/components/schemas/access_app_request/anyOf/0";
const SELF_HOSTED_RESPONSE: &str = "#/components/schemas/access_app_response/anyOf/0";

fn self_hosted(api: &OpenApi, schema: &str, instance: &Value, entry: &LoggedRequest) {
    api.check(&json!({ "$ref": schema }), instance)
        .unwrap_or_else(|e| {
            panic!(
                "{} {}: not a self-hosted application: {e}\n{instance}",
                entry.method, entry.path
            )
        });
}

/// The operation of a logged Access call and its `operationId`.
fn operation_of(entry: &LoggedRequest) -> (Operation, &'static str) {
    let op = entry
        .operation
        .unwrap_or_else(|| panic!("no route for {} {}", entry.method, entry.path));
    assert!(op.is_access(), "{op:?} is not an Access call");
    (
        op,
        op.operation_id()
            .expect("every Access call is in the subset"),
    )
}

/// The applications an answer carries.
fn answered_apps(op: Operation, entry: &LoggedRequest) -> Vec<&Value> {
    if !(200..300).contains(&entry.status) {
        return Vec::new();
    }
    match (op, &entry.response_body["result"]) {
        (Operation::ListAccessApps, Value::Array(apps)) => apps.iter().collect(),
        (
            Operation::CreateAccessApp | Operation::GetAccessApp | Operation::UpdateAccessApp,
            app,
        ) => {
            vec![app]
        }
        _ => Vec::new(),
    }
}

/// Validates every logged request and answer; returns the operations seen.
fn check_log(api: &OpenApi, log: &[LoggedRequest]) -> BTreeSet<Operation> {
    let mut seen = BTreeSet::new();
    for entry in log {
        let (op, op_id) = operation_of(entry);
        api.validate_request(op_id, entry.request_body.as_ref())
            .unwrap_or_else(|e| panic!("{} {}: {e}", entry.method, entry.path));
        api.validate_query(op_id, &entry.query)
            .unwrap_or_else(|e| panic!("{} {}: {e}", entry.method, entry.path));
        api.check_response(op_id, entry);
        if let (Operation::CreateAccessApp | Operation::UpdateAccessApp, Some(body)) =
            (op, &entry.request_body)
        {
            self_hosted(api, SELF_HOSTED_REQUEST, body, entry);
        }
        for app in answered_apps(op, entry) {
            self_hosted(api, SELF_HOSTED_RESPONSE, app, entry);
        }
        seen.insert(op);
    }
    seen
}

/// Validates every logged answer (for requests sent malformed on purpose).
fn check_answers(api: &OpenApi, log: &[LoggedRequest]) {
    for entry in log {
        api.check_response(operation_of(entry).1, entry);
    }
}

fn access_operations() -> BTreeSet<Operation> {
    Operation::ALL
        .into_iter()
        .filter(Operation::is_access)
        .collect()
}

#[test]
fn the_access_operations_are_exactly_those_of_the_subset() {
    let api = OpenApi::load_access();
    let ids: BTreeSet<&str> = access_operations()
        .iter()
        .map(|op| op.operation_id().expect("operation id"))
        .collect();
    assert_eq!(ids.len(), 11);
    for id in &ids {
        assert!(api.has_operation(id), "{id}");
    }
}

#[tokio::test]
async fn every_access_call_round_trips_and_validates() {
    let sim = simulator(Some(TEAM));
    let cf = client(&sim);
    let account = sim.account_id();

    let org = cf
        .access_organization(&account)
        .await
        .expect("organization")
        .expect("the account has Zero Trust");
    assert_eq!(
        (org.team(), org.auth_domain.as_str()),
        (Some(TEAM), "contract.cloudflareaccess.com")
    );

    let ops = cf
        .create_access_policy(
            &account,
            &NewAccessPolicy::new(
                "ops",
                AccessDecision::Allow,
                vec![
                    AccessRule::email("ops@example.com"),
                    AccessRule::email_domain("example.org"),
                    AccessRule::group("aa0a4aab-672b-4bdb-bc33-a59f1130a11f"),
                ],
            ),
        )
        .await
        .expect("create policy");
    let mut robots = NewAccessPolicy::new(
        "robots",
        AccessDecision::NonIdentity,
        vec![AccessRule::any_valid_service_token()],
    );
    robots.exclude = vec![AccessRule::service_token(
        "5d1f0f0e-59d3-4a4a-9d5f-1b1c1d1e1f10",
    )];
    robots.require = vec![AccessRule::everyone()];
    robots.session_duration = Some("30m".into());
    let robots = cf
        .create_access_policy(&account, &robots)
        .await
        .expect("create second policy");
    assert_eq!(
        (robots.reusable, robots.app_count, robots.decision),
        (Some(true), Some(0), AccessDecision::NonIdentity)
    );

    let new = NewAccessApp::self_hosted("Admin", "admin.example.com/panel")
        .with_policies([robots.id.clone(), ops.id.clone()])
        .with_session_duration("2h45m");
    let app = cf
        .create_access_app(&account, &new)
        .await
        .expect("create app");
    assert_eq!(app.aud.len(), 64);
    let linked: Vec<(&str, Option<i64>)> = app
        .policies
        .iter()
        .map(|p| (p.policy.name.as_str(), p.precedence))
        .collect();
    assert_eq!(linked, [("robots", Some(1)), ("ops", Some(2))]);
    assert_eq!(app.policies[1].policy.include.len(), 3);

    // Someone else's application on the same domain: listed, told apart by id.
    let theirs = sim
        .put_access_app(
            json!({"type": "self_hosted", "name": "theirs", "domain": "admin.example.com/panel"}),
        )
        .expect("seeded");
    let on_domain = cf
        .list_access_apps(&account, Some("ADMIN.example.com/panel"))
        .await
        .expect("list apps");
    let ids: Vec<&str> = on_domain.iter().map(|a| a.id.as_str()).collect();
    assert_eq!(ids, [app.id.as_str(), theirs.id.as_str()]);
    assert!(
        cf.list_access_apps(&account, Some("other.example.com"))
            .await
            .expect("list apps")
            .is_empty()
    );

    let fetched = cf.get_access_app(&account, &app.id).await.expect("get app");
    assert_eq!(
        (fetched.aud.as_str(), fetched.name.as_str()),
        (app.aud.as_str(), "Admin")
    );
    let moved = cf
        .update_access_app(
            &account,
            &app.id,
            &NewAccessApp::self_hosted("Admin", "admin.example.com")
                .with_policies([ops.id.clone()]),
        )
        .await
        .expect("update app");
    assert_eq!(
        (moved.id.as_str(), moved.aud.as_str(), moved.domain.as_str()),
        (app.id.as_str(), app.aud.as_str(), "admin.example.com"),
        "a PUT keeps the id and the audience tag"
    );
    assert_eq!(moved.session_duration.as_deref(), Some("24h"));

    let mut renamed = NewAccessPolicy::new(
        "operators",
        AccessDecision::Allow,
        vec![AccessRule::email("ops@example.com")],
    );
    renamed.session_duration = Some("8h".into());
    let updated = cf
        .update_access_policy(&account, &ops.id, &renamed)
        .await
        .expect("update policy");
    assert_eq!(
        (updated.name.as_str(), updated.app_count),
        ("operators", Some(1))
    );
    let got = cf
        .get_access_policy(&account, &ops.id)
        .await
        .expect("get policy");
    assert_eq!(got.session_duration.as_deref(), Some("8h"));
    let names: Vec<String> = cf
        .list_access_policies(&account)
        .await
        .expect("list policies")
        .into_iter()
        .map(|p| p.name)
        .collect();
    assert_eq!(names, ["operators", "robots"]);

    let in_use = cf
        .delete_access_policy(&account, &ops.id)
        .await
        .expect_err("the app still links it");
    assert_eq!(in_use.status(), Some(409), "{in_use}");
    cf.delete_access_app(&account, &app.id)
        .await
        .expect("delete app");
    let gone = cf
        .get_access_app(&account, &app.id)
        .await
        .expect_err("deleted");
    assert!(gone.is_not_found(), "{gone}");
    cf.delete_access_policy(&account, &ops.id)
        .await
        .expect("delete policy");
    let gone = cf
        .delete_access_policy(&account, &ops.id)
        .await
        .expect_err("already deleted");
    assert!(gone.is_not_found(), "{gone}");

    let seen = check_log(&OpenApi::load_access(), &sim.request_log());
    assert_eq!(seen, access_operations(), "every Access call is exercised");
}

#[tokio::test]
async fn the_lists_walk_every_page() {
    let sim = simulator(Some(TEAM));
    let cf = client(&sim);
    let account = sim.account_id();
    for i in 0..51 {
        let body = json!({"type": "self_hosted", "domain": format!("a{i}.example.com")});
        sim.put_access_app(body).expect("seeded");
    }
    let apps = cf.list_access_apps(&account, None).await.expect("list");
    assert_eq!(apps.len(), 51);
    let queries: Vec<String> = sim.request_log().iter().map(|l| l.query.clone()).collect();
    assert_eq!(queries, ["page=1&per_page=50", "page=2&per_page=50"]);
    check_log(&OpenApi::load_access(), &sim.request_log());
}

async fn raw(sim: &Simulator, method: Method, path: &str, body: Option<Value>) {
    let mut request = Request::builder()
        .method(method)
        .uri(path)
        .header("authorization", format!("Bearer {TOKEN}"));
    if body.is_some() {
        request = request.header("content-type", "application/json");
    }
    let request = request
        .body(
            body.map(|b| Body::from(b.to_string()))
                .unwrap_or_else(Body::empty),
        )
        .expect("request");
    sim.router().oneshot(request).await.expect("router answers");
}

#[tokio::test]
async fn refusals_validate_against_the_access_subset() {
    let sim = simulator(None);
    let cf = client(&sim);
    let account = sim.account_id();
    assert_eq!(
        cf.access_organization(&account).await.expect("answered"),
        None
    );
    let disabled = cf
        .list_access_apps(&account, None)
        .await
        .expect_err("no Zero Trust");
    assert!(disabled.is_access_not_enabled(), "{disabled}");

    sim.set_access_team(Some(TEAM.into()));
    let apps = format!("/accounts/{account}/access/apps");
    let policies = format!("/accounts/{account}/access/policies");
    let unknown = "6ff42ae2-765d-4adf-8112-31c55c1551ef";
    raw(&sim, Method::GET, &format!("{apps}/{unknown}"), None).await; // 404
    raw(
        &sim,
        Method::POST,
        &apps,
        Some(json!({"domain": "a.example.com"})),
    )
    .await; // 400 type
    raw(
        &sim,
        Method::POST,
        &apps,
        Some(json!({"type": "self_hosted", "domain": "a.elsewhere.net"})),
    )
    .await; // 400 zone
    raw(
        &sim,
        Method::POST,
        &apps,
        Some(json!({"type": "self_hosted", "domain": "a.example.com", "policies": [unknown]})),
    )
    .await; // 400 policy
    raw(
        &sim,
        Method::POST,
        &policies,
        Some(json!({"name": "x", "decision": "allow"})),
    )
    .await; // 400 include
    raw(&sim, Method::DELETE, &format!("{policies}/{unknown}"), None).await; // 404
    let policy = cf
        .create_access_policy(
            &account,
            &NewAccessPolicy::new("p", AccessDecision::Bypass, vec![AccessRule::everyone()]),
        )
        .await
        .expect("policy");
    cf.create_access_app(
        &account,
        &NewAccessApp::self_hosted("a", "a.example.com").with_policies([policy.id.clone()]),
    )
    .await
    .expect("app");
    raw(
        &sim,
        Method::DELETE,
        &format!("{policies}/{}", policy.id),
        None,
    )
    .await; // 409
    sim.inject(Operation::ListAccessPolicies, Fault::rate_limit_next(1, 5));
    raw(&sim, Method::GET, &policies, None).await; // 429
    sim.inject(Operation::GetAccessOrganization, Fault::fail_next(1, 503));
    let failed = cf.access_organization(&account).await.expect_err("503");
    assert!(failed.is_transient(), "{failed}");

    let log = sim.request_log();
    let statuses: Vec<u16> = log.iter().map(|l| l.status).collect();
    assert_eq!(
        statuses,
        [
            400, 400, 404, 400, 400, 400, 400, 404, 201, 201, 409, 429, 503
        ]
    );
    check_answers(&OpenApi::load_access(), &log);
}

#[test]
fn the_access_validator_catches_bodies_the_schema_forbids() {
    // Guards the guard: the checks above would pass vacuously if validation accepted anything.
    let api = OpenApi::load_access();
    let create = "access-applications-add-an-application";
    let good = json!({"type": "self_hosted", "domain": "a.example.com", "policies": [{"id": "p", "precedence": 1}]});
    assert_eq!(api.validate_request(create, Some(&good)), Ok(()));
    let unnamed = json!({"type": "self_hosted", "domain": "a.example.com", "name": 5});
    assert!(api.validate_request(create, Some(&unnamed)).is_err());
    // The create's anyOf takes a body without a domain; the self-hosted branch does not.
    let no_domain = json!({"type": "self_hosted", "name": "a"});
    assert_eq!(api.validate_request(create, Some(&no_domain)), Ok(()));
    assert!(
        api.check(&json!({"$ref": SELF_HOSTED_REQUEST}), &no_domain)
            .is_err()
    );
    let answer_without_domain = json!({"id": "x", "aud": "a", "type": "self_hosted"});
    assert!(
        api.check(
            &json!({"$ref": SELF_HOSTED_RESPONSE}),
            &answer_without_domain
        )
        .is_err()
    );
    let policy = "access-policies-create-an-access-reusable-policy";
    let no_include = json!({"name": "p", "decision": "allow"});
    assert!(api.validate_request(policy, Some(&no_include)).is_err());
    let bad_decision = json!({"name": "p", "decision": "maybe", "include": [{"everyone": {}}]});
    assert!(api.validate_request(policy, Some(&bad_decision)).is_err());
    let two_selectors = json!({"name": "p", "decision": "allow", "include": [{"everyone": {}, "email": {"email": "a@example.com"}}]});
    assert!(api.validate_request(policy, Some(&two_selectors)).is_err());
    let long_aud = json!({"success": true, "errors": [], "messages": [],
        "result": {"id": "x", "type": "self_hosted", "domain": "a.example.com", "aud": "a".repeat(65)}});
    assert!(
        api.validate_response(
            "access-applications-get-an-access-application",
            200,
            &long_aud
        )
        .is_err()
    );
    assert!(
        api.validate_response(create, 200, &long_aud).is_err(),
        "a create answers 201, not 200"
    );
    assert!(
        api.validate_query("access-applications-list-access-applications", "domain=a")
            .is_err()
    );
}
