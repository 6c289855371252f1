//! `cftunnel-demo` runs the whole product end to end, as the README's first command does, and
//! tells its story quietly: cftunnel's own log goes to a file the summary names.
use std::process::Command;

const EXAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples");

#[test]
fn demo_shows_edge_health_gateway_api_access_and_the_go_era_manifest_and_refuses_the_invalid_one() {
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("cftunnel.log");
    let out = Command::new(env!("CARGO_BIN_EXE_cftunnel-demo"))
        .args(["--examples", EXAMPLES, "--log-file"])
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
        "Cloudflare (simulated): 3 live tunnels",
        "DNS records in example.com (simulated):",
        "CNAME web.example.com ",
        "CNAME api.example.com ",
        "CNAME blog.example.com ",
        "cloudflared Deployment demo/shop (hardened):",
        "readOnlyRootFilesystem true · allowPrivilegeEscalation false · capabilities drop [ALL]",
        "refused at kubectl apply: ",
        "newTunnel and existingTunnel are mutually exclusive",
        "the Cloudflare simulator stands in for Cloudflare's edge",
    ] {
        assert!(stdout.contains(expected), "{expected:?} missing:\n{stdout}");
    }
    // Edge health: the tunnel the simulated edge connects is healthy, the others never
    // connected; the pods are counted as they are (no node runs them).
    let shop = section(&stdout, "  Tunnel demo/shop: ");
    for expected in [
        "    edge: healthy since ",
        " · 1 connector(s) at SIM, cloudflared ",
        "    Connected True (Healthy): Cloudflare's edge reaches the tunnel through 1 connector(s)",
        "    cloudflared pods: 0 of 1 ready",
    ] {
        assert!(shop.contains(expected), "{expected:?} missing:\n{shop}");
    }
    let edge = section(&stdout, "  ClusterTunnel edge: ");
    for expected in [
        "    edge: inactive since ",
        "    Connected False (Inactive): ",
        "    cloudflared pods: 0 of 1 ready",
        "    route admin.example.com → http://admin.demo.svc:8080 (Active, from HTTPRoute demo/admin)",
    ] {
        assert!(edge.contains(expected), "{expected:?} missing:\n{edge}");
    }
    // Gateway API: the route is accepted on its Gateway, which is programmed on the tunnel.
    for expected in [
        "  GatewayClass cftunnel (controller cfargotunnel.com/cftunnel): Accepted True",
        "  Gateway demo/public: Programmed True (Programmed) · address ",
        "  HTTPRoute demo/admin: parent Gateway demo/public: Accepted True (Accepted) · ResolvedRefs True (ResolvedRefs)",
    ] {
        assert!(stdout.contains(expected), "{expected:?} missing:\n{stdout}");
    }
    // Access: the policy is in place, its application exists, and only then the DNS record.
    let access = section(&stdout, "  AccessPolicy demo/staff: ");
    for expected in [
        "  AccessPolicy demo/staff: Accepted True (Accepted) · Programmed True (Programmed)",
        "    HTTPRoute admin: admin.example.com behind Access application ",
    ] {
        assert!(access.contains(expected), "{expected:?} missing:\n{access}");
    }
    let apps = section(&stdout, "  Access applications (simulated): ");
    assert!(
        apps.starts_with("  Access applications (simulated): 1\n")
            && apps.contains(
                "    admin.example.com · admin.example.com (cftunnel AccessPolicy demo/staff "
            ),
        "{apps}"
    );
    assert!(stdout.contains("CNAME admin.example.com "), "{stdout}");
    // The Go-era manifest: applied as v1alpha1 (kubectl warns it is deprecated), routed, and
    // served back in v1alpha2 with its v1alpha1 fields in deployPatch.
    let applied = section(
        &stdout,
        &format!("applied {EXAMPLES}/80-go-era-tunnel.yaml:"),
    );
    for expected in [
        "    tunnel.networking.cfargotunnel.com/legacy created",
        "    Warning: networking.cfargotunnel.com/v1alpha1 Tunnel is deprecated",
    ] {
        assert!(
            applied.contains(expected),
            "{expected:?} missing:\n{applied}"
        );
    }
    let legacy = section(&stdout, "  Tunnel demo/legacy: ");
    for expected in [
        "  Tunnel demo/legacy: Ready, tunnel ",
        "    cloudflared pods: 0 of 2 ready",
        "    route blog.example.com → http://blog.demo.svc:80 (Active, from TunnelBinding demo/blog)",
    ] {
        assert!(legacy.contains(expected), "{expected:?} missing:\n{legacy}");
    }
    let served = section(&stdout, "  Go-era Tunnel demo/legacy ");
    for expected in [
        "(applied as networking.cfargotunnel.com/v1alpha1): accepted, served back as networking.cfargotunnel.com/v1alpha2",
        r#"    spec.deployPatch: {"spec":{"replicas":2,"template":{"spec":{"nodeSelector":{"kubernetes.io/os":"linux"}}}}}"#,
        "the v1alpha2 spec has neither",
    ] {
        assert!(served.contains(expected), "{expected:?} missing:\n{served}");
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

/// The lines of `text` from the one starting with `header` up to the next line at the same or a
/// shallower indentation; empty when no line starts with `header`.
fn section(text: &str, header: &str) -> String {
    let depth = header.len() - header.trim_start().len();
    let mut lines = text.lines().skip_while(|l| !l.starts_with(header));
    let Some(first) = lines.next() else {
        return String::new();
    };
    let mut out = format!("{first}\n");
    for line in lines {
        let indent = line.len() - line.trim_start().len();
        if indent <= depth {
            break;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}
