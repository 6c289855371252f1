//! The `cloudflare-sim` binary, run as the scripts and the tests run it.
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

fn cloudflare_sim() -> Command {
    Command::new(env!("CARGO_BIN_EXE_cloudflare-sim"))
}

#[test]
fn cloudflare_sim_prints_a_ready_line_and_serves_the_api() {
    let mut child = cloudflare_sim()
        .args([
            "--listen",
            "127.0.0.1:0",
            "--zone",
            "example.com",
            "--zone",
            "example.org",
        ])
        .args(["--token", "ready-line-token", "--account-name", "Demo"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn simulator");
    let stdout = child.stdout.take().expect("stdout");
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("ready line");
    let ready: serde_json::Value = serde_json::from_str(&line).expect("ready line is JSON");
    assert_eq!(ready["account_name"], "Demo");
    assert_eq!(ready["tokens"], serde_json::json!(["ready-line-token"]));
    let zones = ready["zones"].as_object().expect("zones");
    assert_eq!(
        zones.keys().collect::<Vec<_>>(),
        vec!["example.com", "example.org"]
    );
    let url = ready["url"].as_str().expect("url");
    assert!(
        url.starts_with("http://127.0.0.1:") && url.ends_with("/client/v4"),
        "{url}"
    );

    cftunnel_sim::install_crypto_provider();
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let body: serde_json::Value = rt.block_on(async {
        reqwest::Client::new()
            .get(format!("{url}/zones?name=example.org"))
            .bearer_auth("ready-line-token")
            .send()
            .await
            .expect("GET /zones")
            .json()
            .await
            .expect("JSON body")
    });
    child.kill().expect("stop simulator");
    let _ = child.wait();
    assert_eq!(body["success"], true);
    assert_eq!(body["result"][0]["id"], zones["example.org"]);
}

#[test]
fn cloudflare_sim_refuses_a_non_loopback_listen_address() {
    let out = cloudflare_sim()
        .args(["--listen", "0.0.0.0:0"])
        .output()
        .expect("run simulator");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("loopback"), "{stderr}");
}

#[test]
fn a_pending_zone_is_listed_with_status_pending() {
    let mut child = cloudflare_sim()
        .args(["--listen", "127.0.0.1:0", "--zone", "example.com"])
        .args(["--pending-zone", "dev.example.com", "--token", "t"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn simulator");
    let stdout = child.stdout.take().expect("stdout");
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("ready line");
    let ready: serde_json::Value = serde_json::from_str(&line).expect("ready line is JSON");
    let url = ready["url"].as_str().expect("url").to_string();
    let zones = ready["zones"].as_object().expect("zones").clone();
    assert!(zones.contains_key("dev.example.com"), "{ready}");
    cftunnel_sim::install_crypto_provider();
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let list = |query: &'static str| {
        let url = format!("{url}/zones{query}");
        rt.block_on(async move {
            let body: serde_json::Value = reqwest::Client::new()
                .get(url)
                .bearer_auth("t")
                .send()
                .await
                .expect("GET /zones")
                .json()
                .await
                .expect("JSON body");
            body["result"]
                .as_array()
                .expect("result list")
                .iter()
                .map(|z| {
                    (
                        z["name"].as_str().unwrap_or("").to_string(),
                        z["status"].as_str().unwrap_or("").to_string(),
                    )
                })
                .collect::<Vec<_>>()
        })
    };
    let all = list("");
    let active = list("?status=active");
    child.kill().expect("stop simulator");
    let _ = child.wait();
    assert_eq!(
        all,
        vec![
            ("example.com".to_string(), "active".to_string()),
            ("dev.example.com".to_string(), "pending".to_string())
        ]
    );
    assert_eq!(
        active,
        vec![("example.com".to_string(), "active".to_string())]
    );
}
