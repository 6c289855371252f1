//! The admission webhook registered on a real kube-apiserver with the shipped configurations:
//! bad manifests are refused at `kubectl apply` with cftunnel's messages, conversion is
//! lossless through the API server, and objects stored before the webhook never get stuck.
#[path = "admission_apiserver/access_policy.rs"]
mod access_policy;
mod common;
#[path = "admission_apiserver/network_route.rs"]
mod network_route;
#[path = "admission_apiserver/zones.rs"]
mod zones;

use std::net::SocketAddr;
use std::time::Duration;

use cftunnel_testenv::{ControlPlane, ControlPlaneOptions, shared};
use cftunnel_types::cel;
use common::webhook::start_webhook_thread;
use common::{apply, get_json, kubectl};
use tokio::sync::OnceCell;

/// Test namespaces opt in with this label, so a test can store objects before "installing" cftunnel.
const OPT_IN: &str = "cftunnel-test/admission";
const WAIT: Duration = Duration::from_secs(60);

struct Env {
    plane: &'static ControlPlane,
}

/// Started and registered once, by whichever test gets here first.
static WEBHOOK: OnceCell<SocketAddr> = OnceCell::const_new();

async fn env() -> Env {
    let plane = match shared(ControlPlaneOptions::for_cftunnel).await {
        Ok(plane) => plane,
        Err(e) => panic!("{e}"),
    };
    WEBHOOK
        .get_or_init(|| async {
            let addr = start_webhook_thread(plane);
            register(plane, addr).await;
            addr
        })
        .await;
    Env { plane }
}

async fn register(plane: &ControlPlane, addr: SocketAddr) {
    cftunnel_testenv::registration::register_webhook(plane, addr, Some((OPT_IN, "on")))
        .await
        .expect("register webhooks");
}

async fn namespace(env: &Env, prefix: &str, webhook: bool) -> String {
    let ns = env.plane.create_namespace(prefix).await.expect("namespace");
    if webhook {
        enable_webhook(env, &ns);
    }
    ns
}

fn enable_webhook(env: &Env, ns: &str) {
    let (ok, printed) = kubectl(
        env.plane,
        &[
            "label",
            "namespace",
            ns,
            &format!("{OPT_IN}=on"),
            "--overwrite",
        ],
        "",
    );
    assert!(ok, "{printed}");
}

/// Applies until the answer contains `expected` (the webhook configuration and the caches
/// settle asynchronously), then returns what kubectl printed.
async fn apply_until_refused(env: &Env, ns: &str, manifest: &str, expected: &str) -> String {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let (ok, printed) = apply(env.plane, ns, manifest);
        if !ok && printed.contains(expected) {
            return printed;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never refused with {expected:?}; last answer (ok={ok}):\n{printed}"
        );
        if ok {
            let _ = kubectl(
                env.plane,
                &["delete", "--namespace", ns, "-f", "-", "--wait=false"],
                manifest,
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

const CLOUDFLARE: &str = "  cloudflare:\n    domain: example.com\n    secret: cloudflare-secrets\n    accountId: 0123456789abcdef0123456789abcdef\n";

fn tunnel_v2(name: &str, spec: &str) -> String {
    format!(
        "apiVersion: networking.cfargotunnel.com/v1alpha2\nkind: Tunnel\nmetadata:\n  name: {name}\nspec:\n{spec}{CLOUDFLARE}"
    )
}

#[tokio::test]
async fn refuses_a_bad_tunnel_with_every_webhook_message() {
    let env = env().await;
    let ns = namespace(&env, "adm-tunnel", true).await;
    let manifest = tunnel_v2(
        "bad",
        "  newTunnel: {name: bad}\n  protocol: udp\n  fallbackTarget: http://web/x\n",
    );
    let printed = apply_until_refused(
        &env,
        &ns,
        &manifest,
        "spec.protocol: \"udp\" is not supported; use auto, quic or http2",
    )
    .await;
    assert!(
        printed
            .contains("admission webhook \"tunnels.validate.cfargotunnel.com\" denied the request"),
        "{printed}"
    );
    assert!(
        printed.contains("spec.fallbackTarget: \"http://web/x\" has a path"),
        "all violations in one answer: {printed}"
    );
    let both = tunnel_v2(
        "both",
        "  newTunnel: {name: a}\n  existingTunnel: {name: b}\n",
    );
    let (ok, printed) = apply(env.plane, &ns, &both);
    assert!(
        !ok && printed.contains(cel::BOTH_TUNNEL_SOURCES),
        "{printed}"
    );
}

#[tokio::test]
async fn a_hostname_claimed_in_one_namespace_is_refused_in_another_naming_the_owner() {
    let env = env().await;
    let first = namespace(&env, "adm-owner", true).await;
    let second = namespace(&env, "adm-thief", true).await;
    let cluster_tunnel = format!(
        "apiVersion: networking.cfargotunnel.com/v1alpha2\nkind: ClusterTunnel\nmetadata:\n  name: shared-edge-{first}\nspec:\n  newTunnel: {{name: shared-edge}}\n{CLOUDFLARE}"
    );
    let (ok, printed) = apply(env.plane, "default", &cluster_tunnel);
    assert!(ok, "{printed}");
    let binding = format!(
        "apiVersion: networking.cfargotunnel.com/v1alpha1\nkind: TunnelBinding\nmetadata:\n  name: web\nsubjects:\n  - name: web\n    spec:\n      fqdn: shop-{first}.example.com\ntunnelRef:\n  kind: clustertunnel\n  name: shared-edge-{first}\n"
    );
    let (ok, printed) = apply(env.plane, &first, &binding);
    assert!(ok, "{printed}");
    let stored = get_json(env.plane, &first, "tunnelbinding/web");
    assert_eq!(
        stored["tunnelRef"]["kind"], "ClusterTunnel",
        "the mutating webhook normalises the kind"
    );
    assert_eq!(
        stored["metadata"]["labels"],
        serde_json::json!({
            "cfargotunnel.com/name": format!("shared-edge-{first}"),
            "cfargotunnel.com/kind": "TunnelBinding",
        }),
        "the mutating webhook writes the Go operator's binding labels"
    );
    let expected = format!(
        "subjects[0].spec.fqdn: shop-{first}.example.com is already exposed by TunnelBinding {first}/web (subject web); remove it there first"
    );
    apply_until_refused(&env, &second, &binding, &expected).await;
}

#[tokio::test]
async fn ingresses_and_bindings_are_refused_at_apply_when_the_other_owns_the_hostname() {
    let env = env().await;
    let owner = namespace(&env, "adm-ing-owner", true).await;
    let ingress_ns = namespace(&env, "adm-ing", true).await;
    let late = namespace(&env, "adm-ing-late", true).await;
    let edge = format!("ing-edge-{owner}");
    let tunnel = format!(
        "apiVersion: networking.cfargotunnel.com/v1alpha2\nkind: ClusterTunnel\nmetadata:\n  name: {edge}\nspec:\n  newTunnel: {{name: {edge}}}\n{CLOUDFLARE}"
    );
    let class = format!(
        "apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata:\n  name: {edge}\nspec:\n  controller: cfargotunnel.com/cftunnel\n  parameters: {{apiGroup: networking.cfargotunnel.com, kind: ClusterTunnel, name: {edge}, scope: Cluster}}\n"
    );
    for manifest in [&tunnel, &class] {
        let (ok, printed) = apply(env.plane, "default", manifest);
        assert!(ok, "{printed}");
    }
    let binding = |name: &str, host: &str| {
        format!(
            "apiVersion: networking.cfargotunnel.com/v1alpha1\nkind: TunnelBinding\nmetadata:\n  name: {name}\nsubjects:\n  - name: web\n    spec:\n      fqdn: {host}\ntunnelRef:\n  kind: ClusterTunnel\n  name: {edge}\n"
        )
    };
    let ingress = |name: &str, host: &str, path: &str, path_type: &str| {
        format!(
            "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: {name}\nspec:\n  ingressClassName: {edge}\n  rules:\n    - host: {host}\n      http:\n        paths:\n          - {{path: {path:?}, pathType: {path_type}, backend: {{service: {{name: web, port: {{number: 80}}}}}}}}\n"
        )
    };
    let taken = format!("taken-{owner}.example.com");
    let (ok, printed) = apply(env.plane, &owner, &binding("web", &taken));
    assert!(ok, "{printed}");
    // The binding is older: an Ingress taking its hostname (every path) is refused.
    let expected = format!(
        "spec.rules: {taken} is already exposed by TunnelBinding {owner}/web (subject web); remove it there first"
    );
    let printed = apply_until_refused(
        &env,
        &ingress_ns,
        &ingress("shop", &taken, "/", "Prefix"),
        &expected,
    )
    .await;
    assert!(
        printed.contains(
            "admission webhook \"ingresses.validate.cfargotunnel.com\" denied the request"
        ),
        "{printed}"
    );
    // A field the route model refuses is named at apply.
    let bad = ingress(
        "regex",
        &format!("regex-{owner}.example.com"),
        "/(",
        "ImplementationSpecific",
    );
    apply_until_refused(
        &env,
        &ingress_ns,
        &bad,
        "spec.rules[0].http.paths[0].path: \"/(\" is not a valid regular expression",
    )
    .await;
    // An Ingress's hostname refuses a later binding.
    let own = format!("own-{owner}.example.com");
    let (ok, printed) = apply(env.plane, &ingress_ns, &ingress("own", &own, "/", "Prefix"));
    assert!(ok, "{printed}");
    let expected = format!(
        "subjects[0].spec.fqdn: {own} is already exposed by Ingress {ingress_ns}/own; remove it there first"
    );
    apply_until_refused(&env, &late, &binding("late", &own), &expected).await;
    // An Ingress of another controller is not judged.
    let other = ingress("nginx", &taken, "/(", "ImplementationSpecific").replace(
        &format!("ingressClassName: {edge}"),
        "ingressClassName: nginx",
    );
    let (ok, printed) = apply(env.plane, &ingress_ns, &other);
    assert!(
        ok,
        "another controller's Ingress is not cftunnel's to refuse: {printed}"
    );
}

#[tokio::test]
async fn conversion_keeps_every_v1alpha1_field_through_the_api_server() {
    let env = env().await;
    let ns = namespace(&env, "adm-convert", true).await;
    let v1 = format!(
        "apiVersion: networking.cfargotunnel.com/v1alpha1\nkind: Tunnel\nmetadata:\n  name: legacy\nspec:\n  newTunnel: {{name: legacy}}\n  size: 3\n  image: cloudflare/cloudflared:2026.11.0\n  nodeSelectors: {{disk: ssd}}\n  tolerations:\n    - {{key: dedicated, operator: Equal, value: edge, effect: NoSchedule}}\n{CLOUDFLARE}"
    );
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let (ok, printed) = apply(env.plane, &ns, &v1);
        if ok {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{printed}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let v2 = get_json(
        env.plane,
        &ns,
        "tunnels.v1alpha2.networking.cfargotunnel.com/legacy",
    );
    let patch: serde_json::Value =
        serde_json::from_str(v2["spec"]["deployPatch"].as_str().expect("deployPatch"))
            .expect("JSON");
    assert_eq!(patch["spec"]["replicas"], 3);
    assert_eq!(
        patch["spec"]["template"]["spec"]["containers"][0]["image"],
        "cloudflare/cloudflared:2026.11.0"
    );
    assert_eq!(
        patch["spec"]["template"]["spec"]["nodeSelector"]["disk"],
        "ssd"
    );
    assert_eq!(
        patch["spec"]["template"]["spec"]["tolerations"][0]["value"],
        "edge"
    );
    let back = get_json(
        env.plane,
        &ns,
        "tunnels.v1alpha1.networking.cfargotunnel.com/legacy",
    );
    assert_eq!(back["spec"]["size"], 3);
    assert_eq!(back["spec"]["image"], "cloudflare/cloudflared:2026.11.0");
    assert_eq!(
        back["spec"]["nodeSelectors"],
        serde_json::json!({"disk": "ssd"})
    );
    assert_eq!(back["spec"]["tolerations"][0]["key"], "dedicated");
    assert!(
        back["metadata"]["annotations"]
            .get("cfargotunnel.com/v1alpha2-deploy-patch")
            .is_none()
    );
}

#[tokio::test]
async fn a_v1alpha1_tunnel_with_the_go_operator_default_image_pins_no_image() {
    let env = env().await;
    let ns = namespace(&env, "adm-goimage", true).await;
    let v1 = format!(
        "apiVersion: networking.cfargotunnel.com/v1alpha1\nkind: Tunnel\nmetadata:\n  name: go-era\nspec:\n  newTunnel: {{name: go-era}}\n  size: 3\n  image: cloudflare/cloudflared:2025.4.0\n{CLOUDFLARE}"
    );
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let (ok, printed) = apply(env.plane, &ns, &v1);
        if ok {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{printed}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let v2 = get_json(
        env.plane,
        &ns,
        "tunnels.v1alpha2.networking.cfargotunnel.com/go-era",
    );
    assert_eq!(
        v2["spec"]["deployPatch"], r#"{"spec":{"replicas":3}}"#,
        "the default image is dropped, the rest kept: the tunnel runs cftunnel's pinned image"
    );
}

#[tokio::test]
async fn other_deploy_patch_content_survives_a_trip_down_and_up() {
    let env = env().await;
    let ns = namespace(&env, "adm-roundtrip", true).await;
    let patch = r#"{"spec":{"replicas":4,"template":{"spec":{"containers":[{"env":[{"name":"TUNNEL_LOGLEVEL","value":"debug"}],"name":"cloudflared"}],"priorityClassName":"high"}}}}"#;
    let manifest = tunnel_v2(
        "modern",
        &format!("  newTunnel: {{name: modern}}\n  deployPatch: '{patch}'\n"),
    );
    let (ok, printed) = apply(env.plane, &ns, &manifest);
    assert!(ok, "{printed}");
    let mut down = get_json(
        env.plane,
        &ns,
        "tunnels.v1alpha1.networking.cfargotunnel.com/modern",
    );
    assert_eq!(down["spec"]["size"], 4);
    // A v1alpha1 client writes it back with a label change: the rest must come back up intact.
    down["metadata"]["labels"] = serde_json::json!({"touched": "yes"});
    for key in [
        "resourceVersion",
        "managedFields",
        "uid",
        "creationTimestamp",
        "generation",
    ] {
        down["metadata"]
            .as_object_mut()
            .expect("metadata")
            .remove(key);
    }
    let (ok, printed) = kubectl(
        env.plane,
        &["replace", "--namespace", &ns, "-f", "-"],
        &down.to_string(),
    );
    assert!(ok, "{printed}");
    let up = get_json(
        env.plane,
        &ns,
        "tunnels.v1alpha2.networking.cfargotunnel.com/modern",
    );
    let restored: serde_json::Value =
        serde_json::from_str(up["spec"]["deployPatch"].as_str().expect("deployPatch"))
            .expect("JSON");
    let original: serde_json::Value = serde_json::from_str(patch).expect("JSON");
    assert_eq!(restored, original);
    assert_eq!(up["metadata"]["labels"]["touched"], "yes");
}

#[tokio::test]
async fn objects_stored_before_the_webhook_never_get_stuck() {
    let env = env().await;
    let ns = namespace(&env, "adm-ratchet", false).await;
    let legacy = format!(
        "apiVersion: networking.cfargotunnel.com/v1alpha2\nkind: Tunnel\nmetadata:\n  name: old\n  finalizers: [cfargotunnel.com/finalizer]\nspec:\n  newTunnel: {{name: old}}\n  protocol: udp\n{CLOUDFLARE}"
    );
    let (ok, printed) = apply(env.plane, &ns, &legacy);
    assert!(ok, "stored while cftunnel was not watching: {printed}");
    enable_webhook(&env, &ns);
    let worse = tunnel_v2(
        "old",
        "  newTunnel: {name: old}\n  protocol: udp\n  fallbackTarget: ftp://nowhere\n",
    );
    let printed = apply_until_refused(&env, &ns, &worse, "spec.fallbackTarget:").await;
    assert!(
        !printed.contains("spec.protocol"),
        "the old violation is not held against the update: {printed}"
    );
    let (ok, printed) = kubectl(
        env.plane,
        &["label", "--namespace", &ns, "tunnel/old", "team=edge"],
        "",
    );
    assert!(ok, "labels can change: {printed}");
    let (ok, printed) = kubectl(
        env.plane,
        &["delete", "--namespace", &ns, "tunnel/old", "--wait=false"],
        "",
    );
    assert!(ok, "deletion is allowed: {printed}");
    let (ok, printed) = kubectl(
        env.plane,
        &[
            "patch",
            "--namespace",
            &ns,
            "tunnel/old",
            "--type=json",
            "-p",
            r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
        ],
        "",
    );
    assert!(ok, "the finalizer can be removed: {printed}");
    let (ok, printed) = kubectl(
        env.plane,
        &[
            "get",
            "--namespace",
            &ns,
            "tunnel/old",
            "--ignore-not-found",
            "-o",
            "name",
        ],
        "",
    );
    assert!(ok && printed.trim().is_empty(), "gone: {printed}");
}

#[tokio::test]
async fn a_privileged_cloudflared_container_is_refused_naming_the_field() {
    let env = env().await;
    let ns = namespace(&env, "adm-priv", true).await;
    let deployment = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: cloudflared\n  labels: {cfargotunnel.com/app: cloudflared}\nspec:\n  selector: {matchLabels: {app: cf}}\n  template:\n    metadata: {labels: {app: cf, cfargotunnel.com/app: cloudflared}}\n    spec:\n      containers:\n        - name: cloudflared\n          image: cloudflare/cloudflared:2026.11.0\n          securityContext: {privileged: true}\n";
    apply_until_refused(
        &env,
        &ns,
        deployment,
        "spec.template.spec.containers[0].securityContext.privileged: true is refused; cloudflared needs no privileges, remove the field",
    )
    .await;
}

/// One case of `tests/data/admission`: its documents and the message fragments it must produce.
struct Case {
    name: String,
    documents: Vec<serde_json::Value>,
    expects: Vec<String>,
}

fn cases() -> Vec<Case> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/admission");
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .expect("case directory")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).expect("case file");
            let expects = text
                .lines()
                .filter_map(|l| l.strip_prefix("# expect: "))
                .map(str::to_string)
                .collect();
            let documents = serde_yaml_ng::Deserializer::from_str(&text)
                .map(|doc| serde::Deserialize::deserialize(doc).expect("case YAML"))
                .filter(|v: &serde_json::Value| !v.is_null())
                .map(|mut v| {
                    if v["kind"] == "Namespace" {
                        v["metadata"]["labels"][OPT_IN] = serde_json::json!("on");
                    }
                    v
                })
                .collect();
            Case {
                name: path
                    .file_name()
                    .map(|f| f.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                documents,
                expects,
            }
        })
        .collect()
}

/// Applies the documents one by one, as a user would; returns what kubectl printed for the
/// first refused one. Accepted objects are deleted again (namespaces stay).
async fn run_case(env: &Env, case: &Case) -> Option<String> {
    let mut applied = Vec::new();
    let mut refused = None;
    for doc in &case.documents {
        // No --namespace: each document says where it goes (absent: the kubeconfig's `default`).
        let (ok, printed) = kubectl(env.plane, &["apply", "-f", "-"], &doc.to_string());
        if !ok {
            refused = Some(printed);
            break;
        }
        applied.push(doc);
        // Give the webhook's caches a moment to see objects that claim hostnames.
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for doc in applied.iter().rev().filter(|d| d["kind"] != "Namespace") {
        let _ = kubectl(
            env.plane,
            &["delete", "--ignore-not-found", "-f", "-"],
            &doc.to_string(),
        );
    }
    refused
}

#[tokio::test]
async fn every_case_of_the_admission_table_is_refused_through_the_api_server() {
    let env = env().await;
    enable_webhook(&env, "default");
    let cases = cases();
    assert!(cases.len() >= 45, "the table has {} cases", cases.len());
    let mut failures = Vec::new();
    for case in &cases {
        let mut last = None;
        for _attempt in 0..3 {
            let printed = run_case(&env, case).await;
            if printed
                .as_deref()
                .is_some_and(|p| case.expects.iter().all(|e| p.contains(e.as_str())))
            {
                last = None;
                break;
            }
            last = Some(printed.unwrap_or_else(|| "(every document was accepted)".into()));
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        if let Some(printed) = last {
            failures.push(format!(
                "{}: expected {:?}\n  kubectl printed: {printed}",
                case.name, case.expects
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[tokio::test]
async fn the_go_operator_shapes_are_accepted_unchanged() {
    let env = env().await;
    let ns = namespace(&env, "adm-valid", true).await;
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/admission/valid");
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .expect("valid dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    paths.sort();
    for path in paths {
        let text = std::fs::read_to_string(&path).expect("manifest");
        let (ok, printed) = kubectl(env.plane, &["apply", "--namespace", &ns, "-f", "-"], &text);
        assert!(ok, "{}: {printed}", path.display());
    }
}

fn bare_workload(kind: &str, name: &str, extra_container: bool, affinity: bool) -> String {
    let sidecar = if extra_container {
        "        - name: sidecar\n          image: busybox:1.37\n          command: [sleep, infinity]\n"
    } else {
        ""
    };
    let affinity = if affinity {
        "      affinity:\n        nodeAffinity:\n          requiredDuringSchedulingIgnoredDuringExecution:\n            nodeSelectorTerms:\n              - matchExpressions: [{key: zone, operator: In, values: [a]}]\n              - matchExpressions: [{key: zone, operator: In, values: [b]}]\n"
    } else {
        ""
    };
    format!(
        "apiVersion: apps/v1\nkind: {kind}\nmetadata:\n  name: {name}\n  labels: {{cfargotunnel.com/app: cloudflared}}\nspec:\n  selector: {{matchLabels: {{app: {name}}}}}\n  template:\n    metadata: {{labels: {{app: {name}, cfargotunnel.com/app: cloudflared}}}}\n    spec:\n{affinity}      containers:\n        - name: cloudflared\n          image: cloudflare/cloudflared:2026.11.0\n          args: [tunnel, --metrics, 0.0.0.0:2000, run]\n{sidecar}"
    )
}

fn assert_hardened(pod: &serde_json::Value, what: &str) {
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true, "{what}");
    assert_eq!(
        pod["securityContext"]["seccompProfile"]["type"], "RuntimeDefault",
        "{what}"
    );
    assert_eq!(pod["automountServiceAccountToken"], false, "{what}");
    let c = &pod["containers"][0];
    assert_eq!(c["name"], "cloudflared");
    assert_eq!(
        c["securityContext"]["allowPrivilegeEscalation"], false,
        "{what}"
    );
    assert_eq!(
        c["securityContext"]["readOnlyRootFilesystem"], true,
        "{what}"
    );
    assert_eq!(
        c["securityContext"]["capabilities"]["drop"],
        serde_json::json!(["ALL"]),
        "{what}"
    );
    assert_eq!(
        c["resources"]["requests"],
        serde_json::json!({"cpu": "10m", "memory": "64Mi"}),
        "{what}"
    );
    assert_eq!(
        c["resources"]["limits"],
        serde_json::json!({"memory": "256Mi"}),
        "{what}"
    );
    assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/ready", "{what}");
    assert_eq!(c["startupProbe"]["httpGet"]["path"], "/ready", "{what}");
    assert_eq!(
        c["livenessProbe"]["httpGet"]["path"], "/healthcheck",
        "{what}"
    );
    assert!(
        c["livenessProbe"]["failureThreshold"]
            .as_i64()
            .is_some_and(|f| f >= 3),
        "{what}"
    );
    let terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        .as_array()
        .unwrap_or_else(|| panic!("{what}: no required node affinity"));
    for term in terms {
        let keys: Vec<&str> = term["matchExpressions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|e| e["key"].as_str())
            .collect();
        assert!(
            keys.contains(&"kubernetes.io/os") && keys.contains(&"kubernetes.io/arch"),
            "{what}: {term}"
        );
    }
}

#[tokio::test]
async fn cloudflared_workloads_and_their_pods_are_stored_hardened() {
    let env = env().await;
    let ns = namespace(&env, "adm-harden", true).await;
    let (ok, printed) = apply(
        env.plane,
        &ns,
        &bare_workload("Deployment", "cf", true, true),
    );
    assert!(ok, "{printed}");
    let (ok, printed) = apply(
        env.plane,
        &ns,
        &bare_workload("DaemonSet", "cf-ds", false, false),
    );
    assert!(ok, "{printed}");
    let deployment = get_json(env.plane, &ns, "deployment/cf");
    let pod = &deployment["spec"]["template"]["spec"];
    assert_hardened(pod, "Deployment");
    let terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"].as_array().expect("terms");
    assert_eq!(
        terms.len(),
        2,
        "merged into both existing terms, none appended"
    );
    assert_eq!(terms[0]["matchExpressions"][0]["key"], "zone");
    assert_eq!(
        pod["containers"][1],
        serde_json::json!({"name": "sidecar", "image": "busybox:1.37", "command": ["sleep", "infinity"], "imagePullPolicy": "IfNotPresent", "resources": {}, "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}),
        "the sidecar is left as the user wrote it (plus the API server's own defaults)"
    );
    assert_hardened(
        &get_json(env.plane, &ns, "daemonset/cf-ds")["spec"]["template"]["spec"],
        "DaemonSet",
    );

    // Re-applying the same manifest changes nothing: the mutation is idempotent.
    let generation = deployment["metadata"]["generation"].clone();
    let (ok, printed) = apply(
        env.plane,
        &ns,
        &bare_workload("Deployment", "cf", true, true),
    );
    assert!(ok, "{printed}");
    assert_eq!(
        get_json(env.plane, &ns, "deployment/cf")["metadata"]["generation"],
        generation
    );

    // The Pods kube-controller-manager creates go through the Pod webhook too.
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let pods = get_json(env.plane, &ns, "pods");
        if let Some(pod) = pods["items"].as_array().and_then(|items| {
            items
                .iter()
                .find(|p| p["metadata"]["labels"]["app"] == "cf")
        }) {
            assert_hardened(&pod["spec"], "Pod");
            break;
        }
        if tokio::time::Instant::now() >= deadline {
            let (_, printed) = kubectl(
                env.plane,
                &["get", "--namespace", &ns, "rs,pods,events", "-o", "wide"],
                "",
            );
            let kcm = std::fs::read_to_string(env.plane.dir().join("kube-controller-manager.log"))
                .unwrap_or_default();
            let tail: Vec<&str> = kcm.lines().rev().take(30).collect();
            panic!(
                "no Pod was created for the Deployment:\n{printed}\n{}",
                tail.join("\n")
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test]
async fn a_user_managed_workload_gets_a_checksum_that_follows_its_config_map() {
    let env = env().await;
    let ns = namespace(&env, "adm-checksum", true).await;
    let config = |value: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cloudflared-config\ndata:\n  config.yaml: |\n    tunnel: {value}\n"
        )
    };
    let (ok, printed) = apply(env.plane, &ns, &config("first"));
    assert!(ok, "{printed}");
    let workload = format!(
        "{}      volumes:\n        - name: config\n          configMap: {{name: cloudflared-config}}\n",
        bare_workload("Deployment", "chart", false, false)
    );
    let (ok, printed) = apply(env.plane, &ns, &workload);
    assert!(ok, "{printed}");
    let checksum = |env: &Env| {
        get_json(env.plane, &ns, "deployment/chart")["spec"]["template"]["metadata"]["annotations"]
            ["cfargotunnel.com/checksum"]
            .as_str()
            .map(str::to_string)
    };
    let deadline = tokio::time::Instant::now() + WAIT;
    let first = loop {
        if let Some(sum) = checksum(&env) {
            break sum;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the checksum was never stamped"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    assert_eq!(first.len(), 64, "a SHA-256 hex digest");
    let (ok, printed) = apply(env.plane, &ns, &config("second"));
    assert!(ok, "{printed}");
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let now = checksum(&env);
        if now.as_deref().is_some_and(|s| s != first) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "editing the ConfigMap never changed the checksum"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}
