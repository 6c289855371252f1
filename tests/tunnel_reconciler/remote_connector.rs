//! The real cloudflared accepts the connector token cftunnel stored for a remotely-managed tunnel.
//!
//! The Deployment's own container args and its `TUNNEL_TOKEN` (resolved from the Secret it
//! names) are handed to `CFTUNNEL_CLOUDFLARED` inside a fresh network namespace (`unshare -rn`:
//! loopback only, no route out). A token cloudflared refuses ends the process at once with
//! "Provided Tunnel token is not valid"; an accepted one starts the tunnel it names and goes on
//! to look up Cloudflare's edge, which fails offline. The test waits for that lookup.
//!
//! The configuration cftunnel pushed is given to the same cloudflared as a config file
//! (`ingress validate`, `ingress rule URL`): the connector would take the rules it holds.
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use kube::Api;
use serde_json::{Value, json};

use crate::harness::{Harness, TOKEN};
use crate::remote::wait_rules;
use crate::routes::{API_SECRET, create_binding, create_service};

const CLOUDFLARED_ENV: &str = "CFTUNNEL_CLOUDFLARED";
/// How long cloudflared may take to reach its edge lookup (it does so in well under a second).
const EDGE_LOOKUP: Duration = Duration::from_secs(60);

fn cloudflared() -> PathBuf {
    match std::env::var_os(CLOUDFLARED_ENV) {
        Some(path) if !path.is_empty() => PathBuf::from(path),
        _ => panic!(
            "set {CLOUDFLARED_ENV} to a cloudflared binary: this test runs it with the token \
             cftunnel stored"
        ),
    }
}

/// The container's args and the value of its `TUNNEL_TOKEN`, read from the Secret it names.
pub(crate) async fn connector(h: &Harness) -> (Vec<String>, String) {
    let deployments: Api<Deployment> = Api::namespaced(h.admin.clone(), &h.ns);
    let deployment = deployments.get("edge").await.expect("deployment");
    let pod = deployment.spec.template.spec.expect("pod");
    let container = &pod.containers[0];
    let from = container
        .env
        .iter()
        .flatten()
        .find(|e| e.name == "TUNNEL_TOKEN")
        .and_then(|e| e.value_from.as_ref())
        .and_then(|v| v.secret_key_ref.clone())
        .expect("TUNNEL_TOKEN from a Secret");
    let secret = h.secrets().get(&from.name).await.expect("the named Secret");
    let token = secret
        .data
        .and_then(|d| d.get(&from.key).cloned())
        .map(|b| String::from_utf8_lossy(&b.0).into_owned())
        .expect("the token key");
    (container.args.clone().unwrap_or_default(), token)
}

/// The pushed document as a cloudflared config file: JSON is YAML, but a file's durations are Go
/// duration text where the API's are whole seconds.
fn as_config_file(mut config: Value) -> String {
    fn durations_as_text(origin: Option<&mut Value>) {
        let Some(Value::Object(fields)) = origin else {
            return;
        };
        for name in [
            "connectTimeout",
            "tlsTimeout",
            "keepAliveTimeout",
            "tcpKeepAlive",
        ] {
            if let Some(seconds) = fields.get(name).and_then(Value::as_u64) {
                fields.insert(name.into(), json!(format!("{seconds}s")));
            }
        }
    }
    durations_as_text(config.get_mut("originRequest"));
    if let Some(Value::Array(rules)) = config.get_mut("ingress") {
        for rule in rules {
            durations_as_text(rule.get_mut("originRequest"));
        }
    }
    config.to_string()
}

/// `cloudflared tunnel --config FILE ingress ARGS…`: success and what it printed.
fn ingress(file: &std::path::Path, args: &[&str]) -> (bool, String) {
    let output = Command::new(cloudflared())
        .args(["tunnel", "--config"])
        .arg(file)
        .arg("ingress")
        .args(args)
        .output()
        .expect("run cloudflared");
    let mut printed = String::from_utf8_lossy(&output.stdout).into_owned();
    printed.push_str(&String::from_utf8_lossy(&output.stderr));
    (output.status.success(), printed)
}

/// What cloudflared printed until it looked for the edge, or everything it printed before it
/// stopped or the time ran out.
fn run_offline(args: &[String], token: &str) -> (bool, String) {
    let mut child = Command::new("unshare")
        .args(["--net", "--map-root-user", "--"])
        .arg(cloudflared())
        .args(args)
        .env_clear()
        .env("TUNNEL_TOKEN", token)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run cloudflared in its own network namespace (unshare)");
    let (tx, rx) = mpsc::channel::<String>();
    let readers: Vec<_> = [
        child
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
        child
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
    ]
    .into_iter()
    .flatten()
    .map(|stream| {
        let tx = tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stream).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        })
    })
    .collect();
    drop(tx);
    let deadline = Instant::now() + EDGE_LOOKUP;
    let mut seen = String::new();
    let mut looked_for_edge = false;
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        match rx.recv_timeout(left) {
            Ok(line) => {
                seen.push_str(&line);
                seen.push('\n');
                if line.contains("edge discovery") {
                    looked_for_edge = true;
                    break;
                }
            }
            Err(_) => break,
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    for reader in readers {
        let _ = reader.join();
    }
    (looked_for_edge, seen)
}

#[tokio::test]
async fn the_real_cloudflared_accepts_the_stored_token_and_goes_on_to_look_for_the_edge() {
    let h = Harness::start("tr-remote-cfd").await;
    h.create_api_secret(API_SECRET, &[("CLOUDFLARE_API_TOKEN", TOKEN)])
        .await;
    create_service(&h, "web", 80, json!({}), json!({})).await;
    h.create_tunnel(
        "edge",
        h.spec(
            API_SECRET,
            json!({"newTunnel": {"name": "edge"}, "configSource": "Cloudflare"}),
        ),
    )
    .await;
    create_binding(
        &h,
        "app",
        json!([{"name": "web", "spec": {"fqdn": "app.example.com", "protocol": "https", "noTlsVerify": true}}]),
    )
    .await;
    let t = h.wait_reason(&h.tunnels(), "edge", "Ready").await;
    let id = t.status.and_then(|s| s.tunnel_id).expect("tunnel id");
    let service = format!("https://web.{}.svc:80", h.ns);
    wait_rules(
        &h,
        &id,
        &[("app.example.com", &service), ("*", "http_status:404")],
    )
    .await;

    let pushed = h
        .sim
        .tunnels()
        .into_iter()
        .find(|t| t.id == id)
        .and_then(|t| t.config)
        .expect("the pushed configuration");
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("config.yaml");
    std::fs::write(&file, as_config_file(pushed)).expect("write the config file");
    let (valid, printed) = ingress(&file, &["validate"]);
    assert!(valid, "cloudflared refuses the pushed rules:\n{printed}");
    let (matched, printed) = ingress(&file, &["rule", "https://app.example.com/x"]);
    assert!(matched && printed.contains(&service), "{printed}");
    let (matched, printed) = ingress(&file, &["rule", "https://other.example.com/"]);
    assert!(matched && printed.contains("http_status:404"), "{printed}");

    let (args, token) = connector(&h).await;
    assert!(
        !args.iter().any(|a| a.contains(&token)),
        "the token is not an argument: {args:?}"
    );

    let (looked_for_edge, output) = run_offline(&args, &token);
    assert!(
        !output.contains("not valid"),
        "cloudflared refused the stored token:\n{output}"
    );
    assert!(
        output.contains(&format!("Starting tunnel tunnelID={id}")),
        "cloudflared starts the tunnel the token names ({id}):\n{output}"
    );
    assert!(
        looked_for_edge,
        "cloudflared goes on to look for Cloudflare's edge:\n{output}"
    );

    // The same binary refuses a token that is not one, so the check above can fail.
    let (_, refused) = run_offline(&args, "not-a-token");
    assert!(refused.contains("not valid"), "{refused}");
}
