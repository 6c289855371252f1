//! The `cftunnel` binary's commands, run as a user runs them.
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

fn cftunnel() -> Command {
    Command::new(env!("CARGO_BIN_EXE_cftunnel"))
}

#[test]
fn crds_command_prints_the_checked_in_manifests() {
    let out = cftunnel().arg("crds").output().expect("run cftunnel crds");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let checked_in =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/manifests/crds.yaml"))
            .expect("manifests/crds.yaml");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        checked_in,
        "run: cargo run -- crds > manifests/crds.yaml"
    );
}

#[test]
fn cloudflare_sim_prints_a_ready_line_and_serves_the_api() {
    let mut child = cftunnel()
        .args([
            "cloudflare-sim",
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

    cftunnel::telemetry::install_crypto_provider();
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
    let out = cftunnel()
        .args(["cloudflare-sim", "--listen", "0.0.0.0:0"])
        .output()
        .expect("run simulator");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("loopback"), "{stderr}");
}

#[test]
fn run_refuses_an_invalid_leader_election_id_before_connecting() {
    let out = cftunnel()
        .args(["run", "--leader-election-id", "Leader_Lease"])
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .output()
        .expect("run cftunnel run");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "--leader-election-id \"Leader_Lease\" is not a Lease name (lowercase DNS subdomain)"
        ),
        "{stderr}"
    );
}
