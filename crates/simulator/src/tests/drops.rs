//! Dropped connections: no answer, over HTTP and in-process, with and without the effect.
use http::{Method, StatusCode};
use serde_json::{Value, json};

use super::*;
use crate::{Fault, Operation};

fn create_tunnel_headers() -> [(&'static str, String); 2] {
    [
        ("authorization", format!("Bearer {TOKEN}")),
        ("content-type", "application/json".to_string()),
    ]
}

async fn try_create_tunnel(sim: &Simulator, name: &str) -> Result<Answer, axum::Error> {
    let headers = create_tunnel_headers();
    let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
    let body = json!({ "name": name }).to_string();
    try_send_raw(sim, Method::POST, &tunnels_path(sim), &headers, Some(body)).await
}

#[tokio::test]
async fn drop_next_fails_the_in_process_body_and_applies_nothing() {
    let sim = sim();
    sim.inject(Operation::CreateTunnel, Fault::drop_next(1));
    assert!(try_create_tunnel(&sim, "lost").await.is_err());
    assert!(sim.tunnels().is_empty());
    let retried = try_create_tunnel(&sim, "lost").await.expect("answered");
    assert_eq!(retried.status, StatusCode::OK);
    assert_eq!(sim.tunnels().len(), 1);
}

#[tokio::test]
async fn drop_after_apply_commits_the_write_and_fails_the_in_process_body() {
    let sim = sim();
    sim.inject(Operation::CreateTunnel, Fault::drop_after_apply(1));
    assert!(try_create_tunnel(&sim, "committed").await.is_err());
    let names: Vec<String> = sim.tunnels().into_iter().map(|t| t.name).collect();
    assert_eq!(names, vec!["committed".to_string()]);
    let retried = try_create_tunnel(&sim, "committed")
        .await
        .expect("answered");
    assert_eq!(
        (retried.status, retried.code()),
        (StatusCode::CONFLICT, 1013)
    );
}

#[tokio::test]
async fn a_dropped_call_is_logged_with_status_zero_and_no_response_body() {
    let sim = sim();
    sim.inject(Operation::CreateTunnel, Fault::drop_after_apply(1));
    let _ = try_create_tunnel(&sim, "logged").await;
    let log = sim.request_log();
    assert_eq!(log.len(), 1);
    assert_eq!(
        (log[0].operation, log[0].status, &log[0].response_body),
        (Some(Operation::CreateTunnel), 0, &Value::Null)
    );
    assert_eq!(log[0].request_body, Some(json!({ "name": "logged" })));
}

/// Sends one create over HTTP; `Err` when the client saw a transport failure.
async fn create_over_http(url: &str, account: &str) -> Result<(u16, Value), reqwest::Error> {
    let response = reqwest::Client::new()
        .post(format!("{url}/accounts/{account}/cfd_tunnel"))
        .bearer_auth(TOKEN)
        .json(&json!({ "name": "over-http" }))
        .send()
        .await?;
    let status = response.status().as_u16();
    Ok((status, response.json().await?))
}

/// The client got no HTTP answer at all: the request itself failed, with no status.
fn assert_transport_error(outcome: Result<(u16, Value), reqwest::Error>) {
    match outcome {
        Ok(answer) => panic!("expected no answer, got {answer:?}"),
        Err(error) => assert_eq!(
            (error.is_request(), error.status()),
            (true, None),
            "{error:?}"
        ),
    }
}

#[tokio::test]
async fn over_http_a_dropped_answer_is_a_transport_error_while_the_write_is_committed() {
    crate::install_crypto_provider();
    let sim = sim();
    let running = sim
        .serve("127.0.0.1:0".parse().expect("addr"))
        .await
        .expect("bind");
    sim.inject(Operation::CreateTunnel, Fault::drop_after_apply(1));
    let lost = create_over_http(&running.url, &sim.account_id()).await;
    assert_transport_error(lost);
    assert_eq!(sim.tunnels().len(), 1);
    let (status, body) = create_over_http(&running.url, &sim.account_id())
        .await
        .expect("answered");
    assert_eq!(
        (status, body["errors"][0]["code"].clone()),
        (409, json!(1013))
    );
    running.shutdown().await;
}

#[tokio::test]
async fn over_http_drop_next_is_a_transport_error_and_applies_nothing() {
    crate::install_crypto_provider();
    let sim = sim();
    let running = sim
        .serve("127.0.0.1:0".parse().expect("addr"))
        .await
        .expect("bind");
    sim.inject(Operation::CreateTunnel, Fault::drop_next(1));
    let lost = create_over_http(&running.url, &sim.account_id()).await;
    assert_transport_error(lost);
    assert!(sim.tunnels().is_empty());
    let (status, _) = create_over_http(&running.url, &sim.account_id())
        .await
        .expect("answered");
    assert_eq!(status, 200);
    assert_eq!(sim.tunnels().len(), 1);
    running.shutdown().await;
}
