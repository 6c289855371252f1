//! Helpers shared by the integration tests that drive the real kubectl.
#![allow(dead_code)] // each test binary uses its own subset

pub mod webhook;

use std::io::Write;
use std::process::{Output, Stdio};

use cftunnel_testenv::ControlPlane;

/// Runs kubectl with `stdin`; returns (success, stdout + stderr).
pub fn kubectl(plane: &ControlPlane, args: &[&str], stdin: &str) -> (bool, String) {
    let mut child = plane
        .kubectl()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn kubectl");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("write manifest");
    let out: Output = child.wait_with_output().expect("kubectl output");
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), printed)
}

/// `kubectl apply -f -` in `ns`, as a user runs it.
pub fn apply(plane: &ControlPlane, ns: &str, manifest: &str) -> (bool, String) {
    kubectl(plane, &["apply", "--namespace", ns, "-f", "-"], manifest)
}

/// `kubectl get <what> -o json` (stdout only: warnings such as deprecations go to stderr).
pub fn get_json(plane: &ControlPlane, ns: &str, what: &str) -> serde_json::Value {
    let out = plane
        .kubectl()
        .args(["get", "--namespace", ns, what, "-o", "json"])
        .output()
        .expect("kubectl get");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("kubectl printed JSON")
}
