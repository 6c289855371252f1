//! `cftunnel-demo` runs the whole product end to end, as the README's first command does, and
//! tells its story quietly: cftunnel's own log goes to a file the summary names.
use std::process::Command;

#[test]
fn demo_converges_both_tunnels_refuses_the_invalid_manifest_and_prints_no_error_or_warning() {
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("cftunnel.log");
    let out = Command::new(env!("CARGO_BIN_EXE_cftunnel-demo"))
        .args([
            "--examples",
            concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples"),
            "--log-file",
        ])
        .arg(&log)
        .output()
        .expect("run cftunnel-demo");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    for expected in [
        "Tunnel demo/shop: Ready, tunnel ",
        "ClusterTunnel edge: Ready, tunnel ",
        "route web.example.com → http://web.demo.svc:80 (Active, from TunnelBinding demo/web)",
        "route api.example.com → ",
        "Cloudflare (simulated): 2 live tunnels",
        "DNS records in example.com (simulated):",
        "CNAME web.example.com ",
        "CNAME api.example.com ",
        "cloudflared Deployment demo/shop (hardened):",
        "readOnlyRootFilesystem true · allowPrivilegeEscalation false · capabilities drop [ALL]",
        "refused at kubectl apply: ",
        "newTunnel and existingTunnel are mutually exclusive",
    ] {
        assert!(stdout.contains(expected), "{expected:?} missing:\n{stdout}");
    }
    let log_line = format!("cftunnel's log: {}", log.display());
    assert!(stdout.contains(&log_line), "{stdout}");
    let logged = std::fs::read_to_string(&log).expect("the named log file exists");
    assert!(logged.contains("caches synced"), "{logged}");
    let noisy: Vec<&str> = stdout
        .lines()
        .chain(stderr.lines())
        .filter(|l| l.contains("ERROR") || l.contains("WARN"))
        .collect();
    assert!(noisy.is_empty(), "the demo printed:\n{}", noisy.join("\n"));
    let noisy_log: Vec<&str> = logged
        .lines()
        .filter(|l| l.contains("ERROR") || l.contains("WARN"))
        .collect();
    assert!(
        noisy_log.is_empty(),
        "cftunnel logged during a clean demo run:\n{}",
        noisy_log.join("\n")
    );
    assert!(
        !logged.contains('\u{1b}'),
        "the log file has terminal colour codes"
    );
    assert!(
        !stdout.contains("demo-api-token")
            && !stderr.contains("demo-api-token")
            && !logged.contains("demo-api-token"),
        "the API token is never printed"
    );
}
