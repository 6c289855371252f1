//! TunnelBinding and labelled Service rules, exact messages.
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Service;
use serde_json::json;

use super::view::{AdmissionView, HostnameClaim, RouteNamespacePolicy, TunnelFacts};
use super::{binding, service};
use cftunnel_types::TunnelBinding;
use cftunnel_types::{TunnelIdentity, TunnelKind};

fn view() -> AdmissionView {
    view_with_claim_on(TunnelIdentity {
        kind: TunnelKind::ClusterTunnel,
        namespace: String::new(),
        name: "edge".into(),
    })
}

fn view_with_claim_on(claim_tunnel: TunnelIdentity) -> AdmissionView {
    AdmissionView::new(
        vec![
            TunnelFacts {
                identity: TunnelIdentity {
                    kind: TunnelKind::Tunnel,
                    namespace: "shop".into(),
                    name: "web".into(),
                },
                domain: "example.com".into(),
                allowed: RouteNamespacePolicy::Same,
                has_origin_ca_pool: false,
                account: String::new(),
                account_zones: Vec::new(),
            },
            TunnelFacts {
                identity: TunnelIdentity {
                    kind: TunnelKind::ClusterTunnel,
                    namespace: String::new(),
                    name: "edge".into(),
                },
                domain: "example.org".into(),
                allowed: RouteNamespacePolicy::All,
                has_origin_ca_pool: true,
                account: String::new(),
                account_zones: Vec::new(),
            },
        ],
        BTreeMap::new(),
        vec![HostnameClaim {
            fqdn: "taken.example.org".into(),
            path: String::new(),
            tunnel: claim_tunnel,
            owner: "TunnelBinding blog/front (subject front)".into(),
            object: "TunnelBinding blog/front".into(),
        }],
    )
}

fn binding_messages(value: serde_json::Value, ns: &str) -> (Vec<String>, Vec<String>) {
    let b: TunnelBinding = serde_json::from_value(value).expect("binding JSON");
    let v = binding::validate(&b, ns, &view());
    (
        v.violations
            .iter()
            .map(|x| x.message().to_string())
            .collect(),
        v.warnings,
    )
}

fn binding_json(subjects: serde_json::Value, kind: &str, name: &str) -> serde_json::Value {
    json!({
        "apiVersion": "networking.cfargotunnel.com/v1alpha1", "kind": "TunnelBinding",
        "metadata": {"name": "b"}, "subjects": subjects, "tunnelRef": {"kind": kind, "name": name}
    })
}

#[test]
fn accepts_the_go_operator_documented_binding() {
    let (errors, warnings) = binding_messages(
        binding_json(
            json!([{"name": "svc01"}, {"name": "svc02", "spec": {"fqdn": "mysvc.example.com", "protocol": "https", "noTlsVerify": true}}]),
            "Tunnel",
            "web",
        ),
        "shop",
    );
    assert_eq!(errors, Vec::<String>::new());
    assert_eq!(warnings, Vec::<String>::new());
}

#[test]
fn refuses_a_hostname_claimed_in_another_namespace_naming_the_owner() {
    let (errors, _) = binding_messages(
        binding_json(
            json!([{"name": "web", "spec": {"fqdn": "taken.example.org"}}]),
            "clustertunnel",
            "edge",
        ),
        "shop",
    );
    assert_eq!(
        errors,
        vec![
            "subjects[0].spec.fqdn: taken.example.org is already exposed by TunnelBinding blog/front (subject front); remove it there first"
        ]
    );
}

#[test]
fn a_different_path_on_the_same_tunnel_is_not_a_conflict_but_another_tunnel_is() {
    let (errors, _) = binding_messages(
        binding_json(
            json!([{"name": "web", "spec": {"fqdn": "taken.example.org", "path": "^/api"}}]),
            "ClusterTunnel",
            "edge",
        ),
        "shop",
    );
    assert_eq!(errors, Vec::<String>::new());
    let other = view_with_claim_on(TunnelIdentity {
        kind: TunnelKind::Tunnel,
        namespace: "shop".into(),
        name: "web".into(),
    });
    let b: TunnelBinding = serde_json::from_value(binding_json(
        json!([{"name": "web", "spec": {"fqdn": "taken.example.org", "path": "^/api"}}]),
        "ClusterTunnel",
        "edge",
    ))
    .expect("binding");
    let v = binding::validate(&b, "shop", &other);
    assert_eq!(
        v.violations[0].message(),
        "subjects[0].spec.fqdn: taken.example.org is already routed through Tunnel shop/web by TunnelBinding blog/front (subject front); one hostname can use one tunnel, remove it there first"
    );
}

#[test]
fn a_hostname_outside_the_known_zones_is_admitted_with_a_warning_unless_no_dns_is_written() {
    let mut quiet = binding_json(
        json!([{"name": "web", "spec": {"fqdn": "app.other.net"}}]),
        "Tunnel",
        "web",
    );
    quiet["tunnelRef"]["disableDNSUpdates"] = json!(true);
    assert_eq!(
        binding_messages(quiet.clone(), "shop"),
        (Vec::new(), Vec::new())
    );
    quiet["tunnelRef"]["disableDNSUpdates"] = json!(false);
    assert_eq!(
        binding_messages(quiet, "shop"),
        (
            Vec::new(),
            vec![
                "subjects[0].spec.fqdn: \"app.other.net\" is outside the domain \"example.com\" of \
                 Tunnel shop/web and in no other zone known for its account (example.com); it gets \
                 a DNS record only if a zone of the tunnel's Cloudflare account holds it (otherwise \
                 its route reports DNSZoneNotFound)"
                    .to_string()
            ]
        )
    );
}

#[test]
fn lists_every_field_violation_of_a_subject() {
    let (errors, warnings) = binding_messages(
        binding_json(
            json!([{"name": "Web_1", "kind": "Pod", "spec": {
                "fqdn": "app.other.net", "protocol": "quic", "path": "(", "target": "http://x/y",
                "proxyAddress": "localhost", "proxyPort": 70000, "proxyType": "http", "connectTimeout": "30"
            }}]),
            "Tunnel",
            "web",
        ),
        "shop",
    );
    let expected_starts = [
        "subjects[0].kind: \"Pod\" is not supported",
        "subjects[0].name: \"Web_1\" is not a valid Service name",
        "subjects[0].spec.protocol: \"quic\" is not supported",
        "subjects[0].spec.path: \"(\" is not a valid regular expression",
        "subjects[0].spec.target: \"http://x/y\" has a path",
        "subjects[0].spec.proxyAddress: \"localhost\" is not an IP address",
        "subjects[0].spec.proxyPort: 70000 is out of range",
        "subjects[0].spec.proxyType: \"http\" is not supported",
        "subjects[0].spec.connectTimeout: \"30\" is not a duration",
    ];
    assert_eq!(errors.len(), expected_starts.len(), "{errors:#?}");
    for (e, start) in errors.iter().zip(expected_starts) {
        assert!(e.starts_with(start), "{e}\n  should start with\n{start}");
    }
    assert_eq!(
        warnings,
        vec!["subjects[0].spec.fqdn: \"app.other.net\" is outside the domain \"example.com\" of Tunnel shop/web and in no other zone known for its account (example.com); it gets a DNS record only if a zone of the tunnel's Cloudflare account holds it (otherwise its route reports DNSZoneNotFound)".to_string()]
    );
}

#[test]
fn refuses_unknown_tunnel_kinds_duplicates_and_empty_subjects() {
    let (errors, _) = binding_messages(binding_json(json!([]), "Gateway", "web"), "shop");
    assert_eq!(
        errors,
        vec![
            "tunnelRef.kind: \"Gateway\" is not a tunnel kind; use Tunnel (same namespace) or ClusterTunnel",
            "subjects: must list at least one Service; add {name: <service>}",
        ]
    );
    let (errors, _) = binding_messages(
        binding_json(
            json!([{"name": "a", "spec": {"fqdn": "x.example.com"}}, {"name": "b", "spec": {"fqdn": "X.example.com"}}]),
            "Tunnel",
            "web",
        ),
        "shop",
    );
    assert_eq!(
        errors,
        vec![
            "subjects[1].spec.fqdn: X.example.com (path \"\") is listed twice in this binding; keep one subject per hostname and path"
        ]
    );
}

#[test]
fn allowed_routes_keep_other_namespaces_out() {
    let (errors, _) = binding_messages(
        binding_json(json!([{"name": "a"}]), "Tunnel", "web"),
        "blog",
    );
    assert_eq!(
        errors,
        Vec::<String>::new(),
        "a Tunnel reference resolves in the binding's namespace: web is unknown in blog"
    );
    let mut v = view();
    v.tunnels[1].allowed = RouteNamespacePolicy::Same;
    let b: TunnelBinding = serde_json::from_value(binding_json(
        json!([{"name": "a"}]),
        "ClusterTunnel",
        "edge",
    ))
    .expect("binding");
    let verdict = binding::validate(&b, "blog", &v);
    assert!(verdict.violations[0].message().starts_with(
        "tunnelRef: ClusterTunnel edge does not admit routes from namespace \"blog\""
    ));
}

#[test]
fn warns_for_unknown_tunnels_udp_and_ca_pool_without_origin_pool() {
    let (errors, warnings) = binding_messages(
        binding_json(
            json!([{"name": "a", "spec": {"fqdn": "a.example.com", "protocol": "udp", "caPool": "ca"}}]),
            "Tunnel",
            "missing",
        ),
        "shop",
    );
    assert_eq!(errors, Vec::<String>::new());
    assert_eq!(warnings.len(), 2, "{warnings:#?}");
    assert!(warnings[0].contains("the tunnel is not known yet"));
    assert!(warnings[1].contains("udp is carried as a TCP stream"));
    let (_, warnings) = binding_messages(
        binding_json(
            json!([{"name": "a", "spec": {"caPool": "ca"}}]),
            "Tunnel",
            "web",
        ),
        "shop",
    );
    assert_eq!(
        warnings,
        vec![
            "subjects[0].spec.caPool: caPool \"ca\" has no effect: the tunnel sets no originCaPool Secret"
        ]
    );
}

fn service_json(labels: serde_json::Value, annotations: serde_json::Value) -> Service {
    serde_json::from_value(json!({"metadata": {"name": "api", "labels": labels, "annotations": annotations}, "spec": {"ports": [{"port": 80}]}}))
        .expect("service JSON")
}

#[test]
fn labelled_services_get_the_binding_rules_on_their_annotations() {
    let svc = service_json(
        json!({"cfargotunnel.com/expose-cluster-tunnel": "edge"}),
        json!({"cfargotunnel.com/hostname": "ok.example.org, taken.example.org", "cfargotunnel.com/protocol": "gopher", "cfargotunnel.com/no-tls-verify": "yes"}),
    );
    let v = service::validate(&svc, "shop", &view());
    let messages: Vec<&str> = v.violations.iter().map(|x| x.message()).collect();
    assert_eq!(
        messages,
        vec![
            "metadata.annotations[cfargotunnel.com/no-tls-verify]: \"yes\" is not a boolean; use \"true\" or \"false\"",
            "metadata.annotations[cfargotunnel.com/protocol]: \"gopher\" is not supported; use http, https, tcp, udp, ssh, rdp or smb",
            "metadata.annotations[cfargotunnel.com/hostname]: taken.example.org is already exposed by TunnelBinding blog/front (subject front); remove it there first",
        ]
    );
}

#[test]
fn both_expose_labels_are_refused_and_unlabelled_services_ignored() {
    let both = service_json(
        json!({"cfargotunnel.com/expose-tunnel": "web", "cfargotunnel.com/expose-cluster-tunnel": "edge"}),
        json!({}),
    );
    let v = service::validate(&both, "shop", &view());
    assert!(v.violations[0].message().starts_with("metadata.labels: cfargotunnel.com/expose-tunnel and cfargotunnel.com/expose-cluster-tunnel are both set"));
    let plain = service_json(
        json!({"cfargotunnel.com/tunnel": "web"}),
        json!({"cfargotunnel.com/hostname": "not a host"}),
    );
    assert!(
        service::validate(&plain, "shop", &view()).is_allowed(),
        "the tunnel's own label never exposes a Service"
    );
}

#[test]
fn refuses_ports_that_cannot_name_a_service_port_and_ca_pool_keys_that_are_not_file_names() {
    let (errors, _) = binding_messages(
        binding_json(
            json!([
                {"name": "a", "spec": {"port": 0, "caPool": "../etc/ca"}},
                {"name": "b", "spec": {"port": "HTTP_1"}},
                {"name": "c", "spec": {"port": "8443", "caPool": "ca.crt"}},
                {"name": "d", "spec": {"port": "web-tls"}},
            ]),
            "ClusterTunnel",
            "edge",
        ),
        "shop",
    );
    assert_eq!(
        errors,
        vec![
            "subjects[0].spec.port: 0 is not a port number; use 1 to 65535, or a port name such as http",
            "subjects[0].spec.caPool: \"../etc/ca\" is not a key of a Secret; use a key of the tunnel's originCaPool Secret such as ca.crt",
            "subjects[1].spec.port: \"HTTP_1\" is not a port name; use the name of a port of the Service (lowercase letters, digits and '-', at most 15) or its number",
        ]
    );
    let svc = service_json(
        json!({"cfargotunnel.com/expose-cluster-tunnel": "edge"}),
        json!({"cfargotunnel.com/port": "70000"}),
    );
    let v = service::validate(&svc, "shop", &view());
    let messages: Vec<&str> = v.violations.iter().map(|x| x.message()).collect();
    assert_eq!(
        messages,
        vec![
            "metadata.annotations[cfargotunnel.com/port]: 70000 is not a port number; use 1 to 65535, or a port name such as http"
        ]
    );
}

/// Three tunnels: `shop/web` (example.com) and `shop/blog` (dev.example.net) of one account,
/// `shop/other` (example.org) of another, linked as the webhook's view links them.
fn account_view() -> AdmissionView {
    let spec = |domain: &str, account: &str| -> cftunnel_types::TunnelSpec {
        serde_json::from_value(json!({
            "newTunnel": {"name": "t"},
            "cloudflare": {"domain": domain, "secret": "s", "accountId": account},
        }))
        .expect("tunnel spec")
    };
    let same = "0123456789ABCDEF0123456789abcdef";
    let mut tunnels = vec![
        super::facts::tunnel_facts(
            TunnelKind::Tunnel,
            "shop",
            "web",
            &spec("example.com", same),
        ),
        super::facts::tunnel_facts(
            TunnelKind::Tunnel,
            "shop",
            "blog",
            &spec("dev.example.net", &same.to_ascii_lowercase()),
        ),
        super::facts::tunnel_facts(
            TunnelKind::Tunnel,
            "shop",
            "other",
            &spec("example.org", "fedcba9876543210fedcba9876543210"),
        ),
    ];
    super::facts::link_account_zones(&mut tunnels);
    AdmissionView::new(tunnels, BTreeMap::new(), Vec::new())
}

fn warnings_on(view: &AdmissionView, fqdn: &str) -> (usize, Vec<String>) {
    let value = binding_json(
        json!([{"name": "web", "spec": {"fqdn": fqdn}}]),
        "Tunnel",
        "web",
    );
    let b: TunnelBinding = serde_json::from_value(value).expect("binding JSON");
    let v = binding::validate(&b, "shop", view);
    (v.violations.len(), v.warnings)
}

#[test]
fn a_hostname_in_the_zone_of_another_tunnel_of_the_same_account_is_admitted_without_a_warning() {
    let view = account_view();
    assert_eq!(warnings_on(&view, "app.dev.example.net"), (0, Vec::new()));
    assert_eq!(warnings_on(&view, "dev.example.net"), (0, Vec::new()));
    assert_eq!(warnings_on(&view, "app.example.com"), (0, Vec::new()));
    // example.org belongs to a tunnel of another account; example.net is not a known zone:
    // both are admitted (the account may hold them) with a warning naming the known zones.
    let warned = |fqdn: &str| {
        (
            0,
            vec![format!(
                "subjects[0].spec.fqdn: \"{fqdn}\" is outside the domain \"example.com\" of Tunnel shop/web and in no other zone known for its account (example.com, dev.example.net); it gets a DNS record only if a zone of the tunnel's Cloudflare account holds it (otherwise its route reports DNSZoneNotFound)"
            )],
        )
    };
    assert_eq!(
        warnings_on(&view, "app.example.org"),
        warned("app.example.org")
    );
    assert_eq!(
        warnings_on(&view, "app.example.net"),
        warned("app.example.net")
    );
    // Still refused: a hostname that is not one.
    assert_eq!(warnings_on(&view, "app..example.net").0, 1);
}

#[test]
fn a_hostname_two_labels_below_the_zone_is_warned_of_naming_the_certificate_to_order() {
    let (errors, warnings) = binding_messages(
        binding_json(
            json!([
                {"name": "web", "spec": {"fqdn": "a.b.example.org"}},
                {"name": "web", "spec": {"fqdn": "*.b.example.org"}},
                {"name": "web", "spec": {"fqdn": "c.example.org"}},
                {"name": "web", "spec": {"fqdn": "*.example.org"}},
            ]),
            "ClusterTunnel",
            "edge",
        ),
        "shop",
    );
    assert_eq!(errors, Vec::<String>::new());
    assert_eq!(
        warnings,
        [
            "subjects[0].spec.fqdn: \"a.b.example.org\" is 2 labels below the zone example.org, whose Universal SSL certificate covers example.org and *.example.org only: Cloudflare's edge answers it with a TLS error until a certificate covers it; order an advanced certificate for *.b.example.org (or upload one), or use a first-level name such as a-b.example.org",
            "subjects[1].spec.fqdn: \"*.b.example.org\" is 2 labels below the zone example.org, whose Universal SSL certificate covers example.org and *.example.org only: Cloudflare's edge answers it with a TLS error until a certificate covers it; order an advanced certificate for *.b.example.org (or upload one), or use a first-level name such as *.example.org",
        ]
    );
}
