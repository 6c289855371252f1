use std::net::SocketAddr;

use serde_json::{Value, json};

use super::*;
use crate::Operation;
use crate::cli::SimArgs;

#[tokio::test]
async fn serves_under_client_v4_on_loopback() {
    crate::install_crypto_provider();
    let sim = sim();
    let running = sim
        .serve("127.0.0.1:0".parse().expect("addr"))
        .await
        .expect("bind");
    assert_eq!(running.url, format!("http://{}/client/v4", running.addr));
    let client = reqwest::Client::new();
    let created: Value = client
        .post(format!(
            "{}/accounts/{}/cfd_tunnel",
            running.url,
            sim.account_id()
        ))
        .bearer_auth(TOKEN)
        .json(&json!({ "name": "over-http" }))
        .send()
        .await
        .expect("send")
        .json()
        .await
        .expect("json");
    assert_eq!(created["result"]["name"], "over-http");
    let id = created["result"]["id"].as_str().expect("id");
    let deleted = client
        .delete(format!(
            "{}/accounts/{}/cfd_tunnel/{id}",
            running.url,
            sim.account_id()
        ))
        .bearer_auth(TOKEN)
        .send()
        .await
        .expect("send");
    assert_eq!(deleted.status(), 200);
    let outside = client
        .get(format!("http://{}/accounts", running.addr))
        .bearer_auth(TOKEN)
        .send()
        .await
        .expect("send");
    assert_eq!(outside.status(), 404);
    assert_eq!(
        (
            sim.calls(Operation::CreateTunnel),
            sim.calls(Operation::DeleteTunnel),
            sim.calls(Operation::ListAccounts)
        ),
        (1, 1, 0)
    );
    let addr = running.addr;
    running.shutdown().await;
    assert!(tokio::net::TcpStream::connect(addr).await.is_err());
}

#[tokio::test]
async fn refuses_to_listen_off_loopback() {
    let error = sim()
        .serve("0.0.0.0:0".parse().expect("addr"))
        .await
        .expect_err("refused");
    assert_eq!(error.kind(), std::io::ErrorKind::InvalidInput);
    let args = SimArgs {
        listen: "0.0.0.0:0".parse::<SocketAddr>().expect("addr"),
        zones: vec![],
        pending_zones: vec![],
        tokens: vec![],
        account_name: "x".into(),
        budget: None,
        budget_block: None,
        zone_record_quota: None,
        batch_limit: None,
        block_on_rate_limit: false,
        access_team: None,
    };
    let message = crate::cli::run(args)
        .await
        .expect_err("refused")
        .to_string();
    assert_eq!(
        message,
        "--listen 0.0.0.0:0 is not a loopback address; the simulator never listens off this machine"
    );
}

#[test]
fn cli_defaults_give_one_zone_and_a_random_token() {
    use clap::Parser;
    #[derive(Parser)]
    struct Wrapper {
        #[command(flatten)]
        args: SimArgs,
    }
    let parsed = Wrapper::try_parse_from(["sim"])
        .expect("defaults parse")
        .args;
    let config = parsed.config();
    assert_eq!(
        (parsed.listen.to_string(), config.account_name.as_str()),
        ("127.0.0.1:0".to_string(), "cftunnel-sim")
    );
    assert_eq!(
        (config.zones, config.tokens.len()),
        (vec!["example.com".to_string()], 1)
    );
    assert_ne!(parsed.config().tokens, config.tokens);
    let with_token = Wrapper::try_parse_from(["sim", "--token", "very-secret"])
        .expect("parse")
        .args;
    assert!(!format!("{with_token:?}").contains("very-secret"));
    let custom = Wrapper::try_parse_from([
        "sim", "--zone", "a.test", "--zone", "b.test", "--token", "t1",
    ])
    .expect("parse")
    .args
    .config();
    assert_eq!(
        (custom.zones, custom.tokens),
        (
            vec!["a.test".to_string(), "b.test".to_string()],
            vec!["t1".to_string()]
        )
    );
}
