//! Differential test of path rules: for every pattern of a generated corpus, `cftunnel validate`
//! refuses a TunnelBinding with that path exactly when `cloudflared tunnel ingress validate`
//! refuses an ingress rule with it. Needs `CFTUNNEL_CLOUDFLARED`, a cloudflared binary.
#[path = "go_regex/corpus.rs"]
mod corpus;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use corpus::corpus;

/// Rules per cloudflared config: it stops at the first invalid one, so a batch costs one run
/// plus one per refused pattern (each run ~70 ms, more with more rules); batches run on
/// [`THREADS`] threads.
const BATCH: usize = 8;
const THREADS: usize = 4;

fn cloudflared() -> PathBuf {
    match std::env::var_os("CFTUNNEL_CLOUDFLARED") {
        Some(path) if !path.is_empty() => PathBuf::from(path),
        _ => panic!(
            "set CFTUNNEL_CLOUDFLARED to a cloudflared binary: this test compares path rules with \
             `cloudflared tunnel ingress validate`"
        ),
    }
}

/// A YAML double-quoted scalar (JSON string escapes are valid YAML).
fn quoted(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

/// Indexes of `patterns` cloudflared refuses, in parallel over slices of the corpus.
fn cloudflared_refuses(binary: &Path, dir: &Path, patterns: &[String]) -> BTreeSet<usize> {
    let slice = patterns.len().div_ceil(THREADS);
    std::thread::scope(|scope| {
        let workers: Vec<_> = patterns
            .chunks(slice)
            .enumerate()
            .map(|(n, chunk)| {
                let config = dir.join(format!("config-{n}.yaml"));
                scope.spawn(move || {
                    refused_in(binary, &config, chunk)
                        .into_iter()
                        .map(|i| i + n * slice)
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().expect("cloudflared worker"))
            .collect()
    })
}

fn refused_in(binary: &Path, config: &Path, patterns: &[String]) -> BTreeSet<usize> {
    let mut refused = BTreeSet::new();
    let mut start = 0;
    while start < patterns.len() {
        let end = (start + BATCH).min(patterns.len());
        let mut yaml = String::from("ingress:\n");
        for (i, pattern) in patterns[start..end].iter().enumerate() {
            yaml.push_str(&format!(
                "  - hostname: r{i}.example.com\n    path: {}\n    service: http://localhost:8080\n",
                quoted(pattern)
            ));
        }
        yaml.push_str("  - service: http_status:404\n");
        std::fs::write(config, yaml).expect("write the cloudflared config");
        let output = Command::new(binary)
            .args(["tunnel", "--config"])
            .arg(config)
            .args(["ingress", "validate"])
            .output()
            .expect("run cloudflared");
        if output.status.success() {
            start = end;
            continue;
        }
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        let rule = text
            .split("Rule #")
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .and_then(|n| n.parse::<usize>().ok())
            .filter(|_| text.contains("has an invalid regex"))
            .unwrap_or_else(|| panic!("cloudflared failed without naming a regex rule:\n{text}"));
        refused.insert(start + rule - 1);
        start += rule;
    }
    refused
}

/// Indexes of `patterns` `cftunnel validate` refuses, read from its violation lines.
fn cftunnel_refuses(dir: &Path, patterns: &[String]) -> BTreeSet<usize> {
    let mut yaml = String::new();
    for (i, pattern) in patterns.iter().enumerate() {
        yaml.push_str(&format!(
            "---\napiVersion: networking.cfargotunnel.com/v1alpha1\nkind: TunnelBinding\n\
             metadata:\n  name: p{i}\n  namespace: apps\nsubjects:\n  - name: web\n    spec:\n\
             \x20     fqdn: p{i}.example.com\n      path: {}\ntunnelRef:\n  kind: ClusterTunnel\n  name: edge\n",
            quoted(pattern)
        ));
    }
    let file = dir.join("bindings.yaml");
    std::fs::write(&file, yaml).expect("write the bindings");
    let output = Command::new(env!("CARGO_BIN_EXE_cftunnel"))
        .args(["validate", "-f"])
        .arg(&file)
        .output()
        .expect("run cftunnel validate");
    let stdout = String::from_utf8_lossy(&output.stdout);
    // Warnings (the tunnel is not in the input) go to stderr; violations to stdout.
    let mut refused = BTreeSet::new();
    for line in stdout.lines() {
        let Some(rest) = line.strip_prefix("TunnelBinding apps/p") else {
            panic!("unexpected violation line: {line}");
        };
        let (index, message) = rest.split_once(": ").unwrap_or((rest, ""));
        assert!(
            message.starts_with("subjects[0].spec.path: "),
            "a violation other than the path: {line}"
        );
        refused.insert(index.parse::<usize>().expect("binding index"));
    }
    refused
}

#[test]
fn cftunnel_refuses_exactly_the_paths_cloudflared_refuses() {
    let binary = cloudflared();
    let patterns = corpus();
    assert!(patterns.len() >= 2000, "corpus of {}", patterns.len());
    let dir = tempfile::tempdir().expect("temp dir");
    let by_cloudflared = cloudflared_refuses(&binary, dir.path(), &patterns);
    let by_cftunnel = cftunnel_refuses(dir.path(), &patterns);
    let disagreements: Vec<String> = (0..patterns.len())
        .filter(|i| by_cloudflared.contains(i) != by_cftunnel.contains(i))
        .map(|i| {
            format!(
                "{:?}: cloudflared {}, cftunnel {}",
                patterns[i],
                if by_cloudflared.contains(&i) {
                    "refuses"
                } else {
                    "accepts"
                },
                if by_cftunnel.contains(&i) {
                    "refuses"
                } else {
                    "accepts"
                },
            )
        })
        .collect();
    assert!(
        disagreements.is_empty(),
        "{} of {} patterns disagree:\n{}",
        disagreements.len(),
        patterns.len(),
        disagreements.join("\n")
    );
    // Both sides must see both answers, or the corpus proves nothing.
    assert!(
        by_cloudflared.len() > patterns.len() / 5,
        "{} refused",
        by_cloudflared.len()
    );
    assert!(
        by_cloudflared.len() < patterns.len() * 4 / 5,
        "{} refused",
        by_cloudflared.len()
    );
}
