//! Switching a cluster from the Go operator (`adyanth/cloudflare-operator`) to cftunnel in
//! place, as the README's "Migrating from the Go operator" says: a control plane of its own
//! (with KCM) starts with the Go operator's own CRDs, objects of all four kinds are stored in
//! the shapes it accepted (v1alpha1 objects from the releases that served only v1alpha1, then
//! v1alpha2 ones, and the oddities admission refuses today), with the Deployments, ConfigMaps,
//! Secrets and DNS records it made for them. Then cftunnel's CRDs replace the Go ones and the
//! operator starts. Every object is reconciled or says why, no route is lost, no tunnel is
//! created or deleted on Cloudflare, and the AccessTunnel runs cftunnel's hardened workload.
#[path = "migration/checks.rs"]
mod checks;
mod common;
#[path = "migration/go_era.rs"]
mod go_era;
#[path = "tunnel_reconciler/harness.rs"]
mod harness;
mod install_support;

use std::collections::BTreeSet;

use cftunnel::cloudflare::client::ConfigSrc;
use cftunnel::cloudflare::sim::Operation;
use cftunnel::controller::DEFAULT_CLOUDFLARED_IMAGE;
use cftunnel::testenv::{ControlPlaneOptions, shared};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use kube::ResourceExt;
use serde_json::{Value, json};

use checks::{Route, wait_access_ready, wait_binding, wait_cftunnel_ingress};
use go_era::{
    cloudflare, create_as_go, credentials, dns_records, go_crds, install_crds, owner, status, store,
};
use harness::{Harness, TOKEN};

const API_SECRET: &str = "cloudflare-api";
const CLUSTER_API_SECRET: &str = "cloudflare-api-cluster";
const ACCESS_TOKEN_ID: &str = "4d1f9c2e.access";
const ACCESS_TOKEN_SECRET: &str = "go-era-service-token-value";

/// A tunnel object's name, kind and the ingress (hostname, service) the Go operator rendered.
type GoIngress = (String, String, Vec<(&'static str, String)>);

#[tokio::test]
async fn a_go_operator_cluster_switches_to_cftunnel_without_losing_a_route_or_a_tunnel() {
    // Step 1: a control plane whose first CRDs are the Go operator's releases that served only
    // v1alpha1 (nothing of cftunnel installed yet; the harness's own CRDs are not applied).
    let plane = shared(|| ControlPlaneOptions {
        controller_manager: true,
        crds: Vec::new(),
        extra_apiserver_args: vec![
            "--enable-admission-plugins=OwnerReferencesPermissionEnforcement".into(),
        ],
        node: None,
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    install_crds(plane, &go_crds("crds-v1alpha1-only.yaml")).await;
    // Every line the in-process operator logs, searched for the access token at the end.
    let (_logs_guard, logs) = harness::capture_logs();
    // The account also holds other.org, where the binding with disableDNSUpdates routes.
    let mut h = Harness::start_stopped("migration", &["example.com", "other.org"]).await;
    let ns = h.ns.clone();
    let account = h.sim.account_id();
    let shared_name = format!("shared-{ns}");

    // Step 2: the tunnels the Go operator created or was given, on Cloudflare.
    let pre_secret = [7u8; 32];
    let pre_id = h
        .precreate_with_credential_file(API_SECRET, pre_secret)
        .await;
    let legacy_secret = [1u8; 32];
    let legacy_id = h
        .precreate_tunnel("legacy-tunnel", &legacy_secret, ConfigSrc::Local)
        .await;
    let shared_secret = [2u8; 32];
    let shared_id = h
        .precreate_tunnel("shared", &shared_secret, ConfigSrc::Local)
        .await;
    let edge_secret = [3u8; 32];
    let edge_id = h
        .precreate_tunnel("edge-ct-tunnel", &edge_secret, ConfigSrc::Local)
        .await;
    let shared_file = credentials(&account, &shared_id, shared_secret).to_string();
    h.create_api_secret(
        CLUSTER_API_SECRET,
        &[
            ("CLOUDFLARE_API_TOKEN", TOKEN),
            ("CLOUDFLARE_TUNNEL_CREDENTIAL_FILE", &shared_file),
        ],
    )
    .await;

    // Step 3: v1alpha1 objects of that era. The API server defaults `image` to the Go
    // operator's cloudflared of the time (2022.12.1) in the Tunnel that names none.
    let legacy_uid = store(
        &h,
        "Tunnel",
        "v1alpha1",
        json!({"metadata": {"name": "legacy"}, "spec": {"newTunnel": {"name": "legacy-tunnel"}, "cloudflare": cloudflare(&h, API_SECRET)}}),
        Some(status(&h, &legacy_id, "legacy-tunnel")),
    )
    .await;
    let shared_uid = store(
        &h,
        "ClusterTunnel",
        "v1alpha1",
        json!({"metadata": {"name": shared_name}, "spec": {"existingTunnel": {"id": shared_id}, "size": 3, "cloudflare": cloudflare(&h, CLUSTER_API_SECRET)}}),
        Some(status(&h, &shared_id, "shared")),
    )
    .await;

    let legacy_v1 = go_era::read(&h, "Tunnel", "v1alpha1", "legacy").await;
    assert_eq!(
        legacy_v1["spec"]["image"], "cloudflare/cloudflared:2022.12.1",
        "the Go schema's default was written into the object"
    );

    // Step 4: the Go release that serves v1alpha1 and v1alpha2 (v1alpha2 stored) and
    // AccessTunnel; v1alpha2 objects, one naming its tunnel by a non-UUID id next to a valid name.
    install_crds(plane, &go_crds("crds.yaml")).await;
    let existing_uid = store(
        &h,
        "Tunnel",
        "v1alpha2",
        json!({"metadata": {"name": "existing"}, "spec": {"existingTunnel": {"id": "my-tunnel", "name": "pre"}, "cloudflare": cloudflare(&h, API_SECRET)}}),
        Some(status(&h, &pre_id, "pre")),
    )
    .await;
    let edge_name = format!("edge-{ns}");
    let edge_uid = store(
        &h,
        "ClusterTunnel",
        "v1alpha2",
        json!({"metadata": {"name": edge_name}, "spec": {"newTunnel": {"name": "edge-ct-tunnel"}, "cloudflare": cloudflare(&h, CLUSTER_API_SECRET)}}),
        Some(status(&h, &edge_id, "edge-ct-tunnel")),
    )
    .await;
    h.create_api_secret(
        "access-token",
        &[
            ("CLOUDFLARE_ACCESS_SERVICE_TOKEN_ID", ACCESS_TOKEN_ID),
            ("CLOUDFLARE_ACCESS_SERVICE_TOKEN_TOKEN", ACCESS_TOKEN_SECRET),
        ],
    )
    .await;
    let access_uid = store(
        &h,
        "AccessTunnel",
        "v1alpha1",
        json!({"metadata": {"name": "bastion"}, "target": {"fqdn": "db.example.com", "svc": {}}, "serviceToken": {"secretRef": "access-token"}}),
        None,
    )
    .await;

    // Step 5: Services and bindings, the oddities among them: an upper-case and an unknown
    // protocol, a subject kind `service`, an fqdn outside the domain with disableDNSUpdates.
    for (name, port) in [("web", 8080), ("secure", 443)] {
        create_as_go::<Service>(
            &h.admin,
            &ns,
            json!({"metadata": {"name": name}, "spec": {"ports": [{"name": "main", "port": port}]}}),
        )
        .await;
    }
    let binding = |name: &str, kind: &str, tunnel: &str, subject: Value, dns_off: bool| {
        json!({
            "metadata": {"name": name},
            "subjects": [subject],
            "tunnelRef": {"kind": kind, "name": tunnel, "disableDNSUpdates": dns_off},
        })
    };
    let bindings = [
        binding(
            "web",
            "Tunnel",
            "legacy",
            json!({"name": "web", "spec": {"fqdn": "web.example.com"}}),
            false,
        ),
        binding(
            "upper",
            "Tunnel",
            "legacy",
            json!({"name": "secure", "spec": {"fqdn": "secure.example.com", "protocol": "HTTPS"}}),
            false,
        ),
        binding(
            "quic",
            "Tunnel",
            "existing",
            json!({"name": "web", "spec": {"fqdn": "quic.example.com", "protocol": "quic"}}),
            false,
        ),
        binding(
            "lower-kind",
            "ClusterTunnel",
            &edge_name,
            json!({"kind": "service", "name": "web", "spec": {"fqdn": "kind.example.com"}}),
            false,
        ),
        binding(
            "outside",
            "ClusterTunnel",
            &shared_name,
            json!({"name": "web", "spec": {"fqdn": "web.other.org"}}),
            true,
        ),
        // Applied after the Go operator was scaled down: its DNS record does not exist yet.
        binding(
            "fresh",
            "Tunnel",
            "legacy",
            json!({"name": "web", "spec": {"fqdn": "fresh.example.com"}}),
            false,
        ),
    ];
    for body in bindings {
        store(&h, "TunnelBinding", "v1alpha1", body, None).await;
    }

    // Step 6: what the Go operator made for them: per tunnel a Secret, a ConfigMap whose
    // ingress is the routes it served, a Deployment (a ClusterTunnel's named after it, in the
    // cluster-resource namespace); the AccessTunnel's Deployment (token in the arguments) and
    // Service; DNS records in its format (kind.example.com's not written yet when it stopped).
    let svc = |name: &str, port: u16| format!("http://{name}.{ns}.svc:{port}");
    let go_routes: Vec<GoIngress> = vec![
        (
            "legacy".into(),
            "Tunnel".into(),
            vec![
                ("web.example.com", svc("web", 8080)),
                ("secure.example.com", format!("https://secure.{ns}.svc:443")),
            ],
        ),
        (
            "existing".into(),
            "Tunnel".into(),
            vec![("quic.example.com", svc("web", 8080))],
        ),
        (
            edge_name.clone(),
            "ClusterTunnel".into(),
            vec![("kind.example.com", svc("web", 8080))],
        ),
        (
            shared_name.clone(),
            "ClusterTunnel".into(),
            vec![("web.other.org", svc("web", 8080))],
        ),
    ];
    let facts = [
        (
            "legacy",
            legacy_uid.clone(),
            legacy_id.clone(),
            "legacy-tunnel",
            legacy_secret,
            false,
        ),
        (
            "existing",
            existing_uid.clone(),
            pre_id.clone(),
            "pre",
            pre_secret,
            false,
        ),
        (
            edge_name.as_str(),
            edge_uid.clone(),
            edge_id.clone(),
            "edge-ct-tunnel",
            edge_secret,
            true,
        ),
        (
            shared_name.as_str(),
            shared_uid.clone(),
            shared_id.clone(),
            "shared",
            shared_secret,
            true,
        ),
    ];
    let mut go_deployments = Vec::new();
    for (name, uid, id, tunnel_name, secret, cluster) in &facts {
        let kind = if *cluster { "ClusterTunnel" } else { "Tunnel" };
        // The release serving v1alpha2 re-applied its objects with owner references to its
        // hub version v1alpha2, whatever version the owner was stored in. (References still
        // naming v1alpha1, from a release that served only v1alpha1, are rewritten by
        // cftunnel's apply; with OwnerReferencesPermissionEnforcement the API server then
        // wants `delete` on the Secret and ConfigMap, which cftunnel's RBAC does not grant:
        // Ready stays False, KubernetesError "cannot set an ownerRef on a resource you can't
        // delete".)
        let refs = owner(kind, "v1alpha2", name, uid);
        let ingress = &go_routes.iter().find(|r| r.0 == *name).expect("routes").2;
        create_as_go::<Secret>(
            &h.admin,
            &ns,
            go_era::tunnel_secret(name, &credentials(&account, id, *secret), refs.clone()),
        )
        .await;
        create_as_go::<ConfigMap>(
            &h.admin,
            &ns,
            go_era::tunnel_config(name, id, ingress, refs.clone()),
        )
        .await;
        let d: Deployment = create_as_go(
            &h.admin,
            &ns,
            go_era::tunnel_deployment(name, *cluster, id, tunnel_name, refs),
        )
        .await;
        go_deployments.push((name.to_string(), d.uid().expect("uid"), *cluster));
    }
    let access_refs = owner("AccessTunnel", "v1alpha1", "bastion", &access_uid);
    let go_access: Deployment = create_as_go(
        &h.admin,
        &ns,
        go_era::access_deployment(
            "bastion",
            "db.example.com",
            (ACCESS_TOKEN_ID, ACCESS_TOKEN_SECRET),
            access_refs.clone(),
        ),
    )
    .await;
    let go_access_service: Service = create_as_go(
        &h.admin,
        &ns,
        go_era::access_service("bastion", 8000, access_refs),
    )
    .await;
    let mut go_cnames = Vec::new();
    for (host, id, tunnel_name) in [
        ("web.example.com", &legacy_id, "legacy-tunnel"),
        ("secure.example.com", &legacy_id, "legacy-tunnel"),
        ("quic.example.com", &pre_id, "pre"),
    ] {
        go_cnames.push((host, dns_records(&h, host, id, tunnel_name), id.clone()));
    }
    // What etcd holds before cftunnel: the first-era objects still in v1alpha1.
    for (resource, name, version) in [
        ("tunnels", format!("{ns}/legacy"), "v1alpha1"),
        ("clustertunnels", shared_name.clone(), "v1alpha1"),
        ("tunnels", format!("{ns}/existing"), "v1alpha2"),
    ] {
        let key = format!("/registry/{}/{resource}/{name}", go_era::GROUP);
        assert_eq!(
            install_support::stored_api_version(plane, &key).await,
            Some(format!("{}/{version}", go_era::GROUP)),
            "{key}"
        );
    }
    let bastion = go_era::read(&h, "AccessTunnel", "v1alpha1", "bastion").await;
    assert_eq!(
        bastion["target"]["image"],
        "cloudflare/cloudflared:2025.4.0"
    );
    let creates_before = h.sim.calls(Operation::CreateTunnel);
    let tunnels_before: BTreeSet<String> = h.live_tunnels().into_iter().map(|t| t.id).collect();
    assert_eq!(tunnels_before.len(), 4);

    // Step 7: cftunnel installed as the README says: its CRDs replace the Go operator's (their
    // conversion calls cftunnel's webhook, here on loopback), then the operator starts with the
    // Go operator's cluster-resource namespace (the harness's namespace).
    let webhook = common::webhook::start_webhook_thread(plane);
    let ours = go_era::cftunnel_crds(plane, webhook);
    install_crds(plane, &ours).await;
    h.start_operator();

    // Step 8: every tunnel runs the tunnel it ran before, the oddities say why they would be
    // refused today, and the v1alpha1 default image pins nothing.
    let legacy = h.wait_reason(&h.tunnels(), "legacy", "Ready").await;
    assert_eq!(
        legacy.status.and_then(|s| s.tunnel_id),
        Some(legacy_id.clone())
    );
    let existing = h.wait_reason(&h.tunnels(), "existing", "Ready").await;
    let message = harness::ready_message(existing.status.as_ref());
    assert!(
        message.contains("(refused if applied today; the tunnel was found by spec.existingTunnel.name \"pre\", as the Go operator did)"),
        "{message}"
    );
    assert_eq!(
        existing.status.and_then(|s| s.tunnel_id),
        Some(pre_id.clone())
    );
    for (name, id) in [(&edge_name, &edge_id), (&shared_name, &shared_id)] {
        let ct = h.wait_reason(&h.cluster_tunnels(), name, "Ready").await;
        assert_eq!(ct.status.and_then(|s| s.tunnel_id).as_ref(), Some(id));
    }
    checks::assert_cftunnel_workloads(&h, &go_deployments, DEFAULT_CLOUDFLARED_IMAGE, 3).await;

    // Step 9: every binding is routed, the Go-era shapes with the reason that says so.
    for (name, reason) in [
        ("web", "Routed"),
        ("fresh", "Routed"),
        ("outside", "Routed"),
        ("upper", "LegacyRoute"),
        ("quic", "LegacyRoute"),
        ("lower-kind", "LegacyRoute"),
    ] {
        let (status, message) = wait_binding(&h, name, reason).await;
        assert_eq!(status, "True", "{name}: {message}");
    }

    // Step 10: no route lost: every hostname the Go operator served is in cftunnel's ingress,
    // to the same Service and port.
    for (name, kind, routes) in &go_routes {
        let config = if kind == "ClusterTunnel" {
            format!("clustertunnel-{name}")
        } else {
            name.clone()
        };
        let wanted: Vec<Route> = routes
            .iter()
            .map(|(host, service)| Route::new(host, service))
            .collect();
        wait_cftunnel_ingress(&h, &config, &wanted).await;
    }

    // Step 11: DNS: the records missing in each DNS group (the Tunnels' and the ClusterTunnels')
    // are written for the right tunnels, which shows both groups synced; the Go operator's
    // records are adopted as they are; nothing is written for the binding without DNS updates.
    checks::wait_cname(&h, "fresh.example.com", &legacy_id).await;
    checks::wait_cname(&h, "kind.example.com", &edge_id).await;
    for (host, cname_id, id) in &go_cnames {
        checks::assert_go_records_kept(&h, host, cname_id, id);
    }
    assert_eq!(
        h.sim.dns_records("other.org"),
        Vec::new(),
        "disableDNSUpdates"
    );

    // Step 12: no tunnel created or deleted on Cloudflare.
    assert_eq!(
        h.sim.calls(Operation::CreateTunnel),
        creates_before,
        "a tunnel was created"
    );
    assert_eq!(
        h.sim.calls(Operation::DeleteTunnel),
        0,
        "a tunnel was deleted"
    );
    let tunnels_after: BTreeSet<String> = h.live_tunnels().into_iter().map(|t| t.id).collect();
    assert_eq!(tunnels_after, tunnels_before);

    // Step 13: the AccessTunnel runs cftunnel's hardened spec on the Go operator's Deployment
    // and Service (taken over in place), the token only through env valueFrom.
    wait_access_ready(
        &h,
        "bastion",
        "cloudflared access tcp to db.example.com is reachable at Service bastion:8000",
    )
    .await;
    checks::assert_access_taken_over(
        &h,
        &go_access,
        &go_access_service,
        DEFAULT_CLOUDFLARED_IMAGE,
        &[ACCESS_TOKEN_ID, ACCESS_TOKEN_SECRET],
    )
    .await;
    let logs = harness::captured(&logs);
    assert!(
        logs.contains("AccessTunnel Ready changed"),
        "the capture holds the operator's lines"
    );
    for token in [ACCESS_TOKEN_ID, ACCESS_TOKEN_SECRET] {
        assert!(!logs.contains(token), "the access token is logged");
    }
}
