//! Behaviour tests driving the router in-process, plus one through a real socket.
mod auth;
mod dns;
mod faults;
mod server;
mod tunnels;

use axum::body::Body;
use http::{HeaderMap, Method, Request, StatusCode};
use serde_json::{Value, json};
use tower::ServiceExt;

use super::{SimConfig, Simulator};

pub(super) const TOKEN: &str = "sim-test-token";

pub(super) fn sim() -> Simulator {
    Simulator::new(SimConfig {
        account_name: "Test Account".into(),
        account_id: None,
        zones: vec!["example.com".into(), "example.org".into()],
        pending_zones: Vec::new(),
        tokens: vec![TOKEN.into()],
        api_keys: vec![("ops@example.com".into(), "global-key".into())],
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
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .expect("body");
    let body = serde_json::from_slice(&bytes).expect("every answer is JSON");
    Answer {
        status,
        headers,
        body,
    }
}

pub(super) async fn call(
    sim: &Simulator,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> Answer {
    let auth = format!("Bearer {TOKEN}");
    let headers = [
        ("authorization", auth.as_str()),
        ("content-type", "application/json"),
    ];
    send_raw(sim, method, path, &headers, body.map(|b| b.to_string())).await
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
