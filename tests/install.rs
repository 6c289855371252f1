//! Installing cftunnel (docs/design.md §7.1, §7.2) against a real kube-apiserver: `kubectl apply -k
//! manifests/` and the Helm chart pass a server-side dry run with pods that meet the restricted
//! profile, the chart grants exactly the manifests' RBAC, and the certificate manager — run as
//! cftunnel's ServiceAccount, twice at once — ends with one CA that it injects into the shipped
//! webhook configurations and CRD conversion, keeping the old CA beside a rotated one.
#[path = "install/certificates.rs"]
mod certificates;
mod common;
mod install_support;

use cftunnel_testenv::{ControlPlane, ControlPlaneOptions, shared};
use cftunnel_types::crds::CONVERTED_CRDS;
use cftunnel_types::crds::{self, ConversionService};
use install_support::{
    NAMESPACE, documents, find, install_namespaces_and_rbac, kubectl_ok, repo_path,
};
use serde_json::Value;
use tokio::sync::OnceCell;

static INSTALLED: OnceCell<()> = OnceCell::const_new();

/// The shared plane with the shipped CRDs, namespaces, RBAC and webhook configurations (whose
/// Service does not exist: nothing in this binary creates objects they intercept).
pub(crate) async fn plane() -> &'static ControlPlane {
    let plane = shared(|| ControlPlaneOptions {
        crds: crds::all(&ConversionService::default()),
        ..Default::default()
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    INSTALLED
        .get_or_init(|| async {
            install_namespaces_and_rbac(plane).await;
            let webhooks = repo_path("manifests/webhooks.yaml");
            kubectl_ok(plane, &["apply", "-f", &webhooks.to_string_lossy()], "");
        })
        .await;
    plane
}

fn helm_template(plane: &ControlPlane, extra: &[&str]) -> String {
    let chart = repo_path("charts/cftunnel");
    let out = plane
        .helm()
        .args(["template", "cftunnel", &chart.to_string_lossy()])
        .args(["--namespace", NAMESPACE, "--kube-version", "1.37.2"])
        .args(extra)
        .output()
        .expect("run helm");
    assert!(
        out.status.success(),
        "helm template failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("helm prints UTF-8")
}

/// A server-side dry run of `yaml`; fails on any error or PodSecurity warning.
fn dry_run(plane: &ControlPlane, args: &[&str], yaml: &str) -> String {
    let printed = kubectl_ok(
        plane,
        &[&["apply", "--dry-run=server"], args].concat(),
        yaml,
    );
    assert!(
        !printed.contains("PodSecurity"),
        "pods must meet the restricted profile:\n{printed}"
    );
    printed
}

fn manifest_docs(file: &str) -> Vec<Value> {
    documents(&std::fs::read_to_string(repo_path(file)).expect("read manifest"))
}

/// What the restricted profile does not check: a read-only root, both downward-API variables
/// and the probes on the health port.
fn assert_runs_hardened(docs: &[Value]) {
    let pod = &find(docs, "Deployment", Some("cftunnel"))[0]["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    assert_eq!(container["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(
        container["securityContext"]["capabilities"]["drop"],
        serde_json::json!(["ALL"])
    );
    let env: Vec<(&str, &str)> = container["env"]
        .as_array()
        .expect("env")
        .iter()
        .filter_map(|e| {
            Some((
                e["name"].as_str()?,
                e["valueFrom"]["fieldRef"]["fieldPath"].as_str()?,
            ))
        })
        .collect();
    assert_eq!(
        env,
        [
            ("POD_NAME", "metadata.name"),
            ("POD_NAMESPACE", "metadata.namespace")
        ]
    );
    for (probe, path) in [
        ("readinessProbe", "/readyz"),
        ("livenessProbe", "/healthz"),
        ("startupProbe", "/healthz"),
    ] {
        assert_eq!(container[probe]["httpGet"]["path"], path, "{probe}");
        assert_eq!(container[probe]["httpGet"]["port"], "health", "{probe}");
    }
}

fn deployment_args(docs: &[Value]) -> Vec<String> {
    let deployment = find(docs, "Deployment", Some("cftunnel"));
    assert_eq!(deployment.len(), 1);
    deployment[0]["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .expect("args")
        .iter()
        .filter_map(|a| a.as_str().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn kubectl_apply_k_manifests_passes_a_server_dry_run() {
    let plane = plane().await;
    let dir = repo_path("manifests");
    let printed = dry_run(plane, &["-k", &dir.to_string_lossy()], "");
    for object in [
        "namespace/cftunnel-system",
        "namespace/cftunnel-tunnels",
        "customresourcedefinition.apiextensions.k8s.io/tunnels.networking.cfargotunnel.com",
        "customresourcedefinition.apiextensions.k8s.io/clustertunnels.networking.cfargotunnel.com",
        "customresourcedefinition.apiextensions.k8s.io/tunnelbindings.networking.cfargotunnel.com",
        "serviceaccount/cftunnel",
        "clusterrole.rbac.authorization.k8s.io/cftunnel",
        "clusterrolebinding.rbac.authorization.k8s.io/cftunnel",
        "validatingwebhookconfiguration.admissionregistration.k8s.io/cftunnel",
        "mutatingwebhookconfiguration.admissionregistration.k8s.io/cftunnel",
        "service/cftunnel-webhook",
        "service/cftunnel-admission",
        "deployment.apps/cftunnel",
        "poddisruptionbudget.policy/cftunnel",
    ] {
        assert!(printed.contains(object), "{object} missing:\n{printed}");
    }
    assert_runs_hardened(&manifest_docs("manifests/deployment.yaml"));
}

#[tokio::test]
async fn helm_chart_passes_a_server_dry_run_and_grants_exactly_the_manifests_rbac() {
    let plane = plane().await;
    let rendered = helm_template(plane, &[]);
    dry_run(plane, &["-f", "-"], &rendered);
    let chart = documents(&rendered);

    let rbac = manifest_docs("manifests/rbac.yaml");
    for kind in ["ClusterRole", "Role"] {
        let rules = |docs: &[Value]| -> Vec<(Value, Value)> {
            find(docs, kind, None)
                .iter()
                .map(|d| (d["metadata"]["name"].clone(), d["rules"].clone()))
                .collect()
        };
        assert!(!rules(&rbac).is_empty(), "manifests/rbac.yaml has a {kind}");
        assert_eq!(
            rules(&chart),
            rules(&rbac),
            "charts/cftunnel/templates/rbac.yaml must grant what manifests/rbac.yaml grants ({kind})"
        );
    }
    for kind in ["ClusterRoleBinding", "RoleBinding"] {
        let bound = |docs: &[Value]| -> Vec<(Value, Value)> {
            find(docs, kind, None)
                .iter()
                .map(|d| (d["roleRef"].clone(), d["subjects"].clone()))
                .collect()
        };
        assert_eq!(bound(&chart), bound(&rbac), "{kind}");
    }
    let webhooks = manifest_docs("manifests/webhooks.yaml");
    for kind in [
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
    ] {
        assert_eq!(
            find(&chart, kind, Some("cftunnel"))[0]["webhooks"],
            find(&webhooks, kind, Some("cftunnel"))[0]["webhooks"],
            "{kind} of the chart differs from manifests/webhooks.yaml"
        );
    }
    let shipped: Vec<Value> = crds::all(&ConversionService::default())
        .iter()
        .map(|crd| serde_json::to_value(crd).expect("CRD as JSON"))
        .collect();
    let charted = find(&chart, "CustomResourceDefinition", None);
    assert_eq!(charted.len(), shipped.len());
    for (charted, shipped) in charted.iter().zip(&shipped) {
        assert_eq!(charted["spec"], shipped["spec"]);
        assert_eq!(
            charted["metadata"]["annotations"]["helm.sh/resource-policy"],
            "keep"
        );
        assert!(
            charted["metadata"]["annotations"]
                .get("cert-manager.io/inject-ca-from")
                .is_none()
        );
    }
    assert_runs_hardened(&chart);
    let args = deployment_args(&chart);
    assert!(
        args.contains(&"--certificate-mode=self-managed".to_owned()),
        "{args:?}"
    );
    assert!(args.contains(&"--cluster-resource-namespace=cftunnel-tunnels".to_owned()));
    let volume = &find(&chart, "Deployment", None)[0]["spec"]["template"]["spec"]["volumes"][0];
    assert_eq!(volume["emptyDir"]["medium"], "Memory");
}

#[tokio::test]
async fn helm_chart_installs_the_gateway_api_crds_only_when_asked_and_keeps_them() {
    let plane = plane().await;
    let gateway_crds = |docs: &[Value]| -> Vec<String> {
        find(docs, "CustomResourceDefinition", None)
            .iter()
            .filter(|d| d["spec"]["group"] == "gateway.networking.k8s.io")
            .map(|d| d["metadata"]["name"].as_str().unwrap_or("").to_string())
            .collect()
    };
    assert!(gateway_crds(&documents(&helm_template(plane, &[]))).is_empty());
    let rendered = helm_template(plane, &["--set", "crds.gatewayApi=true"]);
    dry_run(plane, &["--server-side", "-f", "-"], &rendered);
    let chart = documents(&rendered);
    assert_eq!(
        gateway_crds(&chart),
        [
            "gatewayclasses",
            "gateways",
            "httproutes",
            "grpcroutes",
            "referencegrants",
            "tcproutes",
            "udproutes"
        ]
        .map(|k| format!("{k}.gateway.networking.k8s.io"))
    );
    for crd in find(&chart, "CustomResourceDefinition", None)
        .iter()
        .filter(|d| d["spec"]["group"] == "gateway.networking.k8s.io")
    {
        assert_eq!(
            crd["metadata"]["annotations"]["helm.sh/resource-policy"],
            "keep"
        );
        assert_eq!(
            crd["metadata"]["annotations"]["gateway.networking.k8s.io/bundle-version"],
            "v1.6.3"
        );
    }
}

#[tokio::test]
async fn helm_chart_in_cert_manager_mode_issues_and_injects_through_cert_manager() {
    let plane = plane().await;
    let rendered = helm_template(
        plane,
        &[
            "--set",
            "certificates.mode=cert-manager",
            "--set",
            "clusterResourceNamespace.name=cloudflare-operator-system",
        ],
    );
    let docs = documents(&rendered);
    let (cert_manager, rest): (Vec<Value>, Vec<Value>) = docs
        .into_iter()
        .partition(|d| d["apiVersion"] == "cert-manager.io/v1");
    assert_eq!(find(&cert_manager, "Issuer", None).len(), 2);
    let serving = find(&cert_manager, "Certificate", Some("cftunnel-webhook"));
    assert_eq!(
        serving[0]["spec"]["dnsNames"],
        serde_json::json!([
            "cftunnel-webhook.cftunnel-system.svc",
            "cftunnel-admission.cftunnel-system.svc"
        ]),
        "the conversion Service and the admission Service (ready replicas only)"
    );
    let yaml: String = rest
        .iter()
        .map(|d| format!("---\n{}", serde_yaml_ng::to_string(d).expect("YAML")))
        .collect();
    dry_run(plane, &["-f", "-"], &yaml);

    let injected = |d: &Value| {
        d["metadata"]["annotations"]["cert-manager.io/inject-ca-from"]
            == "cftunnel-system/cftunnel-webhook"
    };
    for kind in [
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
    ] {
        assert!(
            find(&rest, kind, None).iter().all(|d| injected(d)),
            "{kind}"
        );
    }
    let crds = find(&rest, "CustomResourceDefinition", None);
    let names: Vec<&str> = crds
        .iter()
        .filter(|d| injected(d))
        .filter_map(|d| d["metadata"]["name"].as_str())
        .collect();
    assert_eq!(names, CONVERTED_CRDS);
    let args = deployment_args(&rest);
    assert!(
        args.contains(&"--certificate-mode=files".to_owned()),
        "{args:?}"
    );
    assert!(args.contains(&"--cluster-resource-namespace=cloudflare-operator-system".to_owned()));
    let volume = &find(&rest, "Deployment", None)[0]["spec"]["template"]["spec"]["volumes"][0];
    assert_eq!(
        volume["secret"]["secretName"],
        serving[0]["spec"]["secretName"]
    );
}

/// The folder of the Prometheus Operator's CRDs (`scripts/prometheus-operator-crds.sh`).
fn prometheus_operator_crds() -> std::path::PathBuf {
    let out = std::process::Command::new(repo_path("scripts/prometheus-operator-crds.sh"))
        .output()
        .expect("run scripts/prometheus-operator-crds.sh");
    assert!(
        out.status.success(),
        "scripts/prometheus-operator-crds.sh failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::path::PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

#[tokio::test]
async fn helm_chart_renders_monitoring_only_where_the_prometheus_operator_is_served_and_the_api_server_accepts_it()
 {
    let plane = plane().await;
    let on = [
        "--set",
        "monitoring.serviceMonitor.enabled=true",
        "--set",
        "monitoring.podMonitor.enabled=true",
        "--set",
        "monitoring.prometheusRule.enabled=true",
        "--set",
        "monitoring.dashboard.enabled=true",
    ];
    let operator_kinds = ["ServiceMonitor", "PodMonitor", "PrometheusRule"];
    // Without the Prometheus Operator's API nothing of it is rendered; the dashboard is a
    // ConfigMap and is.
    let without = documents(&helm_template(plane, &on));
    for kind in operator_kinds {
        assert!(find(&without, kind, None).is_empty(), "{kind} rendered");
    }
    assert!(find(&without, "Service", Some("cftunnel-metrics")).is_empty());
    let dashboard = find(&without, "ConfigMap", Some("cftunnel-dashboard"));
    assert_eq!(dashboard.len(), 1);
    assert_eq!(dashboard[0]["metadata"]["labels"]["grafana_dashboard"], "1");
    let json: Value = serde_json::from_str(
        dashboard[0]["data"]["cftunnel.json"]
            .as_str()
            .expect("the dashboard JSON"),
    )
    .expect("the dashboard is JSON");
    assert!(json["panels"].as_array().is_some_and(|p| !p.is_empty()));

    let crds = prometheus_operator_crds();
    for kind in ["servicemonitors", "podmonitors", "prometheusrules"] {
        let file = crds.join(format!("monitoring.coreos.com_{kind}.yaml"));
        kubectl_ok(
            plane,
            &["apply", "--server-side", "-f", &file.to_string_lossy()],
            "",
        );
        kubectl_ok(
            plane,
            &[
                "wait",
                "--for=condition=Established",
                "--timeout=60s",
                &format!("crd/{kind}.monitoring.coreos.com"),
            ],
            "",
        );
    }
    let args: Vec<&str> = on
        .iter()
        .copied()
        .chain(["--api-versions", "monitoring.coreos.com/v1"])
        .collect();
    let rendered = helm_template(plane, &args);
    // The API server validates every object against its CRD's schema.
    dry_run(plane, &["--server-side", "-f", "-"], &rendered);
    let with = documents(&rendered);
    for kind in operator_kinds {
        assert_eq!(find(&with, kind, None).len(), 1, "one {kind}");
    }
    let service = find(&with, "Service", Some("cftunnel-metrics"));
    let monitor = find(&with, "ServiceMonitor", None);
    for (key, value) in monitor[0]["spec"]["selector"]["matchLabels"]
        .as_object()
        .expect("a selector")
    {
        assert_eq!(
            &service[0]["metadata"]["labels"][key], value,
            "the ServiceMonitor selects the metrics Service ({key})"
        );
    }
    let rules = find(&with, "PrometheusRule", None);
    let alerts: Vec<&Value> = rules[0]["spec"]["groups"]
        .as_array()
        .expect("rule groups")
        .iter()
        .flat_map(|g| g["rules"].as_array().into_iter().flatten())
        .filter(|r| r.get("alert").is_some())
        .collect();
    assert!(!alerts.is_empty());
    for alert in alerts {
        let url = alert["annotations"]["runbook_url"].as_str().unwrap_or("");
        assert!(
            url.starts_with("docs/runbooks.md#cftunnel"),
            "{} links {url:?}",
            alert["alert"]
        );
    }

    // `kubectl apply -k` users: the component carries the same objects, accepted as well.
    let overlay = tempfile::tempdir().expect("overlay folder");
    // Kustomize takes relative paths only: up to `/`, then down to the repository.
    let up = "../".repeat(overlay.path().components().count() - 1);
    let relative = |path: &str| {
        let absolute = repo_path(path);
        format!(
            "{up}{}",
            absolute.display().to_string().trim_start_matches('/')
        )
    };
    let kustomization = format!(
        "resources: [{}]\ncomponents: [{}]\n",
        relative("manifests"),
        relative("manifests/components/monitoring")
    );
    std::fs::write(overlay.path().join("kustomization.yaml"), kustomization)
        .expect("overlay kustomization");
    let built = kubectl_ok(
        plane,
        &[
            "kustomize",
            "--load-restrictor",
            "LoadRestrictionsNone",
            &overlay.path().to_string_lossy(),
        ],
        "",
    );
    dry_run(plane, &["--server-side", "-f", "-"], &built);
    let kustomized = documents(&built);
    for kind in operator_kinds {
        assert_eq!(find(&kustomized, kind, None).len(), 1, "one {kind}");
    }
    assert_eq!(
        find(&kustomized, "ConfigMap", Some("cftunnel-dashboard")).len(),
        1
    );
}
