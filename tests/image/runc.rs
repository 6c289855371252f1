//! Runs a command of an unpacked image with runc, hardened as the manifests run cftunnel: the
//! image's numeric user, a read-only root filesystem, no capabilities, no new privileges, and
//! its own PID, mount, network, IPC and UTS namespaces (so nothing it does leaves the machine).
use std::path::Path;
use std::process::{Command, Output};

use serde_json::{Value, json};

fn runc() -> Command {
    match Command::new("runc").arg("--version").output() {
        Ok(out) if out.status.success() => Command::new("runc"),
        _ => panic!(
            "runc is required to run the image: run scripts/install-image-deps.sh (apt-get install runc)"
        ),
    }
}

/// Parses `uid[:gid]` (numeric only: the image must not need /etc/passwd).
pub fn numeric_user(user: &str) -> Option<(u32, u32)> {
    let (uid, gid) = user.split_once(':').unwrap_or((user, user));
    Some((uid.parse().ok()?, gid.parse().ok()?))
}

/// Runs `args` in `bundle/rootfs` as `uid:gid` and returns its output.
pub fn run(bundle: &Path, id: &str, args: &[String], (uid, gid): (u32, u32)) -> Output {
    // `runc spec` refuses to overwrite the config of an earlier run in the same bundle.
    let _ = std::fs::remove_file(bundle.join("config.json"));
    let spec = runc()
        .args(["spec", "--bundle"])
        .arg(bundle)
        .output()
        .unwrap_or_else(|e| panic!("runc spec: {e}"));
    assert!(spec.status.success(), "runc spec: {spec:?}");
    let path = bundle.join("config.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{e}"));
    let mut config: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}"));
    config["process"]["args"] = json!(args);
    config["process"]["terminal"] = json!(false);
    config["process"]["cwd"] = json!("/");
    config["process"]["env"] = json!(["PATH=/usr/local/bin"]);
    config["process"]["user"] = json!({"uid": uid, "gid": gid});
    config["process"]["noNewPrivileges"] = json!(true);
    config["process"]["capabilities"] =
        json!({"bounding": [], "effective": [], "inheritable": [], "permitted": [], "ambient": []});
    config["root"] = json!({"path": "rootfs", "readonly": true});
    config["hostname"] = json!("image-test");
    std::fs::write(&path, config.to_string()).unwrap_or_else(|e| panic!("{e}"));
    let state = bundle.join("runc-state");
    runc()
        .arg("--root")
        .arg(&state)
        .args(["run", "--bundle"])
        .arg(bundle)
        .arg(id)
        .output()
        .unwrap_or_else(|e| panic!("runc run: {e}"))
}
