//! The manifests of `examples/` speak the current version of each cftunnel kind, except the one
//! file that shows a Go-era manifest (v1alpha1, as written for the Go operator) accepted.
use kube::Resource;

use cftunnel_types::{AccessPolicy, ClusterTunnel, Tunnel, TunnelBinding};

const EXAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples");
const GO_ERA: &str = "80-go-era-tunnel.yaml";

/// (apiVersion, kind) of each top-level document of a manifest file.
fn documents(text: &str) -> Vec<(String, String)> {
    text.split("\n---")
        .filter_map(|document| {
            let field = |name: &str| {
                document
                    .lines()
                    .find_map(|l| l.strip_prefix(name))
                    .map(|v| v.trim().to_string())
            };
            Some((field("apiVersion:")?, field("kind:")?))
        })
        .collect()
}

#[test]
fn examples_use_the_current_versions_but_for_the_go_era_file() {
    let current = [
        (Tunnel::kind(&()), Tunnel::api_version(&())),
        (ClusterTunnel::kind(&()), ClusterTunnel::api_version(&())),
        (TunnelBinding::kind(&()), TunnelBinding::api_version(&())),
        (AccessPolicy::kind(&()), AccessPolicy::api_version(&())),
    ];
    let mut outdated = Vec::new();
    let mut go_era = Vec::new();
    let entries = std::fs::read_dir(EXAMPLES).expect("examples/");
    for path in entries.map(|e| e.expect("directory entry").path()) {
        if path.extension().is_none_or(|x| x != "yaml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("read a manifest");
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        for (api_version, kind) in documents(&text) {
            if !api_version.starts_with("networking.cfargotunnel.com/") {
                continue;
            }
            let Some((_, version)) = current.iter().find(|(k, _)| *k == kind) else {
                panic!("{name}: {kind} is not a kind this test knows");
            };
            if name == GO_ERA {
                go_era.push((api_version, kind));
            } else if api_version != *version {
                outdated.push(format!("{name}: {kind} {api_version} (current: {version})"));
            }
        }
    }
    assert!(outdated.is_empty(), "{}", outdated.join("\n"));
    assert!(
        go_era.contains(&(
            "networking.cfargotunnel.com/v1alpha1".to_string(),
            "Tunnel".to_string()
        )),
        "{GO_ERA} holds a v1alpha1 Tunnel: {go_era:?}"
    );
    let text = std::fs::read_to_string(format!("{EXAMPLES}/{GO_ERA}")).expect("the Go-era file");
    assert_eq!(
        text.lines().next(),
        Some(
            "# A manifest written for the Go cloudflare-operator, unchanged: cftunnel accepts it and converts it."
        ),
        "{GO_ERA} says what it is in its first line"
    );
}
