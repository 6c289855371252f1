//! `cftunnel demo` runs the whole product end to end, as the README's first command does.
use std::process::Command;

#[test]
fn demo_converges_both_tunnels_and_refuses_the_invalid_manifest() {
    let out = Command::new(env!("CARGO_BIN_EXE_cftunnel"))
        .args([
            "demo",
            "--examples",
            concat!(env!("CARGO_MANIFEST_DIR"), "/examples"),
        ])
        .output()
        .expect("run cftunnel demo");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("Tunnel demo/shop: Ready, tunnel "),
        "{stdout}"
    );
    assert!(
        stdout.contains("ClusterTunnel edge: Ready, tunnel "),
        "{stdout}"
    );
    assert!(
        stdout.contains("Cloudflare (simulated): 2 live tunnels"),
        "{stdout}"
    );
    assert!(
        stdout.contains("refused ") && stdout.contains("90-invalid-tunnel.yaml"),
        "{stdout}"
    );
    assert!(
        stdout.contains("newTunnel and existingTunnel are mutually exclusive"),
        "{stdout}"
    );
    assert!(
        !stdout.contains("demo-api-token") && !stderr.contains("demo-api-token"),
        "the API token is never printed"
    );
}
