//! Storage-version migration (docs/design.md §1.2) against a real kube-apiserver and etcd: Tunnels and
//! ClusterTunnels stored as v1alpha1 (the CRD first installed with v1alpha1 as storage version)
//! are rewritten as v1alpha2 once the shipped CRD is applied, `status.storedVersions` is pruned,
//! nothing is lost, and two replicas migrating at once converge. The migration runs as cftunnel's
//! ServiceAccount, so manifests/rbac.yaml is proven sufficient. etcd is read directly.
mod common;
mod install_support;

use std::net::SocketAddr;
use std::sync::OnceLock;

use cftunnel::startup::migrate::{Migration, MigrationError, migrate_storage};
use cftunnel_testenv::{ControlPlane, ControlPlaneOptions, poll_until, shared};
use cftunnel_types::crds::{self, ConversionService};
use common::webhook::start_webhook_thread;
use install_support::{
    POLL, WAIT, install_namespaces_and_rbac, kubectl_ok, operator_client, stored_api_version,
};
use k8s_openapi::ByteString;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, WebhookClientConfig,
};
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::Value;
use tokio::sync::OnceCell;

const GROUP: &str = "networking.cfargotunnel.com";
const CLOUDFLARE: &str = "  cloudflare: {domain: example.com, secret: cloudflare-secrets, accountId: 0123456789abcdef0123456789abcdef}\n";

static WEBHOOK: OnceLock<SocketAddr> = OnceLock::new();
static INSTALLED: OnceCell<()> = OnceCell::const_new();

/// A plane without CRDs (each test installs its own kind), cftunnel's RBAC, and a cftunnel
/// webhook on a thread of its own serving conversion.
async fn plane() -> (&'static ControlPlane, SocketAddr) {
    let plane = shared(ControlPlaneOptions::default)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    INSTALLED
        .get_or_init(|| install_namespaces_and_rbac(plane))
        .await;
    let addr = *WEBHOOK.get_or_init(|| start_webhook_thread(plane));
    (plane, addr)
}

/// `crd` with its conversion pointed at the local webhook (a Service cannot reach loopback).
fn local(
    mut crd: CustomResourceDefinition,
    plane: &ControlPlane,
    addr: SocketAddr,
) -> CustomResourceDefinition {
    let webhook = crd
        .spec
        .conversion
        .as_mut()
        .and_then(|c| c.webhook.as_mut())
        .expect("conversion webhook");
    webhook.client_config = Some(WebhookClientConfig {
        url: Some(format!("https://{addr}/convert")),
        ca_bundle: Some(ByteString(plane.ca().cert_pem().as_bytes().to_vec())),
        service: None,
    });
    crd
}

/// The same CRD storing v1alpha1, as an installation older than cftunnel's would.
fn storing_v1alpha1(mut crd: CustomResourceDefinition) -> CustomResourceDefinition {
    for version in &mut crd.spec.versions {
        version.storage = version.name == "v1alpha1";
    }
    crd
}

async fn install_crd(plane: &ControlPlane, crd: &CustomResourceDefinition) {
    let api: Api<CustomResourceDefinition> = Api::all(plane.admin_client().expect("admin"));
    let name = crd.metadata.name.clone().expect("CRD name");
    api.patch(
        &name,
        &PatchParams::apply("storage-migration-test").force(),
        &Patch::Apply(crd),
    )
    .await
    .expect("apply CRD");
    let storage = crd
        .spec
        .versions
        .iter()
        .find(|v| v.storage)
        .map(|v| v.name.clone());
    poll_until(&format!("CRD {name} established"), WAIT, POLL, || async {
        let live = api.get(&name).await.ok()?;
        let established = live
            .status
            .as_ref()?
            .conditions
            .as_ref()?
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True");
        let stores = live
            .spec
            .versions
            .iter()
            .find(|v| v.storage)
            .map(|v| v.name.clone());
        (established && stores == storage).then_some(())
    })
    .await
    .expect("CRD ready");
}

async fn stored_versions(plane: &ControlPlane, name: &str) -> Vec<String> {
    let api: Api<CustomResourceDefinition> = Api::all(plane.admin_client().expect("admin"));
    api.get(name)
        .await
        .expect("CRD")
        .status
        .and_then(|s| s.stored_versions)
        .unwrap_or_default()
}

fn tunnel(kind: &str, version: &str, name: &str, namespace: Option<&str>, spec: &str) -> String {
    let ns = namespace
        .map(|ns| format!("  namespace: {ns}\n"))
        .unwrap_or_default();
    format!(
        "apiVersion: {GROUP}/{version}\nkind: {kind}\nmetadata:\n  name: {name}\n{ns}spec:\n  newTunnel: {{name: {name}}}\n{spec}{CLOUDFLARE}"
    )
}

fn get(plane: &ControlPlane, what: &str, namespace: Option<&str>) -> Value {
    let mut args = vec!["get", what, "-o", "json"];
    if let Some(ns) = namespace {
        args.extend(["--namespace", ns]);
    }
    let out = plane.kubectl().args(&args).output().expect("kubectl get");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON")
}

async fn stored(plane: &ControlPlane, keys: &[String]) -> Vec<Option<String>> {
    let mut versions = Vec::new();
    for key in keys {
        versions.push(stored_api_version(plane, key).await);
    }
    versions
}

#[tokio::test]
async fn migration_rewrites_v1alpha1_stored_tunnels_and_prunes_stored_versions() {
    let (plane, addr) = plane().await;
    let service = ConversionService::default();
    let name = "tunnels.networking.cfargotunnel.com";
    install_crd(
        plane,
        &local(storing_v1alpha1(crds::tunnel(&service)), plane, addr),
    )
    .await;
    let ns = plane.create_namespace("migrate").await.expect("namespace");
    let legacy = tunnel(
        "Tunnel",
        "v1alpha1",
        "legacy",
        Some(&ns),
        "  size: 3\n  image: cloudflare/cloudflared:2025.1.0\n",
    );
    let current = tunnel(
        "Tunnel",
        "v1alpha2",
        "current",
        Some(&ns),
        "  deployPatch: '{\"spec\":{\"replicas\":4}}'\n",
    );
    kubectl_ok(
        plane,
        &["apply", "-f", "-"],
        &format!("{legacy}---\n{current}"),
    );
    let keys: Vec<String> = ["legacy", "current"]
        .iter()
        .map(|n| format!("/registry/{GROUP}/tunnels/{ns}/{n}"))
        .collect();
    let v1 = Some(format!("{GROUP}/v1alpha1"));
    let v2 = Some(format!("{GROUP}/v1alpha2"));
    assert_eq!(stored(plane, &keys).await, vec![v1.clone(), v1.clone()]);

    install_crd(plane, &local(crds::tunnel(&service), plane, addr)).await;
    assert_eq!(stored_versions(plane, name).await, ["v1alpha1", "v1alpha2"]);
    let before = get(
        plane,
        "tunnels.v1alpha2.networking.cfargotunnel.com",
        Some(&ns),
    );

    let client = operator_client(plane);
    let migration = migrate_storage(&client, name).await.expect("migration");
    assert_eq!(
        migration,
        Migration::Migrated {
            storage: "v1alpha2".into(),
            pruned: vec!["v1alpha1".into()],
            objects: 2
        }
    );
    assert_eq!(stored_versions(plane, name).await, ["v1alpha2"]);
    assert_eq!(stored(plane, &keys).await, vec![v2.clone(), v2.clone()]);

    // Nothing lost: the same objects through v1alpha2, and v1alpha1 fields through v1alpha1.
    let after = get(
        plane,
        "tunnels.v1alpha2.networking.cfargotunnel.com",
        Some(&ns),
    );
    let specs = |list: &Value| -> Vec<Value> {
        list["items"]
            .as_array()
            .expect("items")
            .iter()
            .map(|t| t["spec"].clone())
            .collect()
    };
    assert_eq!(specs(&after), specs(&before));
    let old = get(
        plane,
        "tunnels.v1alpha1.networking.cfargotunnel.com/legacy",
        Some(&ns),
    );
    assert_eq!(old["spec"]["size"], 3);
    assert_eq!(old["spec"]["image"], "cloudflare/cloudflared:2025.1.0");

    assert_eq!(
        migrate_storage(&client, name).await.expect("second run"),
        Migration::Current
    );
}

#[tokio::test]
async fn two_replicas_migrating_cluster_tunnels_at_once_converge() {
    let (plane, addr) = plane().await;
    let service = ConversionService::default();
    let name = "clustertunnels.networking.cfargotunnel.com";
    install_crd(
        plane,
        &local(
            storing_v1alpha1(crds::cluster_tunnel(&service)),
            plane,
            addr,
        ),
    )
    .await;
    let suffix = plane.create_namespace("edge").await.expect("unique name");
    let names: Vec<String> = (0..3).map(|i| format!("{suffix}-{i}")).collect();
    let manifests: Vec<String> = names
        .iter()
        .map(|n| tunnel("ClusterTunnel", "v1alpha1", n, None, "  size: 2\n"))
        .collect();
    kubectl_ok(plane, &["apply", "-f", "-"], &manifests.join("---\n"));
    let keys: Vec<String> = names
        .iter()
        .map(|n| format!("/registry/{GROUP}/clustertunnels/{n}"))
        .collect();
    let v1 = Some(format!("{GROUP}/v1alpha1"));
    assert_eq!(stored(plane, &keys).await, vec![v1; 3]);
    install_crd(plane, &local(crds::cluster_tunnel(&service), plane, addr)).await;

    let (first, second) = (operator_client(plane), operator_client(plane));
    let (a, b) = tokio::join!(
        migrate_storage(&first, name),
        migrate_storage(&second, name)
    );
    let outcomes = [a, b];
    let migrated = outcomes
        .iter()
        .filter(|r| matches!(r, Ok(Migration::Migrated { .. })))
        .count();
    let lost_race = outcomes
        .iter()
        .filter(|r| {
            matches!(
                r,
                Ok(Migration::Current) | Err(MigrationError::CrdChanged { .. })
            )
        })
        .count();
    assert_eq!((migrated, lost_race), (1, 1), "{outcomes:?}");
    assert_eq!(stored_versions(plane, name).await, ["v1alpha2"]);
    let v2 = Some(format!("{GROUP}/v1alpha2"));
    assert_eq!(stored(plane, &keys).await, vec![v2; 3]);
    for client in [&first, &second] {
        assert_eq!(
            migrate_storage(client, name).await.expect("rerun"),
            Migration::Current
        );
    }
}
