//! Switching a cluster from the Go operator (`adyanth/cloudflare-operator`) to cftunnel in
//! place, as docs/install.md's "Migrating from the Go operator" says: a control plane of its own
//! (with KCM) starts with the Go operator's own CRDs, objects of all four kinds are stored in
//! the shapes it accepted (v1alpha1 objects from the releases that served only v1alpha1, then
//! v1alpha2 ones, and the oddities admission refuses today), with the Deployments, ConfigMaps,
//! Secrets and DNS records it made for them. Then cftunnel's CRDs replace the Go ones and the
//! operator starts. Every object is reconciled or says why, no route is lost, no tunnel is
//! created or deleted on Cloudflare, and the AccessTunnel runs cftunnel's hardened workload.
#[path = "migration/cases.rs"]
mod cases;
#[path = "migration/checks.rs"]
mod checks;
mod common;
#[path = "migration/go_era.rs"]
mod go_era;
#[path = "tunnel_reconciler/harness.rs"]
mod harness;
mod install_support;

use std::collections::BTreeSet;

use cftunnel::term::DEFAULT_CLOUDFLARED_IMAGE;
use cftunnel_cloudflare::ConfigSrc;
use cftunnel_sim::Operation;
use cftunnel_testenv::{ControlPlaneOptions, shared};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use kube::ResourceExt;
use serde_json::{Value, json};

use cases::{API_SECRET, CLUSTER_API_SECRET, Case, Source};
use checks::{Route, wait_access_ready, wait_binding, wait_cftunnel_ingress};
use go_era::{create_as_go, credentials, dns_records, go_crds, install_crds, owner, status, store};
use harness::{Harness, TOKEN};

const ACCESS_TOKEN_ID: &str = "4d1f9c2e.access";
const ACCESS_TOKEN_SECRET: &str = "go-era-service-token-value";

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
        ..ControlPlaneOptions::default()
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
    let svc = |name: &str, port: u16| format!("http://{name}.{ns}.svc:{port}");

    // Step 2: each kind in each version with each tunnel source; the routes the Go operator
    // served through them; the tunnels it created or was given, on Cloudflare; the API Secrets
    // (one credentials file per existing tunnel, under the key its object names).
    let case = |name: String, cluster, version, source, tunnel_name, seed: u8| Case {
        name,
        cluster,
        version,
        source,
        tunnel_name,
        secret: [seed; 32],
        extra: json!({}),
        ingress: Vec::new(),
    };
    let mut cases = vec![
        case(
            "legacy".into(),
            false,
            "v1alpha1",
            Source::New,
            "legacy-tunnel",
            1,
        ),
        case(
            "old-existing".into(),
            false,
            "v1alpha1",
            Source::ById("old.json"),
            "old-existing-tunnel",
            2,
        ),
        case(
            "existing".into(),
            false,
            "v1alpha2",
            Source::OddIdWithName("CLOUDFLARE_TUNNEL_CREDENTIAL_FILE"),
            "pre",
            3,
        ),
        case(
            "modern".into(),
            false,
            "v1alpha2",
            Source::New,
            "modern-tunnel",
            4,
        ),
        case(
            format!("shared-{ns}"),
            true,
            "v1alpha1",
            Source::ById("CLOUDFLARE_TUNNEL_CREDENTIAL_FILE"),
            "shared",
            5,
        ),
        case(
            format!("old-new-{ns}"),
            true,
            "v1alpha1",
            Source::New,
            "old-new-tunnel",
            6,
        ),
        case(
            format!("edge-{ns}"),
            true,
            "v1alpha2",
            Source::New,
            "edge-ct-tunnel",
            7,
        ),
        case(
            format!("by-name-{ns}"),
            true,
            "v1alpha2",
            Source::ByName("by-name.json"),
            "by-name-tunnel",
            8,
        ),
    ];
    cases[0].ingress = vec![
        ("web.example.com", svc("web", 8080)),
        ("secure.example.com", format!("https://secure.{ns}.svc:443")),
    ];
    cases[2].ingress = vec![("quic.example.com", svc("web", 8080))];
    cases[4].extra = json!({"size": 3});
    cases[4].ingress = vec![("web.other.org", svc("web", 8080))];
    cases[6].ingress = vec![("kind.example.com", svc("web", 8080))];
    let (legacy, existing, shared_ct, edge) = (0, 2, 4, 6);
    let mut ids = Vec::new();
    for c in &cases {
        ids.push(
            h.precreate_tunnel(c.tunnel_name, &c.secret, ConfigSrc::Local)
                .await,
        );
    }
    for (secret_name, cluster) in [(API_SECRET, false), (CLUSTER_API_SECRET, true)] {
        let mut data = vec![("CLOUDFLARE_API_TOKEN".to_string(), TOKEN.to_string())];
        for (c, id) in cases.iter().zip(&ids).filter(|(c, _)| c.cluster == cluster) {
            if let Some(key) = c.credential_key() {
                data.push((
                    key.to_string(),
                    credentials(&account, id, c.secret).to_string(),
                ));
            }
        }
        let data: Vec<(&str, &str)> = data.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        h.create_api_secret(secret_name, &data).await;
    }

    // Step 3: the v1alpha1 objects, stored while v1alpha1 was the only version. The API server
    // writes the Go schema's default `image` (2022.12.1) into each.
    let mut uids = vec![String::new(); cases.len()];
    for (i, c) in cases
        .iter()
        .enumerate()
        .filter(|(_, c)| c.version == "v1alpha1")
    {
        let body = c.body(&h, &ids[i]);
        let status = status(&h, &ids[i], c.tunnel_name);
        uids[i] = store(&h, c.kind(), "v1alpha1", body, Some(status)).await;
    }
    let legacy_v1 = go_era::read(&h, "Tunnel", "v1alpha1", "legacy").await;
    assert_eq!(
        legacy_v1["spec"]["image"], "cloudflare/cloudflared:2022.12.1",
        "the Go schema's default was written into the object"
    );

    // Step 4: the Go release that serves v1alpha1 and v1alpha2 (v1alpha2 stored) and
    // AccessTunnel; the v1alpha2 objects and the AccessTunnel with its token Secret.
    install_crds(plane, &go_crds("crds.yaml")).await;
    for (i, c) in cases
        .iter()
        .enumerate()
        .filter(|(_, c)| c.version == "v1alpha2")
    {
        let body = c.body(&h, &ids[i]);
        let status = status(&h, &ids[i], c.tunnel_name);
        uids[i] = store(&h, c.kind(), "v1alpha2", body, Some(status)).await;
    }
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
            &cases[edge].name,
            json!({"kind": "service", "name": "web", "spec": {"fqdn": "kind.example.com"}}),
            false,
        ),
        binding(
            "outside",
            "ClusterTunnel",
            &cases[shared_ct].name,
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
    let mut go_deployments = Vec::new();
    for ((c, id), uid) in cases.iter().zip(&ids).zip(&uids) {
        // The release serving v1alpha2 re-applied its objects with owner references to its
        // hub version v1alpha2, whatever version the owner was stored in. (References still
        // naming v1alpha1, from a release that served only v1alpha1, are rewritten by
        // cftunnel's apply; with OwnerReferencesPermissionEnforcement the API server then
        // wants `delete` on the Secret and ConfigMap, which cftunnel's RBAC does not grant:
        // Ready stays False, KubernetesError "cannot set an ownerRef on a resource you can't
        // delete".)
        let refs = owner(c.kind(), "v1alpha2", &c.name, uid);
        let creds = credentials(&account, id, c.secret);
        let secret = go_era::tunnel_secret(&c.name, &creds, refs.clone());
        create_as_go::<Secret>(&h.admin, &ns, secret).await;
        let config = go_era::tunnel_config(&c.name, id, &c.ingress, refs.clone());
        create_as_go::<ConfigMap>(&h.admin, &ns, config).await;
        let d = go_era::tunnel_deployment(&c.name, c.cluster, id, c.tunnel_name, refs);
        let d: Deployment = create_as_go(&h.admin, &ns, d).await;
        go_deployments.push((c.name.clone(), d.uid().expect("uid"), c.cluster));
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
        ("web.example.com", &ids[legacy], "legacy-tunnel"),
        ("secure.example.com", &ids[legacy], "legacy-tunnel"),
        ("quic.example.com", &ids[existing], "pre"),
    ] {
        go_cnames.push((host, dns_records(&h, host, id, tunnel_name), id.clone()));
    }
    // What etcd holds before cftunnel: the first-era objects still in v1alpha1.
    for c in &cases {
        let key = match c.cluster {
            true => format!("/registry/{}/clustertunnels/{}", go_era::GROUP, c.name),
            false => format!("/registry/{}/tunnels/{ns}/{}", go_era::GROUP, c.name),
        };
        assert_eq!(
            install_support::stored_api_version(plane, &key).await,
            Some(format!("{}/{}", go_era::GROUP, c.version)),
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
    assert_eq!(tunnels_before.len(), cases.len());

    // Step 7: cftunnel installed as docs/install.md says: its CRDs replace the Go operator's (their
    // conversion calls cftunnel's webhook, here on loopback), then the operator starts with the
    // Go operator's cluster-resource namespace (the harness's namespace).
    let webhook = common::webhook::start_webhook_thread(plane);
    let ours = go_era::cftunnel_crds(plane, webhook);
    install_crds(plane, &ours).await;
    h.start_operator();

    // Step 8: every tunnel runs the tunnel it ran before, the oddities say why they would be
    // refused today, and the v1alpha1 default image pins nothing.
    for (c, id) in cases.iter().zip(&ids) {
        let status = match c.cluster {
            true => {
                h.wait_reason(&h.cluster_tunnels(), &c.name, "Ready")
                    .await
                    .status
            }
            false => h.wait_reason(&h.tunnels(), &c.name, "Ready").await.status,
        };
        assert_eq!(
            status.as_ref().and_then(|s| s.tunnel_id.as_ref()),
            Some(id),
            "{}",
            c.name
        );
        let message = harness::ready_message(status.as_ref());
        let odd = matches!(c.source, Source::OddIdWithName(_));
        assert_eq!(
            message.contains("(refused if applied today; the tunnel was found by spec.existingTunnel.name \"pre\", as the Go operator did)"),
            odd,
            "{}: {message}",
            c.name
        );
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
    for c in cases.iter().filter(|c| !c.ingress.is_empty()) {
        let config = match c.cluster {
            true => format!("clustertunnel-{}", c.name),
            false => c.name.clone(),
        };
        let wanted: Vec<Route> = c
            .ingress
            .iter()
            .map(|(host, service)| Route::new(host, service))
            .collect();
        wait_cftunnel_ingress(&h, &config, &wanted).await;
    }

    // Step 11: DNS: the records missing in each DNS group (the Tunnels' and the ClusterTunnels')
    // are written for the right tunnels, which shows both groups synced; the Go operator's
    // records are adopted as they are; nothing is written for the binding without DNS updates.
    checks::wait_cname(&h, "fresh.example.com", &ids[legacy]).await;
    checks::wait_cname(&h, "kind.example.com", &ids[edge]).await;
    for (host, cname_id, id) in &go_cnames {
        checks::assert_go_records_kept(&h, host, cname_id, id);
    }
    assert_eq!(
        h.sim.dns_records("other.org"),
        Vec::new(),
        "disableDNSUpdates"
    );
    // Rollback stays possible: every `_managed` TXT in the zone (the Go operator's, adopted, and
    // cftunnel's own) is what the Go operator's `json.Unmarshal` into its record type accepts.
    checks::assert_every_txt_reads_as_the_go_operators(&h, "example.com");

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
