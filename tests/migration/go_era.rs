//! The state the Go operator (`adyanth/cloudflare-operator`) leaves in a cluster and on
//! Cloudflare, written as it wrote it: its CRDs (`tests/data/go-operator/`), objects through
//! its CRDs' versions, their status, the workloads it made for them (controlled by the object,
//! written by its field manager) and DNS records in its `_managed` TXT format.
use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use cftunnel_testenv::{ControlPlane, poll_until};
use cftunnel_types::crds::{self, ConversionService};
use k8s_openapi::ByteString;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, WebhookClientConfig,
};
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};

use crate::harness::{Harness, POLL, WAIT};

/// The Go operator's field manager.
pub const GO_MANAGER: &str = "cloudflare-operator";
/// The one field manager every CRD installation of the test applies with, so each install
/// replaces the previous one whole, as `kubectl apply` of a release does.
const CRD_MANAGER: &str = "crd-install";
pub const GROUP: &str = "networking.cfargotunnel.com";

pub fn credentials(account: &str, id: &str, secret: [u8; 32]) -> Value {
    json!({"AccountTag": account, "TunnelSecret": STANDARD.encode(secret), "TunnelID": id})
}

pub fn cloudflare(h: &Harness, secret: &str) -> Value {
    json!({"domain": "example.com", "secret": secret, "accountId": h.sim.account_id()})
}

pub fn status(h: &Harness, id: &str, name: &str) -> Value {
    json!({
        "accountId": h.sim.account_id(),
        "tunnelId": id,
        "tunnelName": name,
        "zoneId": h.sim.zone_id("example.com").expect("zone"),
    })
}

/// cftunnel's CRDs, their conversion pointed at the webhook on `addr` (loopback: the API
/// server reaches no Service here), trusting the plane's CA.
pub fn cftunnel_crds(
    plane: &ControlPlane,
    addr: std::net::SocketAddr,
) -> Vec<CustomResourceDefinition> {
    crds::all(&ConversionService::default())
        .into_iter()
        .map(|mut crd| {
            if let Some(hook) = crd
                .spec
                .conversion
                .as_mut()
                .and_then(|c| c.webhook.as_mut())
            {
                hook.client_config = Some(WebhookClientConfig {
                    url: Some(format!("https://{addr}/convert")),
                    ca_bundle: Some(ByteString(plane.ca().cert_pem().as_bytes().to_vec())),
                    service: None,
                });
            }
            crd
        })
        .collect()
}

/// The CRDs of one Go release, from `tests/data/go-operator/<file>`.
pub fn go_crds(file: &str) -> Vec<CustomResourceDefinition> {
    let path = format!(
        "{}/tests/data/go-operator/{file}",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_yaml_ng::Deserializer::from_str(&text)
        .map(|d| serde::Deserialize::deserialize(d).unwrap_or_else(|e| panic!("{path}: {e}")))
        .filter(|v: &Value| !v.is_null())
        .map(|v| serde_json::from_value(v).unwrap_or_else(|e| panic!("{path}: {e}")))
        .collect()
}

/// Applies `crds` over whatever is installed and waits until every served version answers.
pub async fn install_crds(plane: &ControlPlane, crds: &[CustomResourceDefinition]) {
    let client = plane.admin_client().expect("admin client");
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in crds {
        let mut crd = crd.clone();
        crd.status = None;
        crd.metadata.creation_timestamp = None;
        let name = crd.name_any();
        let mut value = serde_json::to_value(&crd).expect("crd json");
        value["apiVersion"] = json!("apiextensions.k8s.io/v1");
        value["kind"] = json!("CustomResourceDefinition");
        api.patch(
            &name,
            &PatchParams::apply(CRD_MANAGER).force(),
            &Patch::Apply(&value),
        )
        .await
        .unwrap_or_else(|e| panic!("install CRD {name}: {e}"));
    }
    for crd in crds {
        for version in crd.spec.versions.iter().filter(|v| v.served) {
            let api = dynamic(
                &client,
                &crd.spec.names.kind,
                &version.name,
                &crd.spec.names.plural,
            );
            poll_until(
                &format!("{} {} served", crd.spec.names.kind, version.name),
                WAIT,
                POLL,
                || async { api.list(&Default::default()).await.ok().map(|_| ()) },
            )
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        }
    }
}

/// Every object of `kind` in `version`, cluster-wide.
pub fn dynamic(client: &Client, kind: &str, version: &str, plural: &str) -> Api<DynamicObject> {
    let resource = ApiResource {
        group: GROUP.into(),
        version: version.into(),
        api_version: format!("{GROUP}/{version}"),
        kind: kind.into(),
        plural: plural.into(),
    };
    Api::all_with(client.clone(), &resource)
}

fn namespaced(
    client: &Client,
    kind: &str,
    version: &str,
    namespace: Option<&str>,
) -> Api<DynamicObject> {
    let plural = format!("{}s", kind.to_lowercase());
    let resource = ApiResource {
        group: GROUP.into(),
        version: version.into(),
        api_version: format!("{GROUP}/{version}"),
        kind: kind.into(),
        plural,
    };
    match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    }
}

/// Stores `body` (apiVersion `GROUP/version`, kind `kind`) as the Go era did, through that
/// version; then writes `status` through the status subresource when given. Returns the uid.
pub async fn store(
    h: &Harness,
    kind: &str,
    version: &str,
    body: Value,
    status: Option<Value>,
) -> String {
    let namespace = (kind != "ClusterTunnel").then_some(h.ns.as_str());
    let api = namespaced(&h.admin, kind, version, namespace);
    let mut body = body;
    body["apiVersion"] = json!(format!("{GROUP}/{version}"));
    body["kind"] = json!(kind);
    // The test's operator watches only objects of its run (its scope); the label is the test's.
    body["metadata"]["labels"]["cftunnel-test/run"] = json!(h.ns);
    let object: DynamicObject = serde_json::from_value(body).expect("object json");
    let created = api
        .create(
            &PostParams {
                field_manager: Some("kubectl-client-side-apply".into()),
                ..PostParams::default()
            },
            &object,
        )
        .await
        .unwrap_or_else(|e| panic!("store {kind} {version}: {e}"));
    let name = created.name_any();
    if let Some(status) = status {
        api.patch_status(
            &name,
            &PatchParams {
                field_manager: Some(GO_MANAGER.into()),
                ..PatchParams::default()
            },
            &Patch::Merge(json!({ "status": status })),
        )
        .await
        .unwrap_or_else(|e| panic!("status of {kind} {name}: {e}"));
    }
    created.uid().expect("uid")
}

/// The object `name` of `kind` (in the harness's namespace unless a ClusterTunnel) as
/// `version` serves it.
pub async fn read(h: &Harness, kind: &str, version: &str, name: &str) -> Value {
    let namespace = (kind != "ClusterTunnel").then_some(h.ns.as_str());
    let object = namespaced(&h.admin, kind, version, namespace)
        .get(name)
        .await
        .unwrap_or_else(|e| panic!("read {kind} {name}: {e}"));
    serde_json::to_value(object).expect("json")
}

/// The Go operator's owner reference: controller, to the object it made it for.
pub fn owner(kind: &str, version: &str, name: &str, uid: &str) -> Value {
    json!([{
        "apiVersion": format!("{GROUP}/{version}"),
        "kind": kind,
        "name": name,
        "uid": uid,
        "controller": true,
        "blockOwnerDeletion": true,
    }])
}

/// Creates `object` in `namespace` as the Go operator's field manager.
pub async fn create_as_go<K>(client: &Client, namespace: &str, object: Value) -> K
where
    K: kube::Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + serde::Serialize,
{
    let typed: K = serde_json::from_value(object).expect("object json");
    Api::<K>::namespaced(client.clone(), namespace)
        .create(
            &PostParams {
                field_manager: Some(GO_MANAGER.into()),
                ..PostParams::default()
            },
            &typed,
        )
        .await
        .unwrap_or_else(|e| panic!("create {}: {e}", K::kind(&())))
}

/// The Go operator's cloudflared Deployment of a tunnel: its selector carries the
/// spec-dependent id, name and domain labels, which cftunnel's does not.
pub fn tunnel_deployment(
    name: &str,
    cluster: bool,
    tunnel_id: &str,
    tunnel_name: &str,
    owner_refs: Value,
) -> Value {
    let labels = BTreeMap::from([
        ("cfargotunnel.com/app", "cloudflared".to_string()),
        ("cfargotunnel.com/tunnel", name.to_string()),
        ("cfargotunnel.com/is-cluster-tunnel", cluster.to_string()),
        ("cfargotunnel.com/id", tunnel_id.to_string()),
        ("cfargotunnel.com/name", tunnel_name.to_string()),
        ("cfargotunnel.com/domain", "example.com".to_string()),
    ]);
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": labels, "ownerReferences": owner_refs},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "securityContext": {"runAsNonRoot": true},
                    "containers": [{
                        "name": "cloudflared",
                        "image": "cloudflare/cloudflared:2022.12.1",
                        "args": ["tunnel", "--config", "/etc/cloudflared/config/config.yaml", "run"],
                        "securityContext": {"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true, "runAsUser": 1002},
                    }],
                },
            },
        },
    })
}

/// The Go operator's ConfigMap of a tunnel: config.yaml with `ingress` (hostname, service).
pub fn tunnel_config(
    name: &str,
    tunnel_id: &str,
    ingress: &[(&str, String)],
    owner_refs: Value,
) -> Value {
    let mut rules: Vec<Value> = ingress
        .iter()
        .map(|(host, service)| json!({"hostname": host, "service": service}))
        .collect();
    rules.push(json!({"service": "http_status:404"}));
    let config = json!({
        "tunnel": tunnel_id,
        "credentials-file": "/etc/cloudflared/creds/credentials.json",
        "metrics": "0.0.0.0:2000",
        "no-autoupdate": true,
        "ingress": rules,
    });
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "ownerReferences": owner_refs},
        "data": {"config.yaml": serde_yaml_ng::to_string(&config).expect("config yaml")},
    })
}

/// The Go operator's Secret of a tunnel: `credentials.json`.
pub fn tunnel_secret(name: &str, credentials: &Value, owner_refs: Value) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "ownerReferences": owner_refs},
        "stringData": {"credentials.json": credentials.to_string()},
    })
}

/// The Go operator's AccessTunnel Deployment: the service token in the arguments, one
/// replica, its resources and node affinity, selector `app`/`name`.
pub fn access_deployment(name: &str, fqdn: &str, token: (&str, &str), owner_refs: Value) -> Value {
    let labels = json!({"app": "cloudflared", "name": name});
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": labels, "ownerReferences": owner_refs},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [{
                        "name": "cloudflared",
                        "image": "cloudflare/cloudflared:2025.4.0",
                        "args": ["access", "tcp", "--listener", "0.0.0.0:8000", "--hostname", fqdn,
                                 "--service-token-id", token.0, "--service-token-secret", token.1],
                        "ports": [{"name": name, "containerPort": 8000, "protocol": "TCP"}],
                        "resources": {
                            "requests": {"memory": "30Mi", "cpu": "10m"},
                            "limits": {"memory": "256Mi", "cpu": "500m"},
                        },
                        "securityContext": {
                            "allowPrivilegeEscalation": false,
                            "readOnlyRootFilesystem": true,
                            "runAsUser": 1002,
                            "capabilities": {"drop": ["ALL"]},
                        },
                    }],
                    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchExpressions": [
                            {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64", "arm64"]},
                            {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
                        ]}],
                    }}},
                },
            },
        },
    })
}

/// The Go operator's AccessTunnel Service.
pub fn access_service(name: &str, port: i32, owner_refs: Value) -> Value {
    let labels = json!({"app": "cloudflared", "name": name});
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "labels": labels, "ownerReferences": owner_refs},
        "spec": {
            "selector": labels,
            "ports": [{"name": "tcp", "protocol": "TCP", "port": port, "targetPort": 8000}],
        },
    })
}

/// The Go operator's DNS records of `hostname`: a proxied CNAME to the tunnel and the
/// `_managed.` TXT naming it (bare JSON, as the Go operator writes it). Returns the CNAME id.
pub fn dns_records(h: &Harness, hostname: &str, tunnel_id: &str, tunnel_name: &str) -> String {
    let cname = h
        .sim
        .insert_dns_record(
            "example.com",
            json!({"type": "CNAME", "name": hostname, "content": format!("{tunnel_id}.cfargotunnel.com"), "proxied": true, "ttl": 1}),
        )
        .expect("Go CNAME");
    let txt = json!({"DnsId": cname, "TunnelName": tunnel_name, "TunnelId": tunnel_id}).to_string();
    h.sim
        .insert_dns_record(
            "example.com",
            json!({"type": "TXT", "name": format!("_managed.{hostname}"), "content": txt, "ttl": 1}),
        )
        .expect("Go TXT");
    cname
}
