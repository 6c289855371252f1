//! Behaviour tests driving the router in-process, plus one through a real socket.
mod access;
mod access_checks;
mod auth;
mod budget;
mod certificates;
mod cli_options;
mod detached;
mod dns;
mod drops;
mod fault_targets;
mod faults;
mod quota;
mod rate_limit_blocks;
mod server;
mod tunnels;

use axum::body::Body;
use http::{HeaderMap, Method, Request, StatusCode};
use serde_json::{Value, json};
use tower::ServiceExt;

use super::{SimConfig, Simulator};

pub(super) const TOKEN: &str = "sim-test-token";

/// A second accepted token, to show that limits are per credential.
pub(super) const OTHER_TOKEN: &str = "sim-other-token";

/// The test simulator accepting [`TOKEN`] and [`OTHER_TOKEN`].
pub(super) fn two_token_sim() -> Simulator {
    Simulator::new(SimConfig {
        tokens: vec![TOKEN.into(), OTHER_TOKEN.into()],
        api_keys: vec![("ops@example.com".into(), "global-key".into())],
        ..SimConfig::default()
    })
}

pub(super) fn sim() -> Simulator {
    Simulator::new(SimConfig {
        account_name: "Test Account".into(),
        account_id: None,
        zones: vec!["example.com".into(), "example.org".into()],
        pending_zones: Vec::new(),
        tokens: vec![TOKEN.into()],
        api_keys: vec![("ops@example.com".into(), "global-key".into())],
        ..SimConfig::default()
    })
}

/// One answered request: status, headers, JSON body.
pub(super) struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Value,
}

impl Answer {
    /// `name` of every item of the result list.
    pub fn names(&self) -> Vec<Value> {
        let items = self.result().as_array().cloned().unwrap_or_default();
        items.iter().map(|item| item["name"].clone()).collect()
    }

    pub fn code(&self) -> i64 {
        self.body["errors"][0]["code"].as_i64().unwrap_or(0)
    }

    pub fn result(&self) -> &Value {
        &self.body["result"]
    }
}

/// Sends a request with the test token; `body` is raw text so malformed JSON can be sent.
/// The answer is an error envelope with this status, error code and first message.
pub(super) fn assert_refused(answer: &Answer, status: StatusCode, code: i64, message: &str) {
    assert_eq!(
        (answer.status, answer.code()),
        (status, code),
        "{}",
        answer.body
    );
    assert_eq!(
        answer.body["errors"][0]["message"], message,
        "{}",
        answer.body
    );
}

pub(super) async fn send_raw(
    sim: &Simulator,
    method: Method,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<String>,
) -> Answer {
    try_send_raw(sim, method, path, headers, body)
        .await
        .expect("body")
}

/// Like [`send_raw`], but a body that fails to arrive (a dropped connection) is the error.
pub(super) async fn try_send_raw(
    sim: &Simulator,
    method: Method,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<String>,
) -> Result<Answer, axum::Error> {
    let mut builder = Request::builder().method(method).uri(path);
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    let request = builder
        .body(body.map(Body::from).unwrap_or_else(Body::empty))
        .expect("request");
    let response = sim
        .router()
        .oneshot(request)
        .await
        .expect("infallible router");
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await?;
    let body = serde_json::from_slice(&bytes).expect("every answer is JSON");
    Ok(Answer {
        status,
        headers,
        body,
    })
}

pub(super) async fn call(
    sim: &Simulator,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> Answer {
    call_as(sim, TOKEN, method, path, body).await
}

/// A call with another Bearer token than the test token.
pub(super) async fn call_as(
    sim: &Simulator,
    token: &str,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> Answer {
    let auth = format!("Bearer {token}");
    let headers = [
        ("authorization", auth.as_str()),
        ("content-type", "application/json"),
    ];
    send_raw(sim, method, path, &headers, body.map(|b| b.to_string())).await
}

/// The named header as text, `None` when absent.
pub(super) fn header<'a>(answer: &'a Answer, name: &str) -> Option<&'a str> {
    answer.headers.get(name).and_then(|v| v.to_str().ok())
}

/// A GET of `path`.
pub(super) async fn get(sim: &Simulator, path: &str) -> Answer {
    call(sim, Method::GET, path, None).await
}

pub(super) fn tunnels_path(sim: &Simulator) -> String {
    format!("/accounts/{}/cfd_tunnel", sim.account_id())
}

pub(super) fn records_path(sim: &Simulator, zone: &str) -> String {
    format!("/zones/{}/dns_records", sim.zone_id(zone).expect("zone"))
}

/// Creates a tunnel and returns its id.
pub(super) async fn create_tunnel(sim: &Simulator, name: &str) -> String {
    let answer = call(
        sim,
        Method::POST,
        &tunnels_path(sim),
        Some(json!({ "name": name })),
    )
    .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    answer.result()["id"]
        .as_str()
        .expect("tunnel id")
        .to_string()
}

/// Creates a DNS record and returns its id.
pub(super) async fn create_record(sim: &Simulator, zone: &str, record: Value) -> String {
    let answer = call(sim, Method::POST, &records_path(sim, zone), Some(record)).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    answer.result()["id"]
        .as_str()
        .expect("record id")
        .to_string()
}
