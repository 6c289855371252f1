//! The offline command's decisions over whole manifest sets: view, order, defaulting, output.
use super::input::parse_text;
use super::{Report, run, validate_documents};

const EDGE: &str = "apiVersion: networking.cfargotunnel.com/v1alpha2
kind: ClusterTunnel
metadata: {name: edge}
spec:
  newTunnel: {name: edge}
  cloudflare: {domain: example.org, secret: cf, accountId: 0123456789abcdef0123456789abcdef}
";

fn binding(name: &str, namespace: &str, subject: &str, fqdn: &str, path: &str) -> String {
    format!(
        "apiVersion: networking.cfargotunnel.com/v1alpha1
kind: TunnelBinding
metadata: {{name: {name}, namespace: {namespace}}}
subjects:
  - name: {subject}
    spec: {{fqdn: {fqdn:?}, path: {path:?}}}
tunnelRef: {{kind: ClusterTunnel, name: edge}}
"
    )
}

fn report(docs: &[&str], namespace: &str) -> Report {
    let text = docs.join("---\n");
    let documents = parse_text("test.yaml", &text, false).expect("test YAML parses");
    validate_documents(&documents, namespace)
}

fn lines(docs: &[&str]) -> Vec<String> {
    report(docs, "default").violation_lines()
}

#[test]
fn the_earlier_binding_owns_a_hostname_whatever_the_namespace() {
    let first = binding("front", "blog", "front", "app.example.org", "");
    let second = binding("web", "shop", "web", "app.example.org", "");
    assert_eq!(
        lines(&[EDGE, &first, &second]),
        vec![
            "TunnelBinding shop/web: subjects[0].spec.fqdn: app.example.org is already exposed by TunnelBinding blog/front (subject front); remove it there first"
        ]
    );
    assert_eq!(
        lines(&[EDGE, &second, &first]),
        vec![
            "TunnelBinding blog/front: subjects[0].spec.fqdn: app.example.org is already exposed by TunnelBinding shop/web (subject web); remove it there first"
        ]
    );
}

#[test]
fn one_hostname_may_route_different_paths_through_one_tunnel() {
    let first = binding("front", "blog", "front", "app.example.org", "/blog");
    let second = binding("web", "shop", "web", "app.example.org", "/shop");
    assert_eq!(lines(&[EDGE, &first, &second]), Vec::<String>::new());
}

#[test]
fn a_labelled_service_claims_before_a_later_binding() {
    let service = "apiVersion: v1
kind: Service
metadata:
  name: api
  namespace: shop
  labels: {cfargotunnel.com/expose-cluster-tunnel: edge}
  annotations: {cfargotunnel.com/hostname: api.example.org}
spec: {ports: [{port: 80}]}
";
    let later = binding("late", "shop", "web", "api.example.org", "");
    assert_eq!(
        lines(&[EDGE, service, &later]),
        vec![
            "TunnelBinding shop/late: subjects[0].spec.fqdn: api.example.org is already exposed by Service shop/api; remove it there first"
        ]
    );
}

#[test]
fn an_fqdn_outside_the_known_zones_of_a_tunnel_given_with_it_is_warned_about() {
    let outside = binding("web", "shop", "web", "app.example.com", "");
    let with_tunnel = report(&[EDGE, &outside], "default");
    assert!(!with_tunnel.has_violations());
    assert_eq!(
        with_tunnel.warning_lines(),
        vec![
            "TunnelBinding shop/web: subjects[0].spec.fqdn: \"app.example.com\" is outside the domain \"example.org\" of ClusterTunnel edge and in no other zone known for its account (example.org); it gets a DNS record only if a zone of the tunnel's Cloudflare account holds it (otherwise its route reports DNSZoneNotFound)"
        ]
    );
    // Without the tunnel the same binding passes with a warning.
    let alone = report(&[&outside], "default");
    assert!(!alone.has_violations());
    assert_eq!(
        alone.warning_lines(),
        vec![
            "TunnelBinding shop/web: subjects[0].spec.fqdn: \"app.example.com\" cannot be checked against the tunnel's domain: the tunnel is not known yet"
        ]
    );
}

#[test]
fn v1alpha1_tunnels_are_converted_before_the_rules_run() {
    // The stored v1alpha2 patch comes back through conversion, so its hardening rules apply.
    let legacy = "apiVersion: networking.cfargotunnel.com/v1alpha1
kind: Tunnel
metadata:
  name: legacy
  namespace: shop
  annotations:
    cfargotunnel.com/v1alpha2-deploy-patch: '{\"spec\":{\"template\":{\"spec\":{\"hostNetwork\":true}}}}'
spec:
  newTunnel: {name: legacy}
  size: 2
  image: cloudflare/cloudflared:2024.6.1
  cloudflare: {domain: example.com, secret: cf, accountId: 0123456789abcdef0123456789abcdef}
";
    assert_eq!(
        lines(&[legacy]),
        vec![
            "Tunnel shop/legacy: spec.deployPatch: spec.template.spec.hostNetwork: true is refused; cloudflared needs no host namespace, remove the field"
        ]
    );
}

#[test]
fn schema_defaults_are_applied() {
    // No subject kind, proxyAddress, protocol or fallbackTarget: the defaults are valid.
    let minimal = "apiVersion: networking.cfargotunnel.com/v1alpha1
kind: TunnelBinding
metadata: {name: web}
subjects: [{name: web}]
tunnelRef: {kind: ClusterTunnel, name: edge}
";
    let r = report(&[EDGE, minimal], "default");
    assert_eq!(r.violation_lines(), Vec::<String>::new());
    assert_eq!(r.judged, 2);
}

#[test]
fn objects_without_a_namespace_are_in_the_default_or_given_namespace() {
    let bad = "apiVersion: networking.cfargotunnel.com/v1alpha1
kind: TunnelBinding
metadata: {name: web}
subjects: [{name: web, spec: {protocol: grpc}}]
tunnelRef: {kind: ClusterTunnel, name: edge}
";
    let expected = |ns: &str| {
        vec![format!(
            "TunnelBinding {ns}/web: subjects[0].spec.protocol: \"grpc\" is not supported; use http, https, tcp, udp, ssh, rdp or smb"
        )]
    };
    assert_eq!(
        report(&[bad], "default").violation_lines(),
        expected("default")
    );
    assert_eq!(
        report(&[bad], "team-a").violation_lines(),
        expected("team-a")
    );
}

#[test]
fn documents_that_do_not_match_the_schema_are_reported_not_panicked_on() {
    let subjects_string = "apiVersion: networking.cfargotunnel.com/v1alpha1
kind: TunnelBinding
metadata: {name: a, namespace: shop}
subjects: web
tunnelRef: {kind: ClusterTunnel, name: edge}
";
    let no_ref = "apiVersion: networking.cfargotunnel.com/v1alpha1
kind: TunnelBinding
metadata: {name: b, namespace: shop}
subjects: [{name: web}]
";
    let no_cloudflare = "apiVersion: networking.cfargotunnel.com/v1alpha2
kind: ClusterTunnel
metadata: {name: c}
spec: {newTunnel: {name: c}}
";
    let wrong_version = "apiVersion: networking.cfargotunnel.com/v1beta1
kind: Tunnel
metadata: {name: d, namespace: shop}
spec: {}
";
    let no_name = "apiVersion: networking.cfargotunnel.com/v1alpha1
kind: TunnelBinding
metadata: {namespace: shop}
subjects: [{name: web}]
tunnelRef: {kind: ClusterTunnel, name: edge}
";
    assert_eq!(
        lines(&[
            subjects_string,
            no_ref,
            no_cloudflare,
            wrong_version,
            no_name
        ]),
        vec![
            "TunnelBinding shop/a: subjects: does not match the TunnelBinding v1alpha1 schema (invalid type: string \"web\", expected a sequence); fix the manifest",
            "TunnelBinding shop/b: tunnelRef: is required by the TunnelBinding v1alpha1 schema; add it",
            "ClusterTunnel c: spec: does not match the ClusterTunnel v1alpha2 schema (missing field `cloudflare`); fix the manifest",
            "Tunnel shop/d: apiVersion: cannot convert Tunnel from networking.cfargotunnel.com/v1beta1 to networking.cfargotunnel.com/v1alpha2: only networking.cfargotunnel.com/v1alpha1 and networking.cfargotunnel.com/v1alpha2 exist; use networking.cfargotunnel.com/v1alpha2",
            "TunnelBinding shop/: metadata.name: is required; give the object a name",
        ]
    );
}

#[test]
fn other_kinds_and_unlabelled_services_are_ignored() {
    let deployment = "apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec: {replicas: not-a-number}
";
    let plain_service = "apiVersion: v1
kind: Service
metadata:
  name: metrics
  labels: {cfargotunnel.com/tunnel: edge}
spec: {ports: not-a-list}
";
    let r = report(&[deployment, plain_service], "default");
    assert_eq!(r, Report::default());
}

#[test]
fn namespace_labels_feed_allowed_routes_selectors() {
    let selective = "apiVersion: networking.cfargotunnel.com/v1alpha2
kind: ClusterTunnel
metadata: {name: edge}
spec:
  newTunnel: {name: edge}
  cloudflare: {domain: example.org, secret: cf, accountId: 0123456789abcdef0123456789abcdef}
  allowedRoutes: {namespaces: {from: Selector, selector: {matchLabels: {env: prod}}}}
";
    let by_name = selective.replace(
        "matchLabels: {env: prod}",
        "matchLabels: {kubernetes.io/metadata.name: shop}",
    );
    let prod = "apiVersion: v1\nkind: Namespace\nmetadata: {name: shop, labels: {env: prod}}\n";
    let dev = "apiVersion: v1\nkind: Namespace\nmetadata: {name: shop, labels: {env: dev}}\n";
    let web = binding("web", "shop", "web", "web.example.org", "");
    let refused = "TunnelBinding shop/web: tunnelRef: ClusterTunnel edge does not admit routes from namespace \"shop\" (allowedRoutes.namespaces); ask its owner to allow it, or use a tunnel of this namespace";
    assert_eq!(lines(&[prod, selective, &web]), Vec::<String>::new());
    assert_eq!(lines(&[dev, selective, &web]), vec![refused]);
    // A namespace that is not given has no labels.
    assert_eq!(lines(&[selective, &web]), vec![refused]);
    // The API server's own name label is always there.
    assert_eq!(lines(&[dev, &by_name, &web]), Vec::<String>::new());
}

#[test]
fn run_prints_violations_on_stdout_and_warnings_on_stderr() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("m.yaml");
    let udp = "apiVersion: networking.cfargotunnel.com/v1alpha1
kind: TunnelBinding
metadata: {name: dns, namespace: shop}
subjects: [{name: dns, spec: {protocol: udp}}]
tunnelRef: {kind: ClusterTunnel, name: edge}
";
    let bad = "apiVersion: networking.cfargotunnel.com/v1alpha2
kind: ClusterTunnel
metadata: {name: bad}
spec:
  newTunnel: {name: bad}
  protocol: h3
  cloudflare: {domain: example.org, secret: cf, accountId: 0123456789abcdef0123456789abcdef}
";
    std::fs::write(&file, [EDGE, udp, bad].join("---\n")).expect("write manifest");
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = run(
        &[file.display().to_string()],
        "default",
        &mut std::io::empty(),
        &mut out,
        &mut err,
    )
    .expect("run");
    assert_eq!(code, 1);
    assert_eq!(
        String::from_utf8_lossy(&out),
        "ClusterTunnel bad: spec.protocol: \"h3\" is not supported; use auto, quic or http2\n"
    );
    assert_eq!(
        String::from_utf8_lossy(&err),
        "warning: TunnelBinding shop/dns: subjects[0].spec.protocol: udp is carried as a TCP stream over a public hostname; clients need cloudflared access or WARP\n"
    );
}

#[test]
fn run_exits_2_on_unreadable_input_and_0_on_clean_input() {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = run(
        &["-".to_string()],
        "default",
        &mut "kind: [\n".as_bytes(),
        &mut out,
        &mut err,
    )
    .expect("run");
    assert_eq!(code, 2);
    assert!(out.is_empty());
    assert!(
        String::from_utf8_lossy(&err)
            .starts_with("error: <stdin>: document 1: not valid YAML or JSON: "),
        "{}",
        String::from_utf8_lossy(&err)
    );
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = run(
        &["-".to_string()],
        "default",
        &mut EDGE.as_bytes(),
        &mut out,
        &mut err,
    )
    .expect("run");
    assert_eq!((code, out.is_empty(), err.is_empty()), (0, true, true));
}

const INGRESS_CLASS: &str = "apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: cftunnel}
spec:
  controller: cfargotunnel.com/cftunnel
  parameters: {apiGroup: networking.cfargotunnel.com, kind: ClusterTunnel, name: edge, scope: Cluster}
";

fn ingress(name: &str, class: &str, host: &str, path: &str, path_type: &str) -> String {
    format!(
        "apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {{name: {name}, namespace: shop}}
spec:
  ingressClassName: {class}
  rules:
    - host: {host}
      http:
        paths:
          - {{path: {path:?}, pathType: {path_type}, backend: {{service: {{name: web, port: {{number: 80}}}}}}}}
"
    )
}

#[test]
fn ingresses_of_our_class_are_judged_by_the_route_model_others_are_not() {
    let first = binding("front", "shop", "front", "app.example.org", "");
    let taken = ingress("taken", "cftunnel", "app.example.org", "/", "Prefix");
    let broken = ingress(
        "broken",
        "cftunnel",
        "ok.example.org",
        "/(",
        "ImplementationSpecific",
    );
    let fine = ingress("fine", "cftunnel", "fine.example.org", "/", "Prefix");
    let foreign = ingress(
        "nginx",
        "nginx",
        "app.example.org",
        "/(",
        "ImplementationSpecific",
    );
    let docs = [
        EDGE,
        INGRESS_CLASS,
        &first,
        &taken,
        &broken,
        &fine,
        &foreign,
    ];
    let report = report(&docs, "default");
    assert_eq!(
        report.violation_lines(),
        vec![
            "Ingress shop/taken: spec.rules[0].host: app.example.org is already exposed by TunnelBinding shop/front (subject front), which is older; remove it from one of them",
            "Ingress shop/broken: spec.rules[0].http.paths[0].path: \"/(\" is not a valid regular expression (missing closing ): `/(`); fix or escape it",
        ]
    );
    // The tunnel, the binding and the three Ingresses of our class are judged; the nginx one
    // and the IngressClass are not.
    assert_eq!(report.judged, 5);
    let without_class = [EDGE, &fine];
    assert_eq!(
        lines(&without_class),
        Vec::<String>::new(),
        "an Ingress whose class is not given is not cftunnel's to judge"
    );
}

#[test]
fn http_routes_are_judged_by_their_parent_statuses() {
    let gateway = "apiVersion: gateway.networking.k8s.io/v1
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
";
    let route = |name: &str, host: &str, rule: &str| {
        format!(
            "apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: {name}, namespace: shop}}
spec:
  parentRefs: [{{name: public}}]
  hostnames: [{host}]
  rules: [{rule}]
"
        )
    };
    let fine = route(
        "fine",
        "a.example.org",
        "{backendRefs: [{name: web, port: 80}]}",
    );
    let headers = route(
        "headers",
        "b.example.org",
        "{matches: [{headers: [{name: x, value: y}]}], backendRefs: [{name: web, port: 80}]}",
    );
    let report = report(&[EDGE, gateway, &fine, &headers], "default");
    assert_eq!(
        report.violation_lines(),
        vec![
            "HTTPRoute shop/headers: spec.rules[0].matches[0].headers: cloudflared matches only hostname and path; remove the headers match or route it elsewhere"
        ]
    );
    // The Service web is not given: a warning on each route, not a violation.
    let warned = report
        .findings
        .iter()
        .filter(|f| {
            f.warnings
                .iter()
                .any(|w| w.contains("Service shop/web does not exist"))
        })
        .count();
    assert_eq!(warned, 2);
    // Given in the same input (a plain Service, which the rules themselves ignore), it
    // resolves: no warning.
    let web = "apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec:
  ports: [{name: http, port: 80}]
";
    let given = self::report(&[EDGE, gateway, &fine, web], "default");
    assert!(given.violation_lines().is_empty(), "{given:?}");
    let warnings: Vec<&String> = given.findings.iter().flat_map(|f| &f.warnings).collect();
    assert!(warnings.is_empty(), "{warnings:?}");
}

/// A binding routing `n` hostnames `h<i>.example.org`, all to Service `web`.
fn wide_binding(n: usize, disable_dns: bool) -> String {
    let subjects: String = (0..n)
        .map(|i| format!("  - {{name: web, spec: {{fqdn: h{i}.example.org}}}}\n"))
        .collect();
    format!(
        "apiVersion: networking.cfargotunnel.com/v1alpha1
kind: TunnelBinding
metadata: {{name: wide, namespace: shop}}
subjects:
{subjects}tunnelRef: {{kind: ClusterTunnel, name: edge, disableDNSUpdates: {disable_dns}}}
"
    )
}

#[test]
fn one_object_asking_more_hostnames_than_a_free_zone_holds_is_warned() {
    // The object's own warning (the tunnel's domain total is another test's).
    let quota_warnings = |docs: &[&str]| -> Vec<String> {
        report(docs, "default")
            .warning_lines()
            .into_iter()
            .filter(|w| w.contains("Free plan") && !w.starts_with("ClusterTunnel"))
            .collect()
    };
    assert_eq!(
        quota_warnings(&[EDGE, &wide_binding(100, false)]),
        Vec::<String>::new()
    );
    let warned = quota_warnings(&[EDGE, &wide_binding(101, false)]);
    assert_eq!(warned.len(), 1, "{warned:?}");
    assert!(
        warned[0].starts_with("TunnelBinding shop/wide: subjects: 101 hostnames get DNS records"),
        "{warned:?}"
    );
    assert!(
        warned[0].contains("only with --no-dns-txt-records"),
        "{warned:?}"
    );
    assert_eq!(
        quota_warnings(&[EDGE, &wide_binding(150, true)]),
        Vec::<String>::new(),
        "no DNS record, no quota"
    );
    // An Ingress is counted by the route model (its hostnames that get DNS records).
    let rules: String = (0..201)
        .map(|i| format!("    - host: h{i}.example.org\n      http: {{paths: [{{path: /, pathType: Prefix, backend: {{service: {{name: web, port: {{number: 80}}}}}}}}]}}\n"))
        .collect();
    let wide_ingress = format!(
        "apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {{name: wide, namespace: shop}}
spec:
  ingressClassName: cftunnel
  rules:
{rules}"
    );
    let warned = quota_warnings(&[EDGE, INGRESS_CLASS, &wide_ingress]);
    assert_eq!(warned.len(), 1, "{warned:?}");
    assert!(
        warned[0].starts_with("Ingress shop/wide: spec.rules: 201 hostnames get DNS records"),
        "{warned:?}"
    );
    assert!(
        warned[0].contains("not even with --no-dns-txt-records"),
        "{warned:?}"
    );
}

#[test]
fn the_whole_inputs_hostnames_are_added_up_per_tunnel_domain() {
    // 51 bindings of two hostnames each: none is warned on its own, the domain is.
    let bindings: Vec<String> = (0..51)
        .map(|i| {
            format!(
                "apiVersion: networking.cfargotunnel.com/v1alpha1
kind: TunnelBinding
metadata: {{name: b{i}, namespace: shop}}
subjects:
  - {{name: web, spec: {{fqdn: a{i}.example.org}}}}
  - {{name: web, spec: {{fqdn: b{i}.example.org}}}}
tunnelRef: {{kind: ClusterTunnel, name: edge}}
"
            )
        })
        .collect();
    let mut docs: Vec<&str> = vec![EDGE];
    docs.extend(bindings.iter().map(String::as_str));
    let warned: Vec<String> = report(&docs, "default")
        .warning_lines()
        .into_iter()
        .filter(|w| w.contains("Free plan"))
        .collect();
    assert_eq!(warned.len(), 1, "{warned:?}");
    assert!(
        warned[0].starts_with(
            "ClusterTunnel edge: spec.cloudflare.domain: 102 hostnames of the input get DNS records in example.org (or zones under it): a Cloudflare zone on the Free plan"
        ),
        "{warned:?}"
    );
    let fifty = &docs[..51];
    assert!(
        report(fifty, "default")
            .warning_lines()
            .iter()
            .all(|w| !w.contains("Free plan")),
        "100 hostnames fit"
    );
}

fn access_policy(name: &str, target: &str) -> String {
    format!(
        "apiVersion: networking.cfargotunnel.com/v1alpha2
kind: AccessPolicy
metadata: {{name: {name}, namespace: shop}}
spec:
  targetRefs: [{{group: networking.cfargotunnel.com, kind: TunnelBinding, name: {target}}}]
  allow: {{emails: [alice@example.com]}}
"
    )
}

#[test]
fn a_second_access_policy_on_a_target_is_warned_of_naming_the_first() {
    let first = access_policy("older", "web");
    let second = access_policy("newer", "web");
    let other = access_policy("other", "api");
    let report = report(&[&first, &other, &second], "default");
    assert_eq!(report.violation_lines(), Vec::<String>::new());
    assert_eq!(
        report.warning_lines(),
        [
            "AccessPolicy shop/newer: spec.targetRefs[0]: TunnelBinding shop/web is also named by AccessPolicy shop/older: a target is protected by one policy only, the older, and the newer is refused for it (TargetConflict); name it in one policy"
        ]
    );
}
