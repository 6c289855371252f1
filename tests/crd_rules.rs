//! The CRDs on a real kube-apiserver: they install, serve the Go operator's manifests, and their
//! CEL rules refuse bad objects with the admission webhook's own messages — so the refusal holds
//! even while the webhook is down.
mod common;

use cftunnel_testenv::{ControlPlane, ControlPlaneOptions, shared};
use cftunnel_types::cel;
use cftunnel_types::crds::{self, ConversionService};
use common::{apply, get_json};

async fn plane() -> &'static ControlPlane {
    match shared(|| ControlPlaneOptions {
        crds: crds::all(&ConversionService::default()),
        ..Default::default()
    })
    .await
    {
        Ok(plane) => plane,
        Err(e) => panic!("{e}"),
    }
}

fn tunnel(name: &str, spec: &str) -> String {
    format!(
        "apiVersion: networking.cfargotunnel.com/v1alpha2\nkind: Tunnel\nmetadata:\n  name: {name}\nspec:\n{spec}"
    )
}

const CLOUDFLARE: &str = "  cloudflare:\n    domain: example.com\n    secret: cloudflare-secrets\n    accountId: 0123456789abcdef0123456789abcdef\n";

#[tokio::test]
async fn refuses_both_new_and_existing_tunnel_with_the_webhook_message() {
    let plane = plane().await;
    let ns = plane.create_namespace("crd-both").await.expect("namespace");
    let manifest = tunnel(
        "both",
        &format!("  newTunnel: {{name: a}}\n  existingTunnel: {{name: b}}\n{CLOUDFLARE}"),
    );
    let (ok, printed) = apply(plane, &ns, &manifest);
    assert!(!ok, "{printed}");
    assert!(printed.contains(cel::BOTH_TUNNEL_SOURCES), "{printed}");
}

#[tokio::test]
async fn refuses_neither_tunnel_source_and_long_names() {
    let plane = plane().await;
    let ns = plane
        .create_namespace("crd-neither")
        .await
        .expect("namespace");
    let (ok, printed) = apply(
        plane,
        &ns,
        &tunnel(
            "neither",
            &format!("  existingTunnel: {{id: \"\"}}\n{CLOUDFLARE}"),
        ),
    );
    assert!(!ok && printed.contains(cel::NO_TUNNEL_SOURCE), "{printed}");
    let long = "a".repeat(64);
    let (ok, printed) = apply(
        plane,
        &ns,
        &tunnel(&long, &format!("  newTunnel: {{name: a}}\n{CLOUDFLARE}")),
    );
    assert!(!ok && printed.contains(cel::NAME_TOO_LONG), "{printed}");
}

#[tokio::test]
async fn cluster_tunnels_carry_the_same_rules() {
    let plane = plane().await;
    let manifest = format!(
        "apiVersion: networking.cfargotunnel.com/v1alpha2\nkind: ClusterTunnel\nmetadata:\n  name: crd-cluster-both\nspec:\n  newTunnel: {{name: a}}\n  existingTunnel: {{id: 6ff42ae2-765d-4adf-8112-31c55c1551ef}}\n{CLOUDFLARE}"
    );
    let (ok, printed) = apply(plane, "default", &manifest);
    assert!(
        !ok && printed.contains(cel::BOTH_TUNNEL_SOURCES),
        "{printed}"
    );
}

#[tokio::test]
async fn accepts_the_go_operator_shapes_and_applies_defaults() {
    let plane = plane().await;
    let ns = plane
        .create_namespace("crd-go-shapes")
        .await
        .expect("namespace");
    let go_tunnel = "apiVersion: networking.cfargotunnel.com/v1alpha2\nkind: Tunnel\nmetadata:\n  name: k8s-tunnel\nspec:\n  newTunnel:\n    name: k8s-tunnel\n  cloudflare:\n    email: email@domain.com\n    domain: example.com\n    secret: cloudflare-secrets\n    accountName: Example Account\n    CLOUDFLARE_API_TOKEN: api-token\n";
    let (ok, printed) = apply(plane, &ns, go_tunnel);
    assert!(ok, "{printed}");
    let stored = get_json(plane, &ns, "tunnel/k8s-tunnel");
    assert_eq!(stored["spec"]["protocol"], "auto");
    assert_eq!(stored["spec"]["fallbackTarget"], "http_status:404");
    assert_eq!(stored["spec"]["deployPatch"], "{}");
    assert_eq!(
        stored["spec"]["cloudflare"]["CLOUDFLARE_API_TOKEN"],
        "api-token"
    );
    assert_eq!(
        stored["spec"]["cloudflare"]["CLOUDFLARE_API_KEY"],
        "CLOUDFLARE_API_KEY"
    );

    let go_binding = "apiVersion: networking.cfargotunnel.com/v1alpha1\nkind: TunnelBinding\nmetadata:\n  name: svc-binding\nsubjects:\n  - name: svc01\n  - name: svc02\n    spec:\n      fqdn: mysvc.example.com\n      protocol: https\n      noTlsVerify: true\ntunnelRef:\n  kind: Tunnel\n  name: k8s-tunnel\n";
    let (ok, printed) = apply(plane, &ns, go_binding);
    assert!(ok, "{printed}");
    let binding = get_json(plane, &ns, "tunnelbinding/svc-binding");
    assert_eq!(binding["subjects"][0]["kind"], "Service");
    assert_eq!(binding["subjects"][1]["spec"]["fqdn"], "mysvc.example.com");
    assert_eq!(binding["tunnelRef"]["name"], "k8s-tunnel");
}

#[tokio::test]
async fn immutable_fields_are_refused_on_update_by_cel() {
    let plane = plane().await;
    let ns = plane
        .create_namespace("crd-immutable")
        .await
        .expect("namespace");
    let (ok, printed) = apply(
        plane,
        &ns,
        &tunnel(
            "imm",
            &format!("  newTunnel: {{name: first}}\n{CLOUDFLARE}"),
        ),
    );
    assert!(ok, "{printed}");
    let (ok, printed) = apply(
        plane,
        &ns,
        &tunnel(
            "imm",
            &format!("  newTunnel: {{name: fixed-typo}}\n{CLOUDFLARE}"),
        ),
    );
    assert!(ok, "the name may change until the tunnel exists: {printed}");

    let out = plane
        .kubectl()
        .args([
            "patch",
            "--namespace",
            &ns,
            "tunnel/imm",
            "--subresource=status",
            "--type=merge",
        ])
        .args([
            "-p",
            r#"{"status":{"tunnelId":"6ff42ae2-765d-4adf-8112-31c55c1551ef"}}"#,
        ])
        .output()
        .expect("patch status");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (ok, printed) = apply(
        plane,
        &ns,
        &tunnel(
            "imm",
            &format!("  newTunnel: {{name: renamed}}\n{CLOUDFLARE}"),
        ),
    );
    assert!(
        !ok && printed.contains(cel::NEW_TUNNEL_NAME_IMMUTABLE),
        "{printed}"
    );

    let other_account = CLOUDFLARE.replace(
        "0123456789abcdef0123456789abcdef",
        "fedcba9876543210fedcba9876543210",
    );
    let (ok, printed) = apply(
        plane,
        &ns,
        &tunnel(
            "imm",
            &format!("  newTunnel: {{name: fixed-typo}}\n{other_account}"),
        ),
    );
    assert!(!ok && printed.contains(cel::ACCOUNT_IMMUTABLE), "{printed}");

    let (ok, printed) = apply(
        plane,
        &ns,
        &tunnel(
            "imm",
            &format!("  existingTunnel: {{name: other}}\n{CLOUDFLARE}"),
        ),
    );
    assert!(
        !ok && printed.contains(cel::TUNNEL_SOURCE_SWITCH),
        "{printed}"
    );
}

#[tokio::test]
async fn kubectl_explain_documents_the_fields() {
    let plane = plane().await;
    let out = plane
        .kubectl()
        .args([
            "explain",
            "tunnels.spec.cloudflare.accountId",
            "--api-version=networking.cfargotunnel.com/v1alpha2",
        ])
        .output()
        .expect("explain");
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        printed.contains("Account id (32 hex characters)"),
        "{printed}"
    );
}

#[tokio::test]
async fn access_tunnels_install_and_their_rules_quote_the_bad_value() {
    let plane = plane().await;
    let ns = plane
        .create_namespace("crd-access")
        .await
        .expect("namespace");
    let access = |name: &str, target: &str| {
        format!(
            "apiVersion: networking.cfargotunnel.com/v1alpha1\nkind: AccessTunnel\nmetadata:\n  name: {name}\ntarget:\n{target}serviceToken:\n  secretRef: access-token\n"
        )
    };
    let (ok, printed) = apply(
        plane,
        &ns,
        &access(
            "ssh",
            "  fqdn: ssh.example.com\n  protocol: ssh\n  svc: {port: 2222}\n",
        ),
    );
    assert!(ok, "the Go operator's shape is accepted: {printed}");
    let stored = get_json(plane, &ns, "accesstunnel/ssh");
    assert_eq!(stored["serviceToken"]["secretRef"], "access-token");
    let (ok, printed) = apply(
        plane,
        &ns,
        &access(
            "bad",
            "  fqdn: ssh.example.com\n  protocol: udp\n  svc: {port: 70000}\n",
        ),
    );
    assert!(!ok, "{printed}");
    assert!(
        printed.contains("target.protocol: \"udp\" is not supported; use tcp, rdp, smb or ssh"),
        "{printed}"
    );
    assert!(
        printed.contains("target.svc.port: Invalid value: 70000: target.svc.port in body should be less than or equal to 65535"),
        "{printed}"
    );
    assert!(
        printed.contains("target.svc.port: the port is out of range; use 1 to 65535"),
        "the CEL rule's message is printed beside the schema's: {printed}"
    );
}

fn access_policy(name: &str, targets: &str, allow: &str) -> String {
    format!(
        "apiVersion: networking.cfargotunnel.com/v1alpha2\nkind: AccessPolicy\nmetadata:\n  name: {name}\nspec:\n  targetRefs:\n{targets}{allow}"
    )
}

const TARGET: &str = "    - {group: gateway.networking.k8s.io, kind: HTTPRoute, name: shop}\n";
const ALLOW: &str = "  allow: {emails: [alice@example.com]}\n";

/// Without the webhook, the CRD alone refuses an AccessPolicy that lets nobody in and a target
/// whose group does not go with its kind, with the webhook's texts; the kind enum and the
/// 1..16 bound on targets hold; a good policy is stored with its defaults.
#[tokio::test]
async fn access_policies_install_and_their_cel_rules_carry_the_webhook_messages() {
    let plane = plane().await;
    let ns = plane
        .create_namespace("crd-access-policy")
        .await
        .expect("namespace");
    let (ok, printed) = apply(
        plane,
        &ns,
        &access_policy("nobody", TARGET, "  allow: {groups: []}\n"),
    );
    assert!(
        !ok && printed.contains(cel::ACCESS_POLICY_NOBODY_ALLOWED),
        "{printed}"
    );
    let (ok, printed) = apply(
        plane,
        &ns,
        &access_policy(
            "pair",
            "    - {group: \"\", kind: HTTPRoute, name: shop}\n",
            ALLOW,
        ),
    );
    assert!(
        !ok && printed.contains("spec.targetRefs[0]")
            && printed.contains(cel::ACCESS_POLICY_TARGET_KIND),
        "{printed}"
    );
    let (ok, printed) = apply(
        plane,
        &ns,
        &access_policy(
            "gateway",
            "    - {group: gateway.networking.k8s.io, kind: Gateway, name: edge}\n",
            ALLOW,
        ),
    );
    assert!(
        !ok && printed.contains("Unsupported value: \"Gateway\""),
        "{printed}"
    );
    let (ok, printed) = apply(plane, &ns, &access_policy("none", "    []\n", ALLOW));
    assert!(!ok && printed.contains("spec.targetRefs"), "{printed}");
    let many: String = (0..17)
        .map(|i| format!("    - {{group: \"\", kind: Service, name: api{i}}}\n"))
        .collect();
    let (ok, printed) = apply(plane, &ns, &access_policy("many", &many, ALLOW));
    assert!(
        !ok && printed.contains("must have at most 16 items"),
        "{printed}"
    );

    let (ok, printed) = apply(plane, &ns, &access_policy("staff", TARGET, ALLOW));
    assert!(ok, "{printed}");
    let stored = get_json(plane, &ns, "accesspolicy/staff");
    assert_eq!(stored["spec"]["allow"]["anyValidServiceToken"], false);
    assert_eq!(stored["spec"]["targetRefs"][0]["kind"], "HTTPRoute");
}
