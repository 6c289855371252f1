//! The Kubernetes documentation's Ingress path-type examples, every row, through the route
//! model, the renderer and the real cloudflared's own rule matching (`ingress rule URL`).
//! Needs `CFTUNNEL_CLOUDFLARED`, like `cloudflared_check.rs`.
use serde::Deserialize;
use serde_json::json;

use super::cloudflared_check::{cloudflared, matched_rule};
use super::config::render_config;
use super::tests::{input, spec};
use crate::routes::compute_routes;
use crate::routes::ingress_tests::{
    PATH_TYPE_EXAMPLES, example_host, example_service, path_type_world,
};
use cftunnel_types::{TunnelIdentity, TunnelKind};

#[derive(Deserialize)]
struct Config {
    ingress: Vec<Rule>,
}

#[derive(Deserialize)]
struct Rule {
    service: String,
}

#[test]
fn cloudflared_serves_every_row_of_the_ingress_path_type_examples_as_documented() {
    let bin = cloudflared();
    let table = compute_routes(&path_type_world());
    let edge = TunnelIdentity {
        kind: TunnelKind::ClusterTunnel,
        namespace: String::new(),
        name: "edge".into(),
    };
    let routes = table.routes_of(&edge);
    let text = render_config(&input(TunnelKind::ClusterTunnel, spec(json!({})), routes))
        .unwrap_or_else(|e| panic!("renders: {e}"));
    let config: Config = serde_yaml_ng::from_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("temp dir: {e}"));
    let file = dir.path().join("config.yaml");
    std::fs::write(&file, &text).unwrap_or_else(|e| panic!("{e}"));
    let mut wrong = Vec::new();
    for (n, (paths, request, expected)) in PATH_TYPE_EXAMPLES.iter().enumerate() {
        let url = format!("https://{}{request}", example_host(n));
        let want = expected.map_or("http_status:404".to_string(), |j| example_service(n, j));
        match matched_rule(&bin, &file, &url) {
            Ok(rule) => {
                let got = config.ingress.get(rule).map(|r| r.service.as_str());
                if got != Some(want.as_str()) {
                    wrong.push(format!(
                        "row {n} {paths:?}: {url} went to {got:?}, not {want}"
                    ));
                }
            }
            Err(e) => wrong.push(format!("row {n}: {e}")),
        }
    }
    assert!(wrong.is_empty(), "{}\nconfig:\n{text}", wrong.join("\n"));
}
