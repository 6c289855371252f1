//! `cftunnel render` (docs/design.md §6): what the reconciler would apply for Tunnels, ClusterTunnels
//! and AccessTunnels given as files, without a cluster or Cloudflare. Deterministic: no secret is ever generated;
//! what only Cloudflare knows is a fixed placeholder and the Secret's values are redacted.
//! TunnelBindings and labelled Services in the input are routed by `routes::compute_routes`,
//! against the Services the input holds; a route that is not served as declared is reported on
//! stderr (the render still succeeds, as the reconciler would still apply it). AccessPolicies in
//! the input protect their targets' hostnames as in the cluster (docs/design.md §3.7): closed
//! (`http_status:503`) unless the policy's `status.targets` records the application, then with
//! `originRequest.access` (`required`, the team, the application's AUD).
mod access_tunnel;
mod private;
mod world;

use std::io::{Read, Write};

use serde_json::Value;

use crate::tunnel_reconciler::render_input::{
    TunnelFacts, render_options, tunnel_input, with_config_source,
};
use cftunnel_policy::render::{self, OwnerIdentity, TunnelCredentials};
use cftunnel_policy::routes::compute_routes;
use cftunnel_policy::rules::facts::referenced;
use cftunnel_policy::validate::decode::{Decoded, Outcome, TunnelObject, decode, plain_service};
use cftunnel_policy::validate::{DEFAULT_NAMESPACE, EXIT_UNREADABLE, read_or_report};
use cftunnel_types::access_policy::AccessPolicy;
use cftunnel_types::{ConfigSource, TunnelKind};

/// Tunnel id rendered when the input carries no `status.tunnelId`.
pub(crate) const PLACEHOLDER_TUNNEL_ID: &str = "00000000-0000-0000-0000-000000000000";
/// Owner uid rendered when the input carries no `metadata.uid`.
pub(crate) const PLACEHOLDER_UID: &str = "00000000-0000-0000-0000-000000000000";
/// Account tag rendered when neither status nor spec names the account id.
pub(crate) const PLACEHOLDER_ACCOUNT: &str = "00000000000000000000000000000000";
/// Stands in for the tunnel secret, which only the cluster holds.
pub const REDACTED: &str = "REDACTED";

/// Settings of one `render` run.
#[derive(Clone, Debug)]
pub(crate) struct RenderSettings {
    pub cluster_resource_namespace: String,
    pub cloudflared_image: String,
    /// For tunnels whose spec names no `configSource`.
    pub default_config_source: ConfigSource,
}

fn non_empty(value: Option<&String>) -> Option<String> {
    value.filter(|v| !v.is_empty()).cloned()
}

/// The facts the input carries; everything else is a placeholder.
fn offline_facts(tunnel: &TunnelObject) -> TunnelFacts {
    let status = tunnel.status.clone().unwrap_or_default();
    let spec = &tunnel.spec;
    let tunnel_id =
        non_empty(status.tunnel_id.as_ref()).unwrap_or_else(|| PLACEHOLDER_TUNNEL_ID.to_string());
    let tunnel_name = non_empty(status.tunnel_name.as_ref())
        .or_else(|| spec.new_tunnel.as_ref().map(|n| n.name.clone()))
        .or_else(|| spec.existing_tunnel.as_ref().and_then(|e| e.name.clone()))
        .unwrap_or_default();
    let account_tag = non_empty(status.account_id.as_ref())
        .or_else(|| non_empty(spec.cloudflare.account_id.as_ref()))
        .unwrap_or_else(|| PLACEHOLDER_ACCOUNT.to_string());
    TunnelFacts {
        tunnel_id: tunnel_id.clone(),
        tunnel_name,
        credentials: TunnelCredentials {
            account_tag,
            secret_b64: REDACTED.to_string(),
            tunnel_id,
        },
        origin_ca_pem: None,
    }
}

fn identity(tunnel: &TunnelObject, value: &Value, settings: &RenderSettings) -> OwnerIdentity {
    let namespace = match tunnel.kind {
        TunnelKind::ClusterTunnel => settings.cluster_resource_namespace.clone(),
        _ => tunnel.namespace.clone(),
    };
    let uid = value
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .filter(|u| !u.is_empty())
        .unwrap_or(PLACEHOLDER_UID);
    OwnerIdentity {
        kind: tunnel.kind,
        namespace,
        name: tunnel.name.clone(),
        uid: uid.to_string(),
    }
}

/// The whole command: YAML on `out`, diagnostics on `err`; returns the exit code (0 rendered,
/// 1 an object could not be rendered or none was given, 2 unreadable input).
pub fn run(
    sources: &[String],
    settings: &RenderSettings,
    stdin: &mut dyn Read,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> std::io::Result<u8> {
    let Some(documents) = read_or_report(sources, stdin, err)? else {
        return Ok(EXIT_UNREADABLE);
    };
    let options = render_options(&settings.cloudflared_image);
    let mut failed = false;
    let mut builder = cftunnel_policy::validate::world::WorldBuilder::default();
    let mut tunnels = Vec::new();
    let mut access_tunnels = Vec::new();
    let mut access_policies = Vec::new();
    let mut network_routes = Vec::new();
    let mut virtual_networks = Vec::new();
    let mut plain_services = Vec::new();
    for document in &documents {
        match decode(document, DEFAULT_NAMESPACE) {
            Outcome::Decoded(object, decoded) => {
                builder.add(&decoded);
                match *decoded {
                    Decoded::Tunnel(tunnel) => tunnels.push((document, tunnel)),
                    Decoded::NetworkRoute { namespace, route } => {
                        network_routes.push((namespace, route));
                    }
                    Decoded::VirtualNetwork(network) => virtual_networks.push(network),
                    Decoded::Access(_) => access_tunnels.push((document, object)),
                    Decoded::AccessPolicy { namespace, .. } => {
                        match serde_json::from_value::<AccessPolicy>(document.value.clone()) {
                            Ok(mut policy) => {
                                policy.metadata.namespace = Some(namespace);
                                access_policies.push(std::sync::Arc::new(policy));
                            }
                            Err(e) => {
                                writeln!(err, "{}: {object}: {e}", document.origin)?;
                                failed = true;
                            }
                        }
                    }
                    _ => {}
                }
            }
            Outcome::Unreadable(object, violation) => {
                writeln!(err, "{}: {object}: {violation}", document.origin)?;
                failed = true;
            }
            Outcome::Ignored => match plain_service(document, DEFAULT_NAMESPACE) {
                Some(Ok(service)) => {
                    let namespace = service.metadata.namespace.clone().unwrap_or_default();
                    plain_services.push(service.clone());
                    builder.add_service(service, &namespace);
                }
                Some(Err(violation)) => {
                    writeln!(err, "{}: Service: {violation}", document.origin)?;
                    failed = true;
                }
                None => {}
            },
        }
    }
    let table = compute_routes(&builder.finish());
    world::report(&table, err)?;
    let guard = cftunnel_policy::access::guard(&access_policies, &table);
    let mut yaml = String::new();
    let mut rendered_any = false;
    let tunnel_objects: Vec<TunnelObject> = tunnels.iter().map(|(_, t)| t.clone()).collect();
    let private = private::describe(
        &network_routes,
        &virtual_networks,
        &tunnel_objects,
        &plain_services,
    );
    for (document, tunnel) in tunnels {
        let owner = identity(&tunnel, &document.value, settings);
        let route_identity = referenced(tunnel.kind, &tunnel.namespace, &tunnel.name);
        let routes = render::protection::protect(
            &table.routes_of(&route_identity),
            &guard.of_tunnel(&route_identity),
        );
        let spec = with_config_source(tunnel.spec.clone(), settings.default_config_source);
        let input = tunnel_input(owner, spec, offline_facts(&tunnel), routes);
        match render::render_all(&input, &options).and_then(|r| r.to_yaml()) {
            Ok(text) => {
                yaml.push_str(&text);
                rendered_any = true;
            }
            Err(e) => {
                writeln!(
                    err,
                    "{}: {:?} {}: {e}",
                    document.origin, tunnel.kind, tunnel.name
                )?;
                failed = true;
            }
        }
    }
    for (document, object) in access_tunnels {
        let namespace = document
            .value
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .filter(|ns| !ns.is_empty())
            .unwrap_or(DEFAULT_NAMESPACE);
        match access_tunnel::render(&document.value, namespace, &settings.cloudflared_image) {
            Ok(text) => {
                yaml.push_str(&text);
                rendered_any = true;
            }
            Err(e) => {
                writeln!(err, "{}: {object}: {e}", document.origin)?;
                failed = true;
            }
        }
    }
    if !rendered_any && !failed {
        writeln!(
            err,
            "error: the input holds no Tunnel, ClusterTunnel or AccessTunnel"
        )?;
        return Ok(1);
    }
    out.write_all(yaml.as_bytes())?;
    out.write_all(private.as_bytes())?;
    Ok(u8::from(failed))
}

#[cfg(test)]
mod tests {
    use super::*;

    const V1ALPHA1: &str = "apiVersion: networking.cfargotunnel.com/v1alpha1
kind: Tunnel
metadata:
  name: web
  namespace: shop
spec:
  newTunnel:
    name: web-tunnel
  size: 3
  cloudflare:
    domain: example.com
    secret: cloudflare-api
    accountId: 0123456789abcdef0123456789abcdef
";

    fn render(input: &str) -> (u8, String, String) {
        let settings = RenderSettings {
            cluster_resource_namespace: "cftunnel-tunnels".into(),
            cloudflared_image: "cloudflare/cloudflared:2026.11.0".into(),
            default_config_source: ConfigSource::Local,
        };
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let code = run(
            &["-".to_string()],
            &settings,
            &mut input.as_bytes(),
            &mut out,
            &mut err,
        )
        .unwrap_or(99);
        (
            code,
            String::from_utf8_lossy(&out).into_owned(),
            String::from_utf8_lossy(&err).into_owned(),
        )
    }

    #[test]
    fn the_private_routes_of_network_routes_are_shown_after_the_objects() {
        let input = format!(
            "{V1ALPHA1}---
apiVersion: v1
kind: Service
metadata: {{name: db, namespace: shop}}
spec: {{clusterIPs: [10.96.0.10], ports: [{{port: 5432}}]}}
---
apiVersion: networking.cfargotunnel.com/v1alpha2
kind: NetworkRoute
metadata: {{name: db, namespace: shop}}
spec:
  tunnelRef: {{name: web}}
  cidrs: [10.20.0.0/24]
  services: [{{name: db}}]
  hostnames: [db.shop.svc.cluster.local]
  comment: reporting
"
        );
        let (code, out, err) = render(&input);
        assert_eq!(code, 0, "{err}");
        for line in [
            "# Private routes at Cloudflare the NetworkRoutes ask for (not Kubernetes objects):",
            "#   ip route 10.20.0.0/24 in network default through tunnel 00000000-0000-0000-0000-000000000000 (NetworkRoute shop/db)",
            "#   ip route 10.96.0.10/32 in network default",
            "#   hostname route db.shop.svc.cluster.local through tunnel",
        ] {
            assert!(
                out.lines().any(|l| l.starts_with(line)),
                "{line:?} missing:\n{out}"
            );
        }
        assert!(out.contains("comment \"cftunnel:<cluster>:"), "{out}");
        assert!(out.contains("reporting"), "{out}");
        // The objects are still YAML a kubectl apply takes: the routes are comments.
        let (_, kinds) = documents(&out);
        assert!(kinds.contains(&"Deployment".to_string()), "{kinds:?}");
    }

    /// The YAML documents of `render`'s output, and their kinds in order.
    fn documents(out: &str) -> (Vec<Value>, Vec<String>) {
        let docs: Vec<Value> = out
            .split("---\n")
            .filter(|d| !d.is_empty())
            .filter_map(|d| serde_yaml_ng::from_str(d).ok())
            .collect();
        let kinds = docs
            .iter()
            .filter_map(|d| d["kind"].as_str().map(str::to_string))
            .collect();
        (docs, kinds)
    }

    #[test]
    fn v1alpha1_input_renders_identically_twice_with_placeholders() {
        let (code, first, err) = render(V1ALPHA1);
        assert_eq!((code, err.as_str()), (0, ""));
        let (_, second, _) = render(V1ALPHA1);
        assert_eq!(first, second);
        assert_eq!(first.matches("---\n").count(), 5);
        let (docs, kinds) = documents(&first);
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
        // size: 3 of v1alpha1 became a deployPatch.
        assert_eq!(docs[3]["spec"]["replicas"], 3);
        assert_eq!(docs[3]["metadata"]["namespace"], "shop");
        let config = docs[2]["data"]["config.yaml"].as_str().unwrap_or_default();
        assert!(config.contains(&format!("tunnel: {PLACEHOLDER_TUNNEL_ID}")));
        let creds = docs[1]["data"]["credentials.json"]
            .as_str()
            .unwrap_or_default();
        use base64::Engine;
        let creds = base64::engine::general_purpose::STANDARD
            .decode(creds)
            .unwrap_or_default();
        let creds: Value = serde_json::from_slice(&creds).unwrap_or_default();
        assert_eq!(creds["TunnelSecret"], REDACTED);
        assert_eq!(creds["AccountTag"], "0123456789abcdef0123456789abcdef");
        let owner = &docs[0]["metadata"]["ownerReferences"][0];
        assert_eq!(owner["uid"], PLACEHOLDER_UID);
    }

    #[test]
    fn status_tunnel_id_is_used_and_cluster_tunnels_go_to_the_given_namespace() {
        let input = "apiVersion: networking.cfargotunnel.com/v1alpha2
kind: ClusterTunnel
metadata:
  name: edge
  uid: 11111111-2222-3333-4444-555555555555
spec:
  existingTunnel:
    name: theirs
  cloudflare:
    domain: example.com
    secret: cloudflare-api
    accountId: 0123456789abcdef0123456789abcdef
status:
  tunnelId: 9a0e3c4b-6b3e-4f7a-9d55-3f3b1d0c2a11
  tunnelName: theirs
";
        let (code, out, err) = render(input);
        assert_eq!((code, err.as_str()), (0, ""));
        assert!(out.contains("tunnel: 9a0e3c4b-6b3e-4f7a-9d55-3f3b1d0c2a11"));
        assert!(out.contains("namespace: cftunnel-tunnels"));
        assert!(out.contains("uid: 11111111-2222-3333-4444-555555555555"));
        assert!(!out.contains(PLACEHOLDER_TUNNEL_ID));
    }

    fn ingress(out: &str, namespace: &str) -> Vec<Value> {
        out.split("---\n")
            .filter_map(|d| serde_yaml_ng::from_str::<Value>(d).ok())
            .filter(|d| d["kind"] == "ConfigMap" && d["metadata"]["namespace"] == namespace)
            .filter_map(|d| d["data"]["config.yaml"].as_str().map(str::to_string))
            .filter_map(|c| serde_yaml_ng::from_str::<Value>(&c).ok())
            .filter_map(|c| c["ingress"].as_array().cloned())
            .next()
            .unwrap_or_default()
    }

    #[test]
    fn an_access_policy_closes_its_targets_until_its_status_records_the_application() {
        let base = "apiVersion: networking.cfargotunnel.com/v1alpha2
kind: Tunnel
metadata: {name: edge, namespace: shop}
spec:
  newTunnel: {name: edge}
  cloudflare: {domain: example.com, secret: cf, accountId: 0123456789abcdef0123456789abcdef}
---
apiVersion: networking.cfargotunnel.com/v1alpha1
kind: TunnelBinding
metadata: {name: web, namespace: shop}
subjects: [{name: web, spec: {fqdn: app.example.com}}]
tunnelRef: {kind: Tunnel, name: edge}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec:
  ports: [{name: http, port: 80}]
---
apiVersion: networking.cfargotunnel.com/v1alpha2
kind: AccessPolicy
metadata: {name: staff, namespace: shop}
spec:
  targetRefs: [{group: networking.cfargotunnel.com, kind: TunnelBinding, name: web}]
  allow: {emails: [alice@example.com]}
";
        let (code, out, err) = render(base);
        assert_eq!((code, err.as_str()), (0, ""));
        let rules = ingress(&out, "shop");
        assert_eq!(rules[0]["service"], "http_status:503", "{rules:?}");
        assert!(rules[0]["originRequest"]["access"].is_null());
        let recorded = format!(
            "{base}status:
  targets:
    - group: networking.cfargotunnel.com
      kind: TunnelBinding
      name: web
      hostnames:
        - {{hostname: app.example.com, applicationId: app-1, aud: aud-1, team: acme, accountId: 0123456789abcdef0123456789abcdef}}
"
        );
        let (code, out, err) = render(&recorded);
        assert_eq!((code, err.as_str()), (0, ""));
        let rules = ingress(&out, "shop");
        assert_eq!(rules[0]["service"], "http://web.shop.svc:80", "{rules:?}");
        assert_eq!(
            rules[0]["originRequest"]["access"],
            serde_json::json!({"required": true, "teamName": "acme", "audTag": ["aud-1"]})
        );
    }

    #[test]
    fn bindings_route_per_tunnel_identity_and_problems_go_to_stderr() {
        let tunnel = |ns: &str| {
            format!(
                "apiVersion: networking.cfargotunnel.com/v1alpha2
kind: Tunnel
metadata: {{name: edge, namespace: {ns}}}
spec:
  newTunnel: {{name: {ns}-edge}}
  cloudflare: {{domain: example.com, secret: cf, accountId: 0123456789abcdef0123456789abcdef}}
---
apiVersion: networking.cfargotunnel.com/v1alpha1
kind: TunnelBinding
metadata: {{name: b, namespace: {ns}}}
subjects: [{{name: web, spec: {{fqdn: {ns}.example.com, port: http}}}}]
tunnelRef: {{kind: Tunnel, name: edge}}
---
"
            )
        };
        let input = format!(
            "{}{}apiVersion: v1
kind: Service
metadata: {{name: web, namespace: shop}}
spec:
  ports: [{{name: http, port: 8080}}]
",
            tunnel("shop"),
            tunnel("blog")
        );
        let (code, out, err) = render(&input);
        assert_eq!(code, 0);
        assert_eq!(
            ingress(&out, "shop"),
            vec![
                serde_json::json!({"hostname": "shop.example.com", "service": "http://web.shop.svc:8080"}),
                serde_json::json!({"service": "http_status:404"}),
            ]
        );
        assert_eq!(
            ingress(&out, "blog"),
            vec![
                serde_json::json!({"hostname": "blog.example.com", "service": "http_status:404"}),
                serde_json::json!({"service": "http_status:404"}),
            ]
        );
        assert_eq!(
            err,
            "warning: TunnelBinding blog/b: ServiceNotFound: subjects[0].name: Service blog/web does not exist; create it or fix the name (the hostname answers 404 until then)\n"
        );
    }

    #[test]
    fn an_access_tunnel_renders_its_four_objects_and_a_bad_one_names_the_field() {
        let input = "apiVersion: networking.cfargotunnel.com/v1alpha1
kind: AccessTunnel
metadata: {name: db, namespace: ops}
target: {fqdn: db.example.com, svc: {port: 5432}}
serviceToken: {secretRef: db-token}
---
apiVersion: networking.cfargotunnel.com/v1alpha1
kind: AccessTunnel
metadata: {name: bad}
target: {fqdn: db.example.com, protocol: udp}
";
        let (code, out, err) = render(input);
        assert_eq!(code, 1);
        assert_eq!(
            err,
            "<stdin>#2: AccessTunnel default/bad: target.protocol: \"udp\" is not supported; use tcp, rdp, smb or ssh\n"
        );
        let (docs, kinds) = documents(&out);
        assert_eq!(
            kinds,
            [
                "ServiceAccount",
                "Deployment",
                "Service",
                "PodDisruptionBudget"
            ]
        );
        assert!(docs.iter().all(|d| d["metadata"]["namespace"] == "ops"));
        assert_eq!(
            docs[1]["metadata"]["ownerReferences"][0]["uid"],
            PLACEHOLDER_UID
        );
        let checksum = &docs[1]["spec"]["template"]["metadata"]["annotations"]
            [cftunnel_types::names::ANNOTATION_CHECKSUM];
        assert_eq!(
            checksum.as_str(),
            Some(
                cftunnel_policy::render::access_tunnel::token_checksum(
                    REDACTED.as_bytes(),
                    REDACTED.as_bytes()
                )
                .as_str()
            )
        );
    }

    #[test]
    fn no_tunnel_in_the_input_is_an_error_on_stderr() {
        let (code, out, err) = render("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n");
        assert_eq!(code, 1);
        assert_eq!(out, "");
        assert_eq!(
            err,
            "error: the input holds no Tunnel, ClusterTunnel or AccessTunnel\n"
        );
    }
}
