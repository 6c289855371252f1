//! `spec.warpRouting` in both forms: config.yaml holds Go duration text, which the real
//! cloudflared reads without a key left unused; the pushed configuration holds whole seconds
//! (cloudflared refuses duration text there, and integers in config.yaml: both checked).
use std::process::Command;

use serde_json::json;

use super::cloudflared_check::cloudflared;
use super::config::render_config;
use super::remote::remote_config;
use super::tests::{input, spec};
use cftunnel_types::TunnelKind;

fn warp_input(warp: serde_json::Value) -> super::TunnelInput {
    input(
        TunnelKind::Tunnel,
        spec(json!({"warpRouting": warp})),
        Vec::new(),
    )
}

/// cloudflared's `ingress validate` of `text`: whether it passed, and what it said.
fn validate(text: &str) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("temp dir: {e}"));
    let file = dir.path().join("config.yaml");
    std::fs::write(&file, text).unwrap_or_else(|e| panic!("write: {e}"));
    let out = Command::new(cloudflared())
        .arg("tunnel")
        .arg("--config")
        .arg(&file)
        .args(["ingress", "validate"])
        .output()
        .unwrap_or_else(|e| panic!("run cloudflared: {e}"));
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), said)
}

#[test]
fn local_config_carries_the_options_as_cloudflared_reads_them() {
    let warp = json!({"connectTimeout": "10s", "maxActiveFlows": 500, "tcpKeepAlive": "1m"});
    let text = render_config(&warp_input(warp)).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        text.contains(
            "warp-routing:\n  connectTimeout: 10s\n  maxActiveFlows: 500\n  tcpKeepAlive: 1m\n"
        ),
        "{text}"
    );
    let (ok, said) = validate(&text);
    assert!(
        ok && !said.contains("unused keys"),
        "cloudflared: {said}\n{text}"
    );
    // The same options in the remote form's integers: cloudflared's config.yaml refuses them.
    let integers = text.replace("connectTimeout: 10s", "connectTimeout: 10");
    let (ok, said) = validate(&integers);
    assert!(
        !ok,
        "cloudflared took integer seconds in config.yaml: {said}"
    );
}

#[test]
fn a_config_without_the_options_has_no_warp_routing_key() {
    let plain = input(TunnelKind::Tunnel, spec(json!({})), Vec::new());
    let text = render_config(&plain).unwrap_or_else(|e| panic!("{e}"));
    assert!(!text.contains("warp-routing"), "{text}");
    let remote = remote_config(&plain).unwrap_or_else(|e| panic!("{e}"));
    assert!(remote.get("warp-routing").is_none(), "{remote}");
}

/// cloudflared's check of a configuration as the configurations API holds it (JSON, whole
/// seconds): `ingress validate --json` reads the remote form of `ingress` and `originRequest`.
/// It does not read `warp-routing` (checked by hand: any value passes), so what it proves is
/// that the pushed document around it is one cloudflared takes.
fn validate_remote(config: &serde_json::Value) -> (bool, String) {
    let out = Command::new(cloudflared())
        .args(["tunnel", "ingress", "validate", "--json"])
        .arg(config.to_string())
        .output()
        .unwrap_or_else(|e| panic!("run cloudflared: {e}"));
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), said)
}

#[test]
fn the_pushed_configuration_with_the_options_is_one_cloudflared_takes() {
    let warp = json!({"connectTimeout": "10s", "maxActiveFlows": 500, "tcpKeepAlive": "1m"});
    let mut input = warp_input(warp);
    input.spec.no_tls_verify = true;
    let config = remote_config(&input).unwrap_or_else(|e| panic!("{e}"));
    let (ok, said) = validate_remote(&config);
    assert!(ok, "cloudflared: {said}\n{config}");
    // The remote form's durations are integers: duration text there is refused (shown on
    // originRequest, which this check reads).
    let mut text = config.clone();
    text["originRequest"]["connectTimeout"] = json!("10s");
    let (ok, _) = validate_remote(&text);
    assert!(
        !ok,
        "cloudflared took duration text in the remote form: {text}"
    );
}

#[test]
fn the_pushed_configuration_holds_whole_seconds_rounded_up() {
    let warp = json!({"connectTimeout": "1500ms", "maxActiveFlows": 0, "tcpKeepAlive": "1m"});
    let config = remote_config(&warp_input(warp)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        config["warp-routing"],
        json!({"connectTimeout": 2, "maxActiveFlows": 0, "tcpKeepAlive": 60})
    );
    let bad = remote_config(&warp_input(json!({"connectTimeout": "soon"})));
    assert!(
        bad.is_err_and(|e| e.to_string().contains("spec.warpRouting.connectTimeout")),
        "a duration that is not one is refused, naming the field"
    );
}
