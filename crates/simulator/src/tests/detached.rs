//! A simulator served on its own thread and runtime.
use std::io::{Read, Write};
use std::net::TcpStream;

use serde_json::Value;

use super::*;
use crate::{Fault, FaultTarget};

/// One raw HTTP/1.1 GET of the API base's `/zones`; the whole answer as text.
fn raw_get_zones(addr: std::net::SocketAddr) -> String {
    let mut stream = TcpStream::connect(addr).expect("connect");
    let request = format!(
        "GET /client/v4/zones HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {TOKEN}\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).expect("write");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("read");
    answer
}

#[test]
fn a_detached_simulator_answers_a_caller_that_has_no_runtime() {
    let sim = sim();
    let running = sim
        .serve_detached("127.0.0.1:0".parse().expect("addr"))
        .expect("bind");
    assert_eq!(running.url, format!("http://{}/client/v4", running.addr));
    let answer = raw_get_zones(running.addr);
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
    assert_eq!(sim.total_calls(), 1);
    let addr = running.addr;
    drop(running);
    assert!(TcpStream::connect(addr).is_err());
}

#[tokio::test(flavor = "current_thread")]
async fn a_detached_simulator_switches_faults_while_serving_and_shuts_down() {
    crate::install_crypto_provider();
    let sim = sim();
    let running = sim
        .serve_detached("127.0.0.1:0".parse().expect("addr"))
        .expect("bind");
    let client = reqwest::Client::new();
    let zones = || {
        client
            .get(format!("{}/zones", running.url))
            .bearer_auth(TOKEN)
            .send()
    };
    let mut statuses = vec![zones().await.expect("send").status().as_u16()];
    sim.inject_on(FaultTarget::All, Fault::fail_next(1, 503));
    statuses.push(zones().await.expect("send").status().as_u16());
    let last = zones().await.expect("send");
    statuses.push(last.status().as_u16());
    let body: Value = last.json().await.expect("json");
    assert_eq!(statuses, vec![200, 503, 200]);
    assert_eq!(body["result"][0]["name"], "example.com");
    let addr = running.addr;
    running.shutdown().await;
    assert!(tokio::net::TcpStream::connect(addr).await.is_err());
}

#[test]
fn a_detached_simulator_refuses_to_listen_off_loopback() {
    let error = sim()
        .serve_detached("0.0.0.0:0".parse().expect("addr"))
        .expect_err("refused");
    assert_eq!(error.kind(), std::io::ErrorKind::InvalidInput);
}

#[tokio::test(flavor = "current_thread")]
async fn a_detached_simulator_answers_while_the_test_runtime_is_blocked() {
    let sim = sim();
    let running = sim
        .serve_detached("127.0.0.1:0".parse().expect("addr"))
        .expect("bind");
    let addr = running.addr;
    let client = std::thread::spawn(move || raw_get_zones(addr));
    // Joining blocks the test runtime's only thread; a simulator served on it would never answer.
    let answer = client.join().expect("client thread");
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
    running.shutdown().await;
}
