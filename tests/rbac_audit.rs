//! The shipped RBAC allows every API call cftunnel makes. `cftunnel run` runs as its
//! ServiceAccount under manifests/rbac.yaml (self-managed certificates, leader election, both
//! tunnel kinds, a TunnelBinding, a labelled Service, an Ingress of cftunnel's class, a Gateway and an HTTPRoute (the Gateway API CRDs installed as the chart ships them), a user-managed cloudflared Deployment and
//! DaemonSet stamped by the checksum watcher, then deletion of it all) while the API server's
//! audit log records every request with its user and response code: none of the operator's
//! requests may be answered 403, and each kind of call the code makes must be in the log.
mod common;
mod install_support;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use cftunnel_sim::{SimConfig, Simulator};
use cftunnel_testenv::{
    AUDIT_LOG_FILE, ControlPlane, ControlPlaneOptions, audit_args, poll_until, read_audit_log,
    shared,
};
use cftunnel_types::crds::{self, ConversionService};
use cftunnel_types::names::ANNOTATION_CHECKSUM;
use cftunnel_types::{ClusterTunnel, Tunnel, TunnelBinding};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use serde_json::{Value, json};

use install_support::{
    NAMESPACE, OPERATOR_USER, cftunnel_run, install_gateway_api_crds, install_namespaces_and_rbac,
    kubectl_ok, repo_path,
};

const WAIT: Duration = Duration::from_secs(120);
const POLL: Duration = Duration::from_millis(500);
const TOKEN: &str = "rbac-audit-token";

/// Holds the audit policy and log for the life of the test process.
fn audit_dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        tempfile::Builder::new()
            .prefix("cftunnel-audit-")
            .tempdir()
            .expect("audit dir")
            .keep()
    })
}

async fn plane() -> &'static ControlPlane {
    shared(|| ControlPlaneOptions {
        controller_manager: true,
        crds: crds::all(&ConversionService::default()),
        // Owner references with blockOwnerDeletion are checked against RBAC too, as on clusters
        // that enable the plugin.
        extra_apiserver_args: [
            vec!["--enable-admission-plugins=OwnerReferencesPermissionEnforcement".to_owned()],
            audit_args(audit_dir()).expect("audit policy"),
        ]
        .concat(),
        ..ControlPlaneOptions::default()
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"))
}

/// The shipped webhook configurations, failing open: their Service has no endpoints here, and
/// this test is about cftunnel's own calls (the self-managed certificates still fill in their
/// caBundle).
fn install_webhooks_failing_open(plane: &ControlPlane) {
    let text = std::fs::read_to_string(repo_path("manifests/webhooks.yaml")).expect("webhooks");
    let open = text.replace("failurePolicy: Fail", "failurePolicy: Ignore");
    kubectl_ok(plane, &["apply", "-f", "-"], &open);
}

async fn create<K>(api: &Api<K>, object: Value) -> K
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::Serialize + serde::de::DeserializeOwned,
{
    let object: K = serde_json::from_value(object).expect("object json");
    api.create(&PostParams::default(), &object)
        .await
        .expect("create")
}

fn workload(kind: &str, name: &str) -> Value {
    let template = json!({
        "metadata": {"labels": {"app": name}},
        "spec": {
            "containers": [{"name": "cloudflared", "image": "cloudflare/cloudflared:2025.4.0",
                "volumeMounts": [{"name": "config", "mountPath": "/etc/cloudflared"}]}],
            "volumes": [{"name": "config", "configMap": {"name": "user-config"}}],
        },
    });
    let mut spec = json!({"selector": {"matchLabels": {"app": name}}, "template": template});
    if kind == "Deployment" {
        spec["replicas"] = json!(0);
    }
    json!({
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"name": name, "labels": {"cfargotunnel.com/app": "cloudflared"}},
        "spec": spec,
    })
}

/// Whether the workload's pod template carries the config checksum.
fn stamped(workload: &Value) -> bool {
    workload["spec"]["template"]["metadata"]["annotations"][ANNOTATION_CHECKSUM].is_string()
}

async fn wait_ready<K>(api: &Api<K>, name: &str, ready: fn(&K) -> bool)
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    poll_until(&format!("{name} to converge"), WAIT, POLL, || async {
        api.get_opt(name)
            .await
            .ok()
            .flatten()
            .filter(ready)
            .map(|_| ())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
}

fn ready_condition(status: Option<&Value>) -> bool {
    status
        .and_then(|s| s["conditions"].as_array())
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "True")
}

async fn wait_gone<K>(api: &Api<K>, name: &str)
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    poll_until(&format!("{name} to be deleted"), WAIT, POLL, || async {
        matches!(api.get_opt(name).await, Ok(None)).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
}

/// (verb, group/resource) of every call path of the operator exercised here.
const EXPECTED_CALLS: &[(&str, &str)] = &[
    ("get", "apiextensions.k8s.io/customresourcedefinitions"),
    ("patch", "apiextensions.k8s.io/customresourcedefinitions"),
    (
        "get",
        "admissionregistration.k8s.io/validatingwebhookconfigurations",
    ),
    (
        "patch",
        "admissionregistration.k8s.io/validatingwebhookconfigurations",
    ),
    (
        "get",
        "admissionregistration.k8s.io/mutatingwebhookconfigurations",
    ),
    (
        "patch",
        "admissionregistration.k8s.io/mutatingwebhookconfigurations",
    ),
    ("create", "secrets"),
    ("get", "secrets"),
    ("list", "secrets"),
    ("watch", "secrets"),
    ("create", "coordination.k8s.io/leases"),
    ("get", "coordination.k8s.io/leases"),
    ("update", "coordination.k8s.io/leases"),
    ("list", "networking.cfargotunnel.com/tunnels"),
    ("watch", "networking.cfargotunnel.com/tunnels"),
    ("patch", "networking.cfargotunnel.com/tunnels"),
    ("patch", "networking.cfargotunnel.com/tunnels/status"),
    ("list", "networking.cfargotunnel.com/clustertunnels"),
    ("watch", "networking.cfargotunnel.com/clustertunnels"),
    ("patch", "networking.cfargotunnel.com/clustertunnels"),
    ("patch", "networking.cfargotunnel.com/clustertunnels/status"),
    ("list", "networking.cfargotunnel.com/tunnelbindings"),
    ("watch", "networking.cfargotunnel.com/tunnelbindings"),
    ("patch", "networking.cfargotunnel.com/tunnelbindings"),
    ("patch", "networking.cfargotunnel.com/tunnelbindings/status"),
    ("list", "services"),
    ("watch", "services"),
    ("list", "networking.k8s.io/ingresses"),
    ("watch", "networking.k8s.io/ingresses"),
    ("patch", "networking.k8s.io/ingresses/status"),
    ("list", "networking.k8s.io/ingressclasses"),
    ("watch", "networking.k8s.io/ingressclasses"),
    ("list", "gateway.networking.k8s.io/gatewayclasses"),
    ("watch", "gateway.networking.k8s.io/gatewayclasses"),
    ("patch", "gateway.networking.k8s.io/gatewayclasses/status"),
    ("list", "gateway.networking.k8s.io/gateways"),
    ("watch", "gateway.networking.k8s.io/gateways"),
    ("patch", "gateway.networking.k8s.io/gateways/status"),
    ("list", "gateway.networking.k8s.io/httproutes"),
    ("watch", "gateway.networking.k8s.io/httproutes"),
    ("patch", "gateway.networking.k8s.io/httproutes/status"),
    ("list", "gateway.networking.k8s.io/grpcroutes"),
    ("watch", "gateway.networking.k8s.io/grpcroutes"),
    ("list", "gateway.networking.k8s.io/referencegrants"),
    ("watch", "gateway.networking.k8s.io/referencegrants"),
    ("list", "namespaces"),
    ("watch", "namespaces"),
    ("get", "configmaps"),
    ("list", "configmaps"),
    ("watch", "configmaps"),
    ("patch", "configmaps"),
    ("patch", "serviceaccounts"),
    ("list", "pods"),
    ("list", "apps/deployments"),
    ("watch", "apps/deployments"),
    ("patch", "apps/deployments"),
    ("list", "apps/daemonsets"),
    ("watch", "apps/daemonsets"),
    ("patch", "apps/daemonsets"),
    ("patch", "policy/poddisruptionbudgets"),
    ("create", "events.k8s.io/events"),
];

#[tokio::test]
async fn every_call_of_cftunnel_run_is_allowed_by_the_shipped_rbac() {
    let plane = plane().await;
    install_namespaces_and_rbac(plane).await;
    install_webhooks_failing_open(plane);
    let admin = plane.admin_client().expect("admin client");
    let ns = plane
        .create_namespace("rbac-audit")
        .await
        .expect("namespace");
    let sim = Simulator::new(SimConfig {
        tokens: vec![TOKEN.to_string()],
        ..SimConfig::default()
    });
    let cloudflare = sim
        .serve("127.0.0.1:0".parse().expect("addr"))
        .await
        .expect("sim");

    // The Gateway API CRDs as the chart ships them, so its watches and status writes run too.
    install_gateway_api_crds(plane);
    let user = plane
        .user(OPERATOR_USER, &["system:serviceaccounts"])
        .expect("operator user");
    let dir = tempfile::tempdir().expect("temp dir");
    let (mut command, log_path) = cftunnel_run(dir.path(), user.kubeconfig());
    let child = command
        .args(["--cloudflare-api-url", &cloudflare.url])
        .env("POD_NAMESPACE", NAMESPACE)
        .env("POD_NAME", "cftunnel-audit")
        .env("RUST_LOG", "info")
        .spawn()
        .expect("start cftunnel run");
    let _child = KillOnDrop(child);
    let operator_log = || std::fs::read_to_string(&log_path).unwrap_or_default();

    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(admin.clone(), &ns);
    let cluster_ns = "cftunnel-tunnels";
    for (api, name) in [
        (secrets.clone(), "cloudflare-api"),
        (Api::namespaced(admin.clone(), cluster_ns), "rbac-audit-api"),
    ] {
        create(
            &api,
            json!({
                "apiVersion": "v1", "kind": "Secret", "metadata": {"name": name},
                "stringData": {"CLOUDFLARE_API_TOKEN": TOKEN},
            }),
        )
        .await;
    }
    let spec = |secret: &str, name: &str| {
        json!({
            "newTunnel": {"name": name},
            "cloudflare": {"domain": "example.com", "secret": secret, "accountId": sim.account_id()},
        })
    };
    let tunnels: Api<Tunnel> = Api::namespaced(admin.clone(), &ns);
    let cluster_tunnels: Api<ClusterTunnel> = Api::all(admin.clone());
    let bindings: Api<TunnelBinding> = Api::namespaced(admin.clone(), &ns);
    let services: Api<k8s_openapi::api::core::v1::Service> = Api::namespaced(admin.clone(), &ns);
    let config_maps: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(admin.clone(), &ns);
    create(
        &tunnels,
        json!({
            "apiVersion": "networking.cfargotunnel.com/v1alpha2", "kind": "Tunnel",
            "metadata": {"name": "shop"}, "spec": spec("cloudflare-api", "rbac-shop"),
        }),
    )
    .await;
    create(
        &cluster_tunnels,
        json!({
            "apiVersion": "networking.cfargotunnel.com/v1alpha2", "kind": "ClusterTunnel",
            "metadata": {"name": "rbac-audit-edge"}, "spec": spec("rbac-audit-api", "rbac-edge"),
        }),
    )
    .await;
    for (name, labels) in [
        ("web", json!({})),
        ("api", json!({"cfargotunnel.com/expose-tunnel": "shop"})),
    ] {
        create(
            &services,
            json!({
                "apiVersion": "v1", "kind": "Service",
                "metadata": {"name": name, "labels": labels},
                "spec": {"ports": [{"name": "http", "port": 80}]},
            }),
        )
        .await;
    }
    create(
        &bindings,
        json!({
            "apiVersion": "networking.cfargotunnel.com/v1alpha1", "kind": "TunnelBinding",
            "metadata": {"name": "web"}, "subjects": [{"name": "web"}],
            "tunnelRef": {"kind": "Tunnel", "name": "shop"},
        }),
    )
    .await;
    create(
        &config_maps,
        json!({
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "user-config"},
            "data": {"config.yaml": "tunnel: user-managed\n"},
        }),
    )
    .await;
    let classes: Api<k8s_openapi::api::networking::v1::IngressClass> = Api::all(admin.clone());
    create(
        &classes,
        json!({
            "apiVersion": "networking.k8s.io/v1", "kind": "IngressClass",
            "metadata": {"name": "rbac-audit"},
            "spec": {"controller": "cfargotunnel.com/cftunnel",
                     "parameters": {"apiGroup": "networking.cfargotunnel.com", "kind": "Tunnel",
                                    "name": "shop", "scope": "Namespace", "namespace": ns}},
        }),
    )
    .await;
    let ingresses: Api<k8s_openapi::api::networking::v1::Ingress> =
        Api::namespaced(admin.clone(), &ns);
    create(
        &ingresses,
        json!({
            "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "metadata": {"name": "web"},
            "spec": {"ingressClassName": "rbac-audit", "rules": [{"host": "ing.example.com",
                "http": {"paths": [{"path": "/", "pathType": "Prefix",
                    "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}]},
        }),
    )
    .await;
    let gateway_classes: Api<cftunnel_types::gateway::GatewayClass> = Api::all(admin.clone());
    create(
        &gateway_classes,
        json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
            "metadata": {"name": "rbac-audit"},
            "spec": {"controllerName": "cfargotunnel.com/cftunnel",
                     "parametersRef": {"group": "networking.cfargotunnel.com", "kind": "Tunnel",
                                       "name": "shop", "namespace": ns}},
        }),
    )
    .await;
    let gateways: Api<cftunnel_types::gateway::Gateway> = Api::namespaced(admin.clone(), &ns);
    create(
        &gateways,
        json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"name": "web"},
            "spec": {"gatewayClassName": "rbac-audit",
                     "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]},
        }),
    )
    .await;
    let http_routes: Api<cftunnel_types::gateway::HTTPRoute> = Api::namespaced(admin.clone(), &ns);
    create(
        &http_routes,
        json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": "web"},
            "spec": {"parentRefs": [{"name": "web"}], "hostnames": ["gw.example.com"],
                     "rules": [{"backendRefs": [{"name": "web", "port": 80}]}]},
        }),
    )
    .await;
    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), &ns);
    let daemon_sets: Api<DaemonSet> = Api::namespaced(admin.clone(), &ns);
    create(&deployments, workload("Deployment", "user-cloudflared")).await;
    create(&daemon_sets, workload("DaemonSet", "user-cloudflared")).await;

    wait_ready(&tunnels, "shop", |t| {
        ready_condition(serde_json::to_value(&t.status).ok().as_ref())
    })
    .await;
    wait_ready(&cluster_tunnels, "rbac-audit-edge", |t| {
        ready_condition(serde_json::to_value(&t.status).ok().as_ref())
    })
    .await;
    wait_ready(&bindings, "web", |b| {
        ready_condition(serde_json::to_value(&b.status).ok().as_ref())
    })
    .await;
    wait_ready(&ingresses, "web", |i| {
        i.status
            .as_ref()
            .and_then(|s| s.load_balancer.as_ref())
            .and_then(|lb| lb.ingress.as_ref())
            .is_some_and(|list| !list.is_empty())
    })
    .await;
    wait_ready(&http_routes, "web", |r| {
        r.status.as_ref().is_some_and(|s| {
            s.parents.iter().any(|p| {
                p.conditions
                    .iter()
                    .any(|c| c.type_ == "Accepted" && c.status == "True")
            })
        })
    })
    .await;
    wait_ready(&gateways, "web", |g| {
        g.status.as_ref().is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == "Programmed" && c.status == "True")
        })
    })
    .await;
    wait_ready(&deployments, "user-cloudflared", |d| {
        stamped(&serde_json::to_value(d).unwrap_or_default())
    })
    .await;
    let stamped_daemon_set = poll_until("the DaemonSet to be stamped", WAIT, POLL, || async {
        daemon_sets
            .get_opt("user-cloudflared")
            .await
            .ok()
            .flatten()
            .filter(|d| stamped(&serde_json::to_value(d).unwrap_or_default()))
    })
    .await;
    let audit_path = audit_dir().join(AUDIT_LOG_FILE);
    let operator_calls = || {
        read_audit_log(&audit_path)
            .expect("audit log")
            .into_iter()
            .filter(|r| r.user == OPERATOR_USER)
            .collect::<Vec<_>>()
    };
    if let Err(e) = stamped_daemon_set {
        let refused: Vec<String> = operator_calls()
            .into_iter()
            .filter(|r| r.code == 403)
            .map(|r| format!("{} {}", r.verb, r.resource))
            .collect();
        panic!("{e}; refused: {refused:?}\n{}", operator_log());
    }

    bindings
        .delete("web", &DeleteParams::default())
        .await
        .expect("delete binding");
    wait_gone(&bindings, "web").await;
    tunnels
        .delete("shop", &DeleteParams::default())
        .await
        .expect("delete tunnel");
    cluster_tunnels
        .delete("rbac-audit-edge", &DeleteParams::default())
        .await
        .expect("delete cluster tunnel");
    wait_gone(&tunnels, "shop").await;
    wait_gone(&cluster_tunnels, "rbac-audit-edge").await;

    let calls = operator_calls();
    let refused: Vec<String> = calls
        .iter()
        .filter(|r| r.code == 403)
        .map(|r| format!("{} {} ({})", r.verb, r.resource, r.uri))
        .collect();
    assert!(
        refused.is_empty(),
        "the shipped RBAC refused:\n{}\n{}",
        refused.join("\n"),
        operator_log()
    );
    let made: BTreeSet<(String, String)> = calls
        .iter()
        .map(|r| (r.verb.clone(), r.resource.clone()))
        .collect();
    let missing: Vec<&(&str, &str)> = EXPECTED_CALLS
        .iter()
        .filter(|(verb, resource)| !made.contains(&((*verb).to_owned(), (*resource).to_owned())))
        .collect();
    assert!(
        missing.is_empty(),
        "calls not seen in the audit log: {missing:?}\nmade: {made:#?}"
    );
}

/// Kills the child if the test fails before it ends.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
