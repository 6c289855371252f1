//! `configSource: Cloudflare`: the same rules as config.yaml, pushed as JSON; cloudflared runs
//! from its connector token, and a route change changes nothing the pods read.
use serde_json::{Value, json};

use super::tests::{ID, SECRET, config_text, five_routes, input, options, spec};
use super::*;
use crate::routes::fixtures::route;
use cftunnel_types::TunnelKind;

fn remote(extra: Value) -> cftunnel_types::TunnelSpec {
    let mut extra = extra;
    extra["configSource"] = json!("Cloudflare");
    spec(extra)
}

fn cloudflared(deployment: &Value) -> &Value {
    &deployment["spec"]["template"]["spec"]["containers"][0]
}

#[test]
fn a_remote_tunnel_runs_from_its_token_with_no_config_map_and_no_credentials_file() {
    let rendered = render_all(
        &input(TunnelKind::Tunnel, remote(json!({})), five_routes()),
        &options(),
    )
    .expect("renders");
    assert!(rendered.config_map.is_none());
    let container = cloudflared(&rendered.deployment);
    let args: Vec<&str> = container["args"]
        .as_array()
        .expect("args")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(
        args,
        [
            "tunnel",
            "--no-autoupdate",
            "--protocol",
            "auto",
            "--metrics",
            "0.0.0.0:2000",
            "run"
        ]
    );
    assert_eq!(
        container["env"],
        json!([{"name": "TUNNEL_TOKEN", "valueFrom": {"secretKeyRef": {"name": "edge", "key": "token"}}}])
    );
    assert!(container.get("volumeMounts").is_none(), "{container}");
    assert!(
        rendered.deployment["spec"]["template"]["spec"]
            .get("volumes")
            .is_none()
    );
    let token = rendered
        .secret
        .data
        .as_ref()
        .and_then(|d| d.get("token"))
        .map(|b| String::from_utf8_lossy(&b.0).into_owned())
        .expect("the token is in the Secret");
    let decoded = cftunnel_cloudflare::TunnelToken::decode(&token).expect("a connector token");
    assert_eq!(decoded.tunnel_id, ID);
    assert_eq!(decoded.secret.expose(), SECRET);
    assert!(
        !serde_json::to_string(&rendered.deployment)
            .unwrap()
            .contains(&token),
        "the token is never in the Deployment"
    );
}

#[test]
fn the_pushed_configuration_has_the_rules_of_config_yaml_in_the_same_order() {
    let local = render_all(
        &input(TunnelKind::Tunnel, spec(json!({})), five_routes()),
        &options(),
    )
    .expect("renders");
    let yaml: Value = serde_yaml_ng::from_str(&config_text(&local)).expect("config.yaml");
    let pushed = render_all(
        &input(TunnelKind::Tunnel, remote(json!({})), five_routes()),
        &options(),
    )
    .expect("renders")
    .remote_config
    .expect("a configuration to push");
    let rules = |v: &Value| -> Vec<(Value, Value, Value)> {
        v["ingress"]
            .as_array()
            .expect("ingress")
            .iter()
            .map(|r| {
                (
                    r["hostname"].clone(),
                    r["path"].clone(),
                    r["service"].clone(),
                )
            })
            .collect()
    };
    assert_eq!(rules(&pushed), rules(&yaml));
    assert_eq!(
        pushed["ingress"].as_array().and_then(|r| r.last()),
        Some(&json!({"service": "http_status:404"})),
        "the catch-all last"
    );
}

#[test]
fn pushed_durations_are_whole_seconds() {
    let mut slow = route("slow.example.com", None, "http://slow.shop.svc:80");
    slow.origin_request.connect_timeout = Some("1m30s".into());
    slow.origin_request.keep_alive_timeout = Some("1500ms".into());
    let pushed = render_all(
        &input(
            TunnelKind::Tunnel,
            remote(json!({"noTlsVerify": true})),
            vec![slow],
        ),
        &options(),
    )
    .expect("renders")
    .remote_config
    .expect("configuration");
    assert_eq!(
        pushed["ingress"][0]["originRequest"],
        json!({"connectTimeout": 90, "keepAliveTimeout": 2})
    );
    assert_eq!(pushed["originRequest"], json!({"noTLSVerify": true}));
}

#[test]
fn a_route_change_changes_the_pushed_configuration_and_not_the_deployment() {
    let before = render_all(
        &input(TunnelKind::Tunnel, remote(json!({})), five_routes()),
        &options(),
    )
    .expect("renders");
    let mut more = five_routes();
    more.push(route("new.example.com", None, "http://new.shop.svc:80"));
    let after = render_all(
        &input(TunnelKind::Tunnel, remote(json!({})), more),
        &options(),
    )
    .expect("renders");
    assert_eq!(after.deployment, before.deployment, "no rollout");
    assert_eq!(after.checksum, before.checksum);
    assert_ne!(
        remote::config_digest(after.remote_config.as_ref().expect("config")),
        remote::config_digest(before.remote_config.as_ref().expect("config"))
    );
}
