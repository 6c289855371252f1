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

#[test]
fn with_a_budget_of_3_per_60_seconds_the_fourth_call_is_answered_429_for_60_seconds() {
    let mut child = cloudflare_sim()
        .args(["--listen", "127.0.0.1:0", "--token", "budget-token"])
        .args(["--budget", "3/60"])
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
    cftunnel_sim::install_crypto_provider();
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let answers: Vec<(u16, Option<String>, Option<String>)> = rt.block_on(async {
        let client = reqwest::Client::new();
        let mut answers = Vec::new();
        for _ in 0..4 {
            let response = client
                .get(format!("{url}/zones"))
                .bearer_auth("budget-token")
                .send()
                .await
                .expect("GET /zones");
            let header = |name: &str| {
                response
                    .headers()
                    .get(name)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_string)
            };
            answers.push((
                response.status().as_u16(),
                header("retry-after"),
                header("ratelimit-policy"),
            ));
        }
        answers
    });
    child.kill().expect("stop simulator");
    let _ = child.wait();
    let policy = Some("\"default\";q=3;w=60".to_string());
    assert_eq!(
        answers,
        vec![
            (200, None, policy.clone()),
            (200, None, policy.clone()),
            (200, None, policy.clone()),
            (429, Some("60".to_string()), policy),
        ]
    );
}
