//! The `cftunnel` binary's commands, run as a user runs them.
use std::process::Command;

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
        "run: cargo run -p cftunnel -- crds > manifests/crds.yaml"
    );
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
