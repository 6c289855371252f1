//! Whole renders: config text, objects, labels, names, checksum and determinism.
use serde_json::{Value, json};

use super::*;
use crate::routes::Route;
use crate::routes::fixtures::route;
use cftunnel_types::{TunnelKind, TunnelSpec};

pub(super) const ID: &str = "6ff42ae2-765d-4adf-8112-31c55c1551ef";
pub(super) const SECRET: &str = "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlY3I=";

pub(super) fn spec(extra: Value) -> TunnelSpec {
    let mut spec = json!({
        "newTunnel": {"name": "shop"},
        "cloudflare": {"domain": "example.com", "secret": "cf-api", "accountId": "0123456789abcdef0123456789abcdef"}
    });
    if let (Some(target), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
        target.extend(extra.clone());
    }
    serde_json::from_value(spec).expect("valid spec")
}

pub(super) fn five_routes() -> Vec<Route> {
    let mut secure = route("secure.example.com", None, "https://secure.shop.svc:443");
    secure.origin_request.no_tls_verify = Some(true);
    vec![
        route("*.example.com", None, "http://catchall.web.svc:80"),
        route(
            "app.example.com",
            Some("^/api(/|$)"),
            "http://api.shop.svc:8080",
        ),
        secure,
        route("*.eu.example.com", None, "http://eu.web.svc:80"),
        route(
            "app.example.com",
            Some("^/api/v2(/|$)"),
            "http://api-v2.shop.svc:8080",
        ),
    ]
}

pub(super) fn input(kind: TunnelKind, spec: TunnelSpec, routes: Vec<Route>) -> TunnelInput {
    TunnelInput {
        identity: OwnerIdentity {
            kind,
            namespace: "shop".into(),
            name: "edge".into(),
            uid: "5d3c1a8e-0000-4000-8000-000000000001".into(),
        },
        spec,
        tunnel_id: ID.into(),
        account_tag: "0123456789abcdef0123456789abcdef".into(),
        tunnel_name: "shop".into(),
        domain: "example.com".into(),
        credentials: TunnelCredentials {
            account_tag: "0123456789abcdef0123456789abcdef".into(),
            secret_b64: SECRET.into(),
            tunnel_id: ID.into(),
        },
        origin_ca_pem: None,
        routes,
    }
}

pub(super) fn options() -> RenderOptions {
    RenderOptions {
        cloudflared_image: "cloudflare/cloudflared:2026.11.0".into(),
    }
}

fn render(input: &TunnelInput) -> Rendered {
    render_all(input, &options()).expect("renders")
}

pub(super) fn config_text(rendered: &Rendered) -> String {
    rendered
        .config_map
        .as_ref()
        .expect("a local tunnel has its config.yaml")
        .data
        .as_ref()
        .and_then(|d| d.get("config.yaml"))
        .cloned()
        .unwrap_or_default()
}

#[test]
fn config_yaml_orders_five_routes_by_specificity_then_the_catch_all() {
    let mut tunnel = input(
        TunnelKind::Tunnel,
        spec(json!({"originCaPool": "origin-ca"})),
        five_routes(),
    );
    tunnel.origin_ca_pem = Some("-----BEGIN CERTIFICATE-----\n".into());
    assert_eq!(
        config_text(&render(&tunnel)),
        "\
tunnel: 6ff42ae2-765d-4adf-8112-31c55c1551ef
credentials-file: /etc/cloudflared/creds/credentials.json
metrics: 0.0.0.0:2000
no-autoupdate: true
originRequest:
  caPool: /etc/cloudflared/certs/tls.crt
ingress:
- hostname: app.example.com
  path: ^/api/v2(/|$)
  service: http://api-v2.shop.svc:8080
- hostname: app.example.com
  path: ^/api(/|$)
  service: http://api.shop.svc:8080
- hostname: secure.example.com
  service: https://secure.shop.svc:443
  originRequest:
    noTLSVerify: true
- hostname: '*.eu.example.com'
  service: http://eu.web.svc:80
- hostname: '*.example.com'
  service: http://catchall.web.svc:80
- service: http_status:404
"
    );
}

#[test]
fn typed_paths_sort_exact_then_longest_prefix_and_a_route_for_everything_is_the_catch_all() {
    use crate::routes::PathKind;
    let typed = |host: &str, kind: PathKind, path: Option<&str>, service: &str| Route {
        path_kind: kind,
        ..route(host, path, service)
    };
    let mut default = route(crate::routes::ANY_HOST, None, "http://default.shop.svc:80");
    default.origin_request.http_host_header = Some("default.example.com".into());
    let routes = vec![
        default,
        typed(
            "*",
            PathKind::Prefix,
            Some("^/static(/|$)"),
            "http://static.shop.svc:80",
        ),
        typed(
            "app.example.com",
            PathKind::Prefix,
            Some("^/foo(/|$)"),
            "http://prefix.shop.svc:80",
        ),
        typed(
            "app.example.com",
            PathKind::Exact,
            Some("^/foo$"),
            "http://exact.shop.svc:80",
        ),
        typed(
            "app.example.com",
            PathKind::Prefix,
            Some("^/foo/bar(/|$)"),
            "http://deeper.shop.svc:80",
        ),
        route(
            "app.example.com",
            Some("^/foo/bar/baz/long"),
            "http://regex.shop.svc:80",
        ),
        route("*.example.com", None, "http://wild.shop.svc:80"),
    ];
    let mut reversed = routes.clone();
    reversed.reverse();
    let expected = "\
ingress:
- hostname: app.example.com
  path: ^/foo$
  service: http://exact.shop.svc:80
- hostname: app.example.com
  path: ^/foo/bar(/|$)
  service: http://deeper.shop.svc:80
- hostname: app.example.com
  path: ^/foo(/|$)
  service: http://prefix.shop.svc:80
- hostname: app.example.com
  path: ^/foo/bar/baz/long
  service: http://regex.shop.svc:80
- hostname: '*.example.com'
  service: http://wild.shop.svc:80
- hostname: '*'
  path: ^/static(/|$)
  service: http://static.shop.svc:80
- service: http://default.shop.svc:80
  originRequest:
    httpHostHeader: default.example.com
";
    for routes in [routes, reversed] {
        let text = config_text(&render(&input(TunnelKind::Tunnel, spec(json!({})), routes)));
        let ingress = text.split_once("ingress:\n").map(|(_, i)| i).unwrap_or("");
        assert_eq!(format!("ingress:\n{ingress}"), expected);
    }
}

#[test]
fn a_route_that_sets_nothing_never_turns_the_tunnels_no_tls_verify_off() {
    let mut h2 = route("h2.example.com", None, "https://h2.shop.svc:443");
    h2.origin_request.http2_origin = Some(true);
    h2.origin_request.ca_pool = Some("inner.crt".into());
    let tunnel = input(
        TunnelKind::Tunnel,
        spec(
            json!({"noTlsVerify": true, "originCaPool": "origin-ca", "fallbackTarget": "http_status:503"}),
        ),
        vec![
            route("web.example.com", None, "https://web.shop.svc:443"),
            h2,
        ],
    );
    let config: Value = serde_yaml_ng::from_str(&config_text(&render(&tunnel))).expect("yaml");
    assert_eq!(
        config["originRequest"],
        json!({"noTLSVerify": true, "caPool": "/etc/cloudflared/certs/tls.crt"})
    );
    assert_eq!(
        config["ingress"],
        json!([
            {"hostname": "h2.example.com", "service": "https://h2.shop.svc:443",
             "originRequest": {"caPool": "/etc/cloudflared/certs/inner.crt", "http2Origin": true}},
            {"hostname": "web.example.com", "service": "https://web.shop.svc:443"},
            {"service": "http_status:503"}
        ])
    );
}

#[test]
fn route_ca_pool_without_an_origin_ca_pool_is_refused() {
    let mut r = route("web.example.com", None, "https://web.shop.svc:443");
    r.origin_request.ca_pool = Some("tls.crt".into());
    let err = render_all(
        &input(TunnelKind::Tunnel, spec(json!({})), vec![r]),
        &options(),
    )
    .expect_err("refused");
    assert_eq!(
        err.to_string(),
        "route web.example.com: caPool needs spec.originCaPool on the tunnel"
    );
}

#[test]
fn checksum_changes_exactly_when_config_credentials_or_ca_change() {
    let base = input(
        TunnelKind::Tunnel,
        spec(json!({"originCaPool": "origin-ca"})),
        five_routes(),
    );
    let mut with_ca = base.clone();
    with_ca.origin_ca_pem = Some("CA one".into());
    let sum = render(&with_ca).checksum;
    assert_eq!(sum, render(&with_ca).checksum);
    assert_eq!(
        render(&with_ca).deployment["spec"]["template"]["metadata"]["annotations"]["cfargotunnel.com/checksum"],
        json!(sum)
    );

    let mut route_changed = with_ca.clone();
    route_changed.routes[0].service = "http://other.web.svc:80".into();
    assert_ne!(render(&route_changed).checksum, sum);

    let mut creds_changed = with_ca.clone();
    creds_changed.credentials.secret_b64 = "b3RoZXI=".into();
    assert_ne!(render(&creds_changed).checksum, sum);

    let mut ca_changed = with_ca.clone();
    ca_changed.origin_ca_pem = Some("CA two".into());
    assert_ne!(render(&ca_changed).checksum, sum);

    let mut replicas = with_ca.clone();
    replicas.spec.deploy_patch = "spec:\n  replicas: 3\n".into();
    let patched = render(&replicas);
    assert_eq!(patched.checksum, sum);
    assert_eq!(patched.deployment["spec"]["replicas"], json!(3));
}

#[test]
fn deployment_is_rendered_exactly() {
    let tunnel = input(
        TunnelKind::Tunnel,
        spec(json!({"protocol": "quic", "originCaPool": "origin-ca"})),
        vec![],
    );
    let rendered = render(&tunnel);
    let labels = json!({
        "cfargotunnel.com/app": "cloudflared",
        "cfargotunnel.com/domain": "example.com",
        "cfargotunnel.com/id": ID,
        "cfargotunnel.com/is-cluster-tunnel": "false",
        "cfargotunnel.com/name": "shop",
        "cfargotunnel.com/tunnel": "edge"
    });
    assert_eq!(
        rendered.deployment,
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {
                "name": "edge", "namespace": "shop", "labels": labels,
                "ownerReferences": [{"apiVersion": "networking.cfargotunnel.com/v1alpha2", "kind": "Tunnel",
                    "name": "edge", "uid": "5d3c1a8e-0000-4000-8000-000000000001",
                    "controller": true, "blockOwnerDeletion": true}]
            },
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {
                    "cfargotunnel.com/app": "cloudflared",
                    "cfargotunnel.com/is-cluster-tunnel": "false",
                    "cfargotunnel.com/tunnel": "edge"
                }},
                "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}},
                "template": {
                    "metadata": {"labels": labels, "annotations": {"cfargotunnel.com/checksum": rendered.checksum}},
                    "spec": {
                        "serviceAccountName": "edge-cloudflared",
                        "terminationGracePeriodSeconds": 40,
                        // Hardening: the same function the mutating webhook applies.
                        "automountServiceAccountToken": false,
                        "securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
                        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [
                            {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
                            {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64", "arm64"]}
                        ]}]}}},
                        "containers": [{
                            "name": "cloudflared",
                            "image": "cloudflare/cloudflared:2026.11.0",
                            "args": ["tunnel", "--protocol", "quic", "--config", "/etc/cloudflared/config/config.yaml",
                                     "--metrics", "0.0.0.0:2000", "run"],
                            "ports": [{"name": "metrics", "containerPort": 2000, "protocol": "TCP"}],
                            "securityContext": {"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true, "capabilities": {"drop": ["ALL"]}},
                            "resources": {"requests": {"cpu": "10m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}},
                            "readinessProbe": {"httpGet": {"path": "/ready", "port": 2000}, "periodSeconds": 10, "failureThreshold": 3},
                            "startupProbe": {"httpGet": {"path": "/ready", "port": 2000}, "periodSeconds": 5, "failureThreshold": 60},
                            "livenessProbe": {"httpGet": {"path": "/healthcheck", "port": 2000}, "periodSeconds": 10, "timeoutSeconds": 5, "failureThreshold": 3},
                            "volumeMounts": [
                                {"name": "creds", "mountPath": "/etc/cloudflared/creds", "readOnly": true},
                                {"name": "config", "mountPath": "/etc/cloudflared/config", "readOnly": true},
                                {"name": "certs", "mountPath": "/etc/cloudflared/certs", "readOnly": true}
                            ]
                        }],
                        "volumes": [
                            {"name": "creds", "secret": {"secretName": "edge"}},
                            {"name": "config", "configMap": {"name": "edge"}},
                            {"name": "certs", "secret": {"secretName": "origin-ca"}}
                        ]
                    }
                }
            }
        })
    );
}

#[test]
fn other_objects_carry_labels_owner_and_their_fixed_settings() {
    let rendered = render(&input(TunnelKind::Tunnel, spec(json!({})), vec![]));
    let objects = rendered.objects().expect("objects");
    let kinds: Vec<&str> = objects.iter().filter_map(|o| o["kind"].as_str()).collect();
    assert_eq!(
        kinds,
        [
            "ServiceAccount",
            "Secret",
            "ConfigMap",
            "Deployment",
            "PodDisruptionBudget"
        ]
    );
    for object in &objects {
        assert_eq!(object["metadata"]["namespace"], json!("shop"));
        assert_eq!(
            object["metadata"]["labels"]["cfargotunnel.com/tunnel"],
            json!("edge")
        );
        assert_eq!(
            object["metadata"]["ownerReferences"],
            json!([{"apiVersion": "networking.cfargotunnel.com/v1alpha2", "kind": "Tunnel", "name": "edge",
                    "uid": "5d3c1a8e-0000-4000-8000-000000000001", "controller": true, "blockOwnerDeletion": true}])
        );
    }
    assert_eq!(objects[0]["metadata"]["name"], json!("edge-cloudflared"));
    assert_eq!(objects[0]["automountServiceAccountToken"], json!(false));
    assert_eq!(
        objects[4]["spec"],
        json!({
            "maxUnavailable": 1,
            "unhealthyPodEvictionPolicy": "AlwaysAllow",
            "selector": {"matchLabels": {"cfargotunnel.com/app": "cloudflared",
                "cfargotunnel.com/is-cluster-tunnel": "false", "cfargotunnel.com/tunnel": "edge"}}
        })
    );
    let creds = rendered
        .secret
        .data
        .as_ref()
        .and_then(|d| d.get("credentials.json"))
        .expect("creds");
    assert_eq!(
        String::from_utf8_lossy(&creds.0),
        format!(
            r#"{{"AccountTag":"0123456789abcdef0123456789abcdef","TunnelSecret":"{SECRET}","TunnelID":"{ID}","Endpoint":""}}"#
        )
    );
}

#[test]
fn cluster_tunnel_children_are_prefixed_and_labelled_as_cluster_tunnel() {
    let mut tunnel = input(TunnelKind::ClusterTunnel, spec(json!({})), vec![]);
    tunnel.identity.namespace = "cftunnel-tunnels".into();
    let rendered = render(&tunnel);
    assert_eq!(
        rendered.deployment["metadata"]["name"],
        json!("clustertunnel-edge")
    );
    assert_eq!(
        rendered.service_account.metadata.name.as_deref(),
        Some("clustertunnel-edge-cloudflared")
    );
    assert_eq!(
        rendered.deployment["spec"]["selector"]["matchLabels"]["cfargotunnel.com/is-cluster-tunnel"],
        json!("true")
    );
    assert_eq!(
        rendered.deployment["metadata"]["ownerReferences"][0]["kind"],
        json!("ClusterTunnel")
    );
    let volumes = &rendered.deployment["spec"]["template"]["spec"]["volumes"];
    assert_eq!(
        volumes[0]["secret"]["secretName"],
        json!("clustertunnel-edge")
    );
}

#[test]
fn a_long_tunnel_name_omits_its_label_and_never_fails() {
    let mut tunnel = input(TunnelKind::Tunnel, spec(json!({})), vec![]);
    tunnel.tunnel_name = "a-very-long-tunnel-name-".repeat(4);
    let rendered = render(&tunnel);
    let labels = rendered
        .config_map
        .as_ref()
        .expect("config.yaml")
        .metadata
        .labels
        .clone()
        .unwrap_or_default();
    assert!(!labels.contains_key("cfargotunnel.com/name"));
    assert_eq!(labels.len(), 5);
}

#[test]
fn deploy_patch_cannot_change_the_selector_or_its_pod_labels() {
    for (patch, message) in [
        (
            r#"{"spec": {"selector": {"matchLabels": {"app": "x"}}}}"#,
            "spec.deployPatch: spec.selector: cannot be changed: it identifies the tunnel's workload; remove spec.selector from the patch",
        ),
        (
            "spec:\n  template:\n    metadata:\n      labels:\n        cfargotunnel.com/tunnel: other\n",
            "spec.deployPatch: spec.template.metadata.labels[cfargotunnel.com/tunnel]: must stay \"edge\": the Deployment selector needs it; remove it from the patch (other labels may be added)",
        ),
        (
            "metadata: {name: renamed}",
            "spec.deployPatch: metadata.name: cannot be changed: it identifies the tunnel's workload; remove metadata.name from the patch",
        ),
        (
            "- a list",
            "spec.deployPatch: (root): is not a map; write a map of Deployment fields, e.g. {\"spec\": {\"replicas\": 3}}",
        ),
        (
            "spec: {template: {spec: {$patch: replace, containers: [{name: sidecar, image: 'busybox:1.37'}]}}}",
            "spec.deployPatch: spec.template.spec.containers: the cloudflared container cannot be removed; patch its fields instead of replacing or deleting it",
        ),
    ] {
        let tunnel = input(
            TunnelKind::Tunnel,
            spec(json!({"deployPatch": patch})),
            vec![],
        );
        let err = render_all(&tunnel, &options()).expect_err(patch);
        assert_eq!(err.to_string(), message);
        assert_eq!(err.metric_label(), "deploy_patch");
    }
    let added = input(
        TunnelKind::Tunnel,
        spec(
            json!({"deployPatch": "spec:\n  template:\n    metadata:\n      labels: {team: edge}\n      annotations: {cfargotunnel.com/checksum: forged}\n"}),
        ),
        vec![],
    );
    let rendered = render(&added);
    let meta = &rendered.deployment["spec"]["template"]["metadata"];
    assert_eq!(meta["labels"]["team"], json!("edge"));
    assert_eq!(
        meta["annotations"]["cfargotunnel.com/checksum"],
        json!(rendered.checksum)
    );
}

#[test]
fn yaml_output_is_deterministic_and_independent_of_route_order() {
    let tunnel = input(TunnelKind::Tunnel, spec(json!({})), five_routes());
    let mut reversed = tunnel.clone();
    reversed.routes.reverse();
    let text = render(&tunnel).to_yaml().expect("yaml");
    assert_eq!(text, render(&tunnel).to_yaml().expect("yaml"));
    assert_eq!(text, render(&reversed).to_yaml().expect("yaml"));
    assert_eq!(text.matches("---\n").count(), 5);
    let docs: Vec<Value> = text
        .split("---\n")
        .filter(|d| !d.is_empty())
        .map(|d| serde_yaml_ng::from_str(d).expect("doc"))
        .collect();
    assert_eq!(docs, render(&tunnel).objects().expect("objects"));
}

#[test]
fn debug_output_never_shows_the_tunnel_secret() {
    let tunnel = input(TunnelKind::Tunnel, spec(json!({})), vec![]);
    let rendered = render(&tunnel);
    for text in [format!("{tunnel:?}"), format!("{rendered:?}")] {
        assert!(!text.contains(SECRET), "{text}");
    }
}

#[test]
fn an_unpinned_image_is_refused() {
    let tunnel = input(TunnelKind::Tunnel, spec(json!({})), vec![]);
    for image in [
        "cloudflare/cloudflared:latest",
        "cloudflare/cloudflared",
        "localhost:5000/cloudflared",
    ] {
        let err = render_all(
            &tunnel,
            &RenderOptions {
                cloudflared_image: image.into(),
            },
        )
        .expect_err(image);
        assert_eq!(err.metric_label(), "unpinned_image");
    }
    assert!(
        render_all(
            &tunnel,
            &RenderOptions {
                cloudflared_image: "localhost:5000/cloudflared:2026.11.0".into()
            }
        )
        .is_ok()
    );
}

#[test]
fn a_deploy_patch_cannot_strip_the_hardening() {
    let patch = r#"{"spec":{"template":{"spec":{"automountServiceAccountToken":null,"securityContext":null,"containers":[{"name":"cloudflared","securityContext":null,"resources":null}]}}}}"#;
    let rendered = render(&input(
        TunnelKind::Tunnel,
        spec(json!({"deployPatch": patch})),
        vec![],
    ));
    let pod = &rendered.deployment["spec"]["template"]["spec"];
    assert_eq!(pod["automountServiceAccountToken"], false);
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(
        pod["containers"][0]["securityContext"]["allowPrivilegeEscalation"],
        false
    );
    assert_eq!(
        pod["containers"][0]["resources"]["limits"]["memory"],
        "256Mi"
    );
}
