//! `cftunnel render` prints exactly what the reconciler applies: the same object rendered offline
//! from its live manifest (with status) is compared with the objects the operator applied.
mod common;
#[path = "tunnel_reconciler/harness.rs"]
mod harness;
mod install_support;

use std::process::Command;

use cftunnel_types::names::ANNOTATION_CHECKSUM;
use harness::{Harness, TOKEN};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, ServiceAccount};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

const API_SECRET: &str = "cloudflare-api";

fn render(file: &std::path::Path, namespace: &str) -> (String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_cftunnel"))
        .args(["render", "-f"])
        .arg(file)
        .args(["--cluster-resource-namespace", namespace])
        .output()
        .expect("run cftunnel render");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The config.yaml `cftunnel render` prints for `manifests`, and what it printed on stderr.
fn rendered_config(manifests: &str) -> (Value, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("input.yaml");
    std::fs::write(&file, manifests).expect("write");
    let (out, stderr) = render(&file, "cftunnel-tunnels");
    let docs: Vec<Value> = out
        .split("---\n")
        .filter(|d| !d.trim().is_empty())
        .map(|d| serde_yaml_ng::from_str(d).expect("yaml"))
        .collect();
    let config = serde_yaml_ng::from_str(
        by_kind(&docs, "ConfigMap")["data"]["config.yaml"]
            .as_str()
            .expect("config.yaml"),
    )
    .expect("config yaml");
    (config, stderr)
}

fn by_kind<'a>(docs: &'a [Value], kind: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} rendered"))
}

fn decoded_credentials(secret_data: &Value) -> Value {
    use base64::Engine;
    let b64 = secret_data["credentials.json"]
        .as_str()
        .expect("credentials");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .expect("base64");
    serde_json::from_slice(&bytes).expect("json")
}

#[tokio::test]
async fn render_output_equals_what_the_reconciler_applied_except_the_credentials() {
    let h = Harness::start("render").await;
    h.create_api_secret(API_SECRET, &[("CLOUDFLARE_API_TOKEN", TOKEN)])
        .await;
    let mut spec = h.spec(API_SECRET, json!({"newTunnel": {"name": "shop-tunnel"}}));
    spec["deployPatch"] = json!("spec:\n  replicas: 3\n");
    spec["noTlsVerify"] = json!(true);
    h.create_tunnel("shop", spec).await;
    let tunnel = h.wait_reason(&h.tunnels(), "shop", "Ready").await;
    let tunnel_id = tunnel
        .status
        .as_ref()
        .and_then(|s| s.tunnel_id.clone())
        .expect("tunnel id");

    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("tunnel.json");
    std::fs::write(&file, serde_json::to_vec(&tunnel).expect("json")).expect("write");
    let (first, stderr) = render(&file, &h.ns);
    assert_eq!(stderr, "");
    let (second, _) = render(&file, &h.ns);
    assert_eq!(first, second, "render is deterministic");
    let docs: Vec<Value> = first
        .split("---\n")
        .filter(|d| !d.trim().is_empty())
        .map(|d| serde_yaml_ng::from_str(d).expect("yaml"))
        .collect();
    assert_eq!(docs.len(), 5);

    let admin = h.admin.clone();
    let ns = h.ns.as_str();

    let cm = by_kind(&docs, "ConfigMap");
    let live_cm = Api::<ConfigMap>::namespaced(admin.clone(), ns)
        .get("shop")
        .await
        .expect("cm");
    assert_eq!(cm["metadata"]["name"], "shop");
    assert_eq!(
        serde_json::to_value(&live_cm.data).expect("data"),
        cm["data"]
    );
    assert!(
        cm["data"]["config.yaml"]
            .as_str()
            .unwrap_or_default()
            .contains(&format!("tunnel: {tunnel_id}"))
    );
    assert_eq!(
        serde_json::to_value(&live_cm.metadata.labels).expect("labels"),
        cm["metadata"]["labels"]
    );
    assert_eq!(
        serde_json::to_value(&live_cm.metadata.owner_references).expect("owners"),
        cm["metadata"]["ownerReferences"]
    );

    let pdb = by_kind(&docs, "PodDisruptionBudget");
    let name = pdb["metadata"]["name"].as_str().expect("pdb name");
    let live_pdb = Api::<PodDisruptionBudget>::namespaced(admin.clone(), ns)
        .get(name)
        .await
        .expect("pdb");
    assert_eq!(
        serde_json::to_value(&live_pdb.spec).expect("spec"),
        pdb["spec"]
    );

    let sa = by_kind(&docs, "ServiceAccount");
    let name = sa["metadata"]["name"].as_str().expect("sa name");
    let live_sa = Api::<ServiceAccount>::namespaced(admin.clone(), ns)
        .get(name)
        .await
        .expect("sa");
    let mut live_sa_value = serde_json::to_value(&live_sa).expect("sa json");
    for key in ["apiVersion", "kind"] {
        assert_eq!(live_sa_value[key], sa[key]);
    }
    assert_eq!(
        live_sa_value["automountServiceAccountToken"],
        sa["automountServiceAccountToken"]
    );
    let meta = live_sa_value["metadata"].take();
    for key in ["name", "namespace", "labels", "ownerReferences"] {
        assert_eq!(meta[key], sa["metadata"][key], "ServiceAccount {key}");
    }

    // Credentials: same tunnel and account, the secret redacted.
    let secret = by_kind(&docs, "Secret");
    let live_secret = Api::<Secret>::namespaced(admin.clone(), ns)
        .get("shop")
        .await
        .expect("secret");
    let live_data = serde_json::to_value(&live_secret.data).expect("data");
    let (rendered_creds, live_creds) = (
        decoded_credentials(&secret["data"]),
        decoded_credentials(&live_data),
    );
    assert_eq!(rendered_creds["TunnelSecret"], "REDACTED");
    assert_ne!(live_creds["TunnelSecret"], "REDACTED");
    for key in ["TunnelID", "AccountTag", "Endpoint"] {
        assert_eq!(rendered_creds[key], live_creds[key], "credentials {key}");
    }

    // Deployment: the rendered one, with the live checksum, applied as a dry run under the
    // reconciler's field manager changes nothing: any field more or less would show.
    let deployments = Api::<Deployment>::namespaced(admin.clone(), ns);
    let live = deployments.get("shop").await.expect("deployment");
    let live_value = serde_json::to_value(&live).expect("json");
    let checksum_path = "/spec/template/metadata/annotations";
    let live_checksum = live_value
        .pointer(checksum_path)
        .and_then(|a| a.get(ANNOTATION_CHECKSUM))
        .cloned()
        .expect("live checksum");
    let mut rendered = by_kind(&docs, "Deployment").clone();
    let rendered_checksum = rendered
        .pointer(checksum_path)
        .and_then(|a| a.get(ANNOTATION_CHECKSUM))
        .cloned()
        .expect("rendered checksum");
    assert_ne!(
        rendered_checksum, live_checksum,
        "placeholders give another checksum"
    );
    if let Some(annotations) = rendered.pointer_mut(checksum_path) {
        annotations[ANNOTATION_CHECKSUM] = live_checksum;
    }
    assert_eq!(rendered["spec"]["replicas"], 3);
    let dry = deployments
        .patch(
            "shop",
            &PatchParams::apply("cftunnel").force().dry_run(),
            &Patch::Apply(&rendered),
        )
        .await
        .expect("dry-run apply");
    let dry_value = serde_json::to_value(&dry).expect("json");
    assert_eq!(dry_value["spec"], live_value["spec"]);
    assert_eq!(
        dry_value["metadata"]["labels"],
        live_value["metadata"]["labels"]
    );
    assert_eq!(
        dry_value["metadata"]["resourceVersion"],
        live_value["metadata"]["resourceVersion"]
    );
}

const ROUTED: &str = r#"apiVersion: networking.cfargotunnel.com/v1alpha2
kind: Tunnel
metadata: {name: edge, namespace: shop}
spec:
  newTunnel: {name: shop-edge}
  noTlsVerify: true
  cloudflare: {domain: example.com, secret: cloudflare-api, accountId: 0123456789abcdef0123456789abcdef}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec:
  ports: [{name: metrics, port: 9090}, {name: http, port: 8080}]
---
apiVersion: v1
kind: Service
metadata:
  name: api
  namespace: shop
  labels: {cfargotunnel.com/expose-tunnel: edge}
  annotations: {cfargotunnel.com/hostname: api.example.com, cfargotunnel.com/path: "^/v1(/|$)"}
spec:
  ports: [{name: https, port: 443}]
---
apiVersion: networking.cfargotunnel.com/v1alpha1
kind: TunnelBinding
metadata: {name: late, namespace: shop, creationTimestamp: "2026-02-01T00:00:00Z"}
subjects:
  - name: api
    spec: {fqdn: app.example.com, noTlsVerify: false}
tunnelRef: {kind: Tunnel, name: edge}
---
apiVersion: networking.cfargotunnel.com/v1alpha1
kind: TunnelBinding
metadata: {name: web, namespace: shop, creationTimestamp: "2026-01-01T00:00:00Z"}
subjects:
  - name: web
    spec: {fqdn: app.example.com, port: http}
  - name: gone
tunnelRef: {kind: Tunnel, name: edge}
"#;

#[test]
fn render_routes_bindings_and_labelled_services_and_the_older_binding_owns_a_hostname() {
    let (config, stderr) = rendered_config(ROUTED);
    assert_eq!(config["originRequest"], json!({"noTLSVerify": true}));
    // Longer paths first, then by hostname; the later binding's claim on app.example.com lost,
    // and no rule turns the tunnel's noTLSVerify off.
    assert_eq!(
        config["ingress"],
        json!([
            {"hostname": "api.example.com", "path": "^/v1(/|$)", "service": "https://api.shop.svc:443"},
            {"hostname": "app.example.com", "service": "http://web.shop.svc:8080"},
            {"hostname": "gone.example.com", "service": "http_status:404"},
            {"service": "http_status:404"},
        ])
    );
    assert_eq!(
        stderr,
        "warning: TunnelBinding shop/late: HostnameConflict: subjects[0].spec.fqdn: app.example.com is already exposed by TunnelBinding shop/web (subject web), which is older; remove it from one of them\n\
         warning: TunnelBinding shop/web: ServiceNotFound: subjects[1].name: Service shop/gone does not exist; create it or fix the name (the hostname answers 404 until then)\n"
    );
}

const INGRESS: &str = r#"apiVersion: networking.cfargotunnel.com/v1alpha2
kind: ClusterTunnel
metadata: {name: edge}
spec:
  newTunnel: {name: edge}
  cloudflare: {domain: example.com, secret: cloudflare-api, accountId: 0123456789abcdef0123456789abcdef}
---
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: cftunnel}
spec:
  controller: cfargotunnel.com/cftunnel
  parameters: {apiGroup: networking.cfargotunnel.com, kind: ClusterTunnel, name: edge, scope: Cluster}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec:
  ports: [{name: http, port: 8080}]
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: shop, namespace: shop}
spec:
  ingressClassName: cftunnel
  defaultBackend: {service: {name: web, port: {name: http}}}
  rules:
    - host: app.example.com
      http:
        paths:
          - {path: /api, pathType: Prefix, backend: {service: {name: web, port: {number: 8080}}}}
          - {path: /api/v1, pathType: Exact, backend: {service: {name: web, port: {number: 8080}}}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: cftunnel}
spec:
  controllerName: cfargotunnel.com/cftunnel
  parametersRef: {group: networking.cfargotunnel.com, kind: ClusterTunnel, name: edge}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: public, namespace: shop}
spec:
  gatewayClassName: cftunnel
  listeners: [{name: http, port: 80, protocol: HTTP}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: gw, namespace: shop}
spec:
  parentRefs: [{name: public}]
  hostnames: [gw.example.com]
  rules:
    - matches: [{path: {type: PathPrefix, value: /v2}}]
      backendRefs: [{name: web, port: 8080}]
"#;

#[test]
fn render_routes_an_ingress_and_an_http_route_with_typed_paths_and_the_default_backend_as_the_catch_all()
 {
    let (config, stderr) = rendered_config(INGRESS);
    assert_eq!(
        config["ingress"],
        json!([
            {"hostname": "app.example.com", "path": "^/api/v1$", "service": "http://web.shop.svc:8080"},
            {"hostname": "app.example.com", "path": "^/api(/|$)", "service": "http://web.shop.svc:8080"},
            {"hostname": "gw.example.com", "path": "^/v2(/|$)", "service": "http://web.shop.svc:8080"},
            {"service": "http://web.shop.svc:8080"},
        ])
    );
    assert_eq!(stderr, "");
}

const ACCESS_TOKEN_ID: &str = "0f1e2d3c.access.render";
const ACCESS_TOKEN_SECRET: &str = "render-test-service-token-value";

/// An AccessTunnel rendered offline from its live manifest, with its token Secret in the same
/// input, is the ServiceAccount, Deployment, Service and PDB the reconciler applied (a dry-run
/// apply of each under the reconciler's field manager changes nothing but the checksum, which
/// offline is computed from placeholders), and no value of the token is printed.
#[tokio::test]
async fn render_of_an_access_tunnel_is_what_the_reconciler_applied_and_prints_no_token() {
    use cftunnel_types::access_tunnel::AccessTunnel;
    use k8s_openapi::api::core::v1::Service;

    let h = Harness::start("render-access").await;
    h.create_api_secret(
        "access-token",
        &[
            ("CLOUDFLARE_ACCESS_SERVICE_TOKEN_ID", ACCESS_TOKEN_ID),
            ("CLOUDFLARE_ACCESS_SERVICE_TOKEN_TOKEN", ACCESS_TOKEN_SECRET),
        ],
    )
    .await;
    let access: Api<AccessTunnel> = Api::namespaced(h.admin.clone(), &h.ns);
    let at: AccessTunnel = serde_json::from_value(json!({
        "apiVersion": "networking.cfargotunnel.com/v1alpha1",
        "kind": "AccessTunnel",
        "metadata": {"name": "bastion", "labels": {"cftunnel-test/run": h.ns}},
        "target": {"fqdn": "ssh.example.com", "protocol": "ssh", "svc": {"name": "bastion-ssh", "port": 2222}},
        "serviceToken": {"secretRef": "access-token"},
    }))
    .expect("access tunnel json");
    access
        .create(&kube::api::PostParams::default(), &at)
        .await
        .expect("create access tunnel");
    let live_at = cftunnel_testenv::poll_until(
        "AccessTunnel Ready",
        harness::WAIT,
        harness::POLL,
        || async {
            let at = access.get("bastion").await.ok()?;
            let ready = at
                .status
                .as_ref()?
                .conditions
                .as_ref()?
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True");
            ready.then_some(at)
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));

    // The input: the live object and its token Secret, as a directory of manifests would hold.
    let secret = h.secrets().get("access-token").await.expect("secret");
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("access.yaml");
    let text = format!(
        "{}---\n{}",
        serde_yaml_ng::to_string(&live_at).expect("yaml"),
        serde_yaml_ng::to_string(&secret).expect("yaml")
    );
    std::fs::write(&file, text).expect("write");
    let (out, stderr) = render(&file, "cftunnel-tunnels");
    assert_eq!(stderr, "");
    use base64::Engine;
    for value in [ACCESS_TOKEN_ID, ACCESS_TOKEN_SECRET] {
        let encoded = base64::engine::general_purpose::STANDARD.encode(value);
        assert!(
            !out.contains(value) && !out.contains(&encoded),
            "a token value is in the output:\n{out}"
        );
    }
    let docs: Vec<Value> = out
        .split("---\n")
        .filter(|d| !d.trim().is_empty())
        .map(|d| serde_yaml_ng::from_str(d).expect("yaml"))
        .collect();
    let kinds: Vec<&str> = docs.iter().filter_map(|d| d["kind"].as_str()).collect();
    assert_eq!(
        kinds,
        [
            "ServiceAccount",
            "Deployment",
            "Service",
            "PodDisruptionBudget"
        ]
    );
    let container = &by_kind(&docs, "Deployment")["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(
        container["command"],
        Value::Null,
        "the image's cloudflared entrypoint"
    );
    assert_eq!(
        container["args"],
        json!([
            "access",
            "ssh",
            "--hostname",
            "ssh.example.com",
            "--listener",
            "0.0.0.0:8000"
        ])
    );
    assert_eq!(
        container["env"],
        json!([
            {"name": "TUNNEL_SERVICE_TOKEN_ID", "valueFrom": {"secretKeyRef": {"name": "access-token", "key": "CLOUDFLARE_ACCESS_SERVICE_TOKEN_ID"}}},
            {"name": "TUNNEL_SERVICE_TOKEN_SECRET", "valueFrom": {"secretKeyRef": {"name": "access-token", "key": "CLOUDFLARE_ACCESS_SERVICE_TOKEN_TOKEN"}}},
        ])
    );
    let service = by_kind(&docs, "Service");
    assert_eq!(service["metadata"]["name"], "bastion-ssh");
    assert_eq!(
        service["spec"]["ports"],
        json!([{"name": "ssh", "protocol": "TCP", "port": 2222, "targetPort": 8000}])
    );

    // Each rendered object applied as a dry run under the reconciler's field manager leaves the
    // live one as it is (the Deployment given the live checksum first).
    let ns = h.ns.as_str();
    let apply = PatchParams::apply("cftunnel").force().dry_run();
    let deployments = Api::<Deployment>::namespaced(h.admin.clone(), ns);
    let live =
        serde_json::to_value(deployments.get("bastion").await.expect("deployment")).expect("json");
    let checksum_path = "/spec/template/metadata/annotations";
    let live_checksum = live
        .pointer(checksum_path)
        .and_then(|a| a.get(ANNOTATION_CHECKSUM))
        .cloned()
        .expect("live checksum");
    let mut rendered = by_kind(&docs, "Deployment").clone();
    if let Some(annotations) = rendered.pointer_mut(checksum_path) {
        assert_ne!(
            annotations[ANNOTATION_CHECKSUM], live_checksum,
            "the offline checksum comes from placeholders, not the token"
        );
        annotations[ANNOTATION_CHECKSUM] = live_checksum;
    }
    let dry = deployments
        .patch("bastion", &apply, &Patch::Apply(&rendered))
        .await
        .expect("dry-run apply deployment");
    let dry = serde_json::to_value(dry).expect("json");
    for key in ["/spec", "/metadata/labels", "/metadata/ownerReferences"] {
        assert_eq!(dry.pointer(key), live.pointer(key), "Deployment {key}");
    }
    let services = Api::<Service>::namespaced(h.admin.clone(), ns);
    let live =
        serde_json::to_value(services.get("bastion-ssh").await.expect("service")).expect("json");
    let dry = services
        .patch("bastion-ssh", &apply, &Patch::Apply(service))
        .await
        .expect("dry-run apply service");
    let dry = serde_json::to_value(dry).expect("json");
    for key in ["/spec", "/metadata/labels", "/metadata/ownerReferences"] {
        assert_eq!(dry.pointer(key), live.pointer(key), "Service {key}");
    }
    let pdbs = Api::<PodDisruptionBudget>::namespaced(h.admin.clone(), ns);
    let live = serde_json::to_value(pdbs.get("bastion").await.expect("pdb")).expect("json");
    let dry = pdbs
        .patch(
            "bastion",
            &apply,
            &Patch::Apply(by_kind(&docs, "PodDisruptionBudget")),
        )
        .await
        .expect("dry-run apply pdb");
    let dry = serde_json::to_value(dry).expect("json");
    for key in ["/spec", "/metadata/labels", "/metadata/ownerReferences"] {
        assert_eq!(dry.pointer(key), live.pointer(key), "PDB {key}");
    }
    let accounts = Api::<ServiceAccount>::namespaced(h.admin.clone(), ns);
    let sa = by_kind(&docs, "ServiceAccount");
    let name = sa["metadata"]["name"].as_str().expect("sa name");
    let live = serde_json::to_value(accounts.get(name).await.expect("sa")).expect("json");
    let dry = accounts
        .patch(name, &apply, &Patch::Apply(sa))
        .await
        .expect("dry-run apply sa");
    let dry = serde_json::to_value(dry).expect("json");
    for key in [
        "/automountServiceAccountToken",
        "/metadata/labels",
        "/metadata/ownerReferences",
    ] {
        assert_eq!(dry.pointer(key), live.pointer(key), "ServiceAccount {key}");
    }
}
