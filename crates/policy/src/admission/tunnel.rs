//! Validation of Tunnel and ClusterTunnel (docs/design.md §2.1). One function per rule, message beside it.
use serde_json::Value;

use crate::hardening;
use crate::rules::service_url::service_problem;
use crate::rules::syntax::{is_dns_subdomain, is_domain_name, is_hex32, is_uuid};
use crate::rules::{Verdict, Violation};
use cftunnel_types::cel;
use cftunnel_types::{TunnelSpec, TunnelStatus};

const PROTOCOLS: &[&str] = &["auto", "quic", "http2"];
const ROUTE_FROM: &[&str] = &["All", "Same", "Selector"];

/// The parts of a Tunnel or ClusterTunnel the rules read (both kinds share the spec's shape).
#[derive(Clone, Copy, Debug)]
pub struct TunnelView<'a> {
    pub name: &'a str,
    pub spec: &'a TunnelSpec,
    pub status: Option<&'a TunnelStatus>,
}

/// Rules that hold for any single object (CREATE, and the base of UPDATE ratcheting).
pub fn validate(t: TunnelView<'_>) -> Verdict {
    let mut v = Verdict::default();
    tunnel_source(t.spec, &mut v);
    name_length(t.name, &mut v);
    cloudflare_details(t.spec, &mut v);
    protocol_and_fallback(t.spec, &mut v);
    allowed_routes(t.spec, &mut v);
    deploy_patch(&t.spec.deploy_patch, &mut v);
    v
}

/// UPDATE: only new violations are refused (ratcheting), plus the immutability rules.
pub(crate) fn validate_update(new: TunnelView<'_>, old: TunnelView<'_>) -> Verdict {
    let mut v = validate(new).ratchet(&validate(old));
    immutability(new, old, &mut v);
    v
}

/// Rule 1 and 2: exactly one of newTunnel / existingTunnel, each well-formed.
fn tunnel_source(spec: &TunnelSpec, v: &mut Verdict) {
    match spec.tunnel_sources() {
        (true, true) => v
            .violations
            .push(Violation::from_message(cel::BOTH_TUNNEL_SOURCES)),
        (false, false) => v
            .violations
            .push(Violation::from_message(cel::NO_TUNNEL_SOURCE)),
        _ => {}
    }
    if let Some(new) = &spec.new_tunnel {
        if new.name.trim().is_empty() {
            v.deny(
                "spec.newTunnel.name",
                "must not be empty; give the name of the tunnel to create",
            );
        } else if is_uuid(&new.name) {
            v.deny(
                "spec.newTunnel.name",
                format!("{:?} looks like a tunnel id, which cloudflared refuses as a name; to run that tunnel use existingTunnel.id, otherwise choose a name", new.name),
            );
        }
    }
    if let Some(problem) = spec
        .existing_tunnel
        .as_ref()
        .and_then(|e| e.id.as_deref())
        .and_then(existing_id_problem)
    {
        v.deny("spec.existingTunnel.id", problem);
    }
}

/// Why `existingTunnel.id` is refused, if it is: a non-empty value that is not a UUID.
pub fn existing_id_problem(id: &str) -> Option<String> {
    (!id.is_empty() && !is_uuid(id)).then(|| {
        format!("{id:?} is not a tunnel id (a UUID such as 6ff42ae2-765d-4adf-8112-31c55c1551ef); copy it from `cloudflared tunnel list` or the dashboard, or give existingTunnel.name instead")
    })
}

/// Rule 3 (also CEL): the name becomes label values and managed object names.
fn name_length(name: &str, v: &mut Verdict) {
    if name.len() > 63 {
        v.violations
            .push(Violation::from_message(cel::NAME_TOO_LONG));
    }
}

/// Rule 4: zone, Secret name, account.
fn cloudflare_details(spec: &TunnelSpec, v: &mut Verdict) {
    let cf = &spec.cloudflare;
    if !is_domain_name(&cf.domain) {
        v.deny(
            "spec.cloudflare.domain",
            format!("{:?} is not a DNS zone name; give the zone as shown in the dashboard, e.g. example.com (no wildcard, no trailing dot)", cf.domain),
        );
    }
    if !is_dns_subdomain(&cf.secret) {
        v.deny(
            "spec.cloudflare.secret",
            format!(
                "{:?} is not a valid Secret name; use lowercase letters, digits, '-' and '.'",
                cf.secret
            ),
        );
    }
    let id = cf.account_id.as_deref().filter(|s| !s.is_empty());
    let name = cf.account_name.as_deref().filter(|s| !s.trim().is_empty());
    match (id, name) {
        (None, None) => v.deny(
            "spec.cloudflare",
            "neither accountId nor accountName is set; set accountId (32 hexadecimal characters, in the dashboard URL) or accountName (account-owned API tokens need accountId)",
        ),
        (Some(id), _) if !is_hex32(id) => v.deny(
            "spec.cloudflare.accountId",
            format!("{id:?} is not an account id (32 hexadecimal characters); copy it from the dashboard URL, or remove it and set accountName"),
        ),
        _ => {}
    }
}

/// Rule 5: cloudflared's protocol flag and the catch-all service.
fn protocol_and_fallback(spec: &TunnelSpec, v: &mut Verdict) {
    if !PROTOCOLS.contains(&spec.protocol.as_str()) {
        v.deny(
            "spec.protocol",
            format!(
                "{:?} is not supported; use auto, quic or http2",
                spec.protocol
            ),
        );
    }
    if let Some(problem) = service_problem(&spec.fallback_target) {
        v.deny(
            "spec.fallbackTarget",
            format!("{problem}; the default is http_status:404"),
        );
    }
}

fn allowed_routes(spec: &TunnelSpec, v: &mut Verdict) {
    let Some(ns) = spec
        .allowed_routes
        .as_ref()
        .and_then(|a| a.namespaces.as_ref())
    else {
        return;
    };
    match ns.from.as_deref() {
        Some(from) if !ROUTE_FROM.contains(&from) => v.deny(
            "spec.allowedRoutes.namespaces.from",
            format!("{from:?} is not supported; use All, Same or Selector"),
        ),
        Some("Selector") if ns.selector.is_none() => v.deny(
            "spec.allowedRoutes.namespaces.selector",
            "is required with from: Selector; give a label selector of the namespaces that may bind",
        ),
        _ => {}
    }
}

/// Rule 6: the patch parses to an object and does not loosen the pod or take its identity.
/// Whether it applies cleanly to the generated Deployment is checked where the Deployment is
/// rendered.
fn deploy_patch(patch: &str, v: &mut Verdict) {
    let parsed: Result<Value, _> = serde_yaml_ng::from_str(patch);
    let patch = match parsed {
        Ok(value @ Value::Object(_)) => value,
        Ok(_) => {
            v.deny(
                "spec.deployPatch",
                "must be a YAML or JSON object, e.g. {\"spec\": {\"replicas\": 3}}",
            );
            return;
        }
        Err(e) => {
            v.deny("spec.deployPatch", format!("is not valid YAML or JSON ({e}); write a strategic-merge patch of the Deployment, e.g. {{\"spec\": {{\"replicas\": 3}}}}"));
            return;
        }
    };
    if patch.pointer("/spec/selector").is_some() {
        v.deny(
            "spec.deployPatch",
            "spec.selector: cannot be patched; the selector is fixed so that the Deployment can always be updated, remove it",
        );
    }
    if crate::render::deploy_patch::removes_cloudflared(&patch) {
        v.deny(
            "spec.deployPatch",
            "spec.template.spec.containers: the cloudflared container cannot be removed; patch its fields instead",
        );
    }
    let Some(pod) = patch.pointer("/spec/template/spec") else {
        return;
    };
    let pod_path = "spec.template.spec";
    for field in ["serviceAccountName", "serviceAccount"] {
        if pod.get(field).is_some() {
            v.deny(
                "spec.deployPatch",
                format!("{pod_path}.{field}: cannot be set, the patch is applied with the operator's privileges; cloudflared runs under its own ServiceAccount without permissions, remove it"),
            );
        }
    }
    if pod.get("automountServiceAccountToken") == Some(&Value::Bool(true)) {
        v.deny(
            "spec.deployPatch",
            format!("{pod_path}.automountServiceAccountToken: true is refused; cloudflared needs no Kubernetes API token, remove it"),
        );
    }
    for weakening in hardening::pod_weakening(pod, pod_path) {
        v.deny("spec.deployPatch", weakening);
    }
}

/// Rule 7 (also CEL transition rules).
fn immutability(new: TunnelView<'_>, old: TunnelView<'_>, v: &mut Verdict) {
    let created = old
        .status
        .and_then(|s| s.tunnel_id.as_deref())
        .is_some_and(|id| !id.is_empty());
    if let (Some(n), Some(o)) = (&new.spec.new_tunnel, &old.spec.new_tunnel)
        && created
        && n.name != o.name
    {
        v.violations
            .push(Violation::from_message(cel::NEW_TUNNEL_NAME_IMMUTABLE));
    }
    if let (Some(n), Some(o)) = (&new.spec.existing_tunnel, &old.spec.existing_tunnel)
        && (changed_once_set(&n.id, &o.id) || changed_once_set(&n.name, &o.name))
    {
        v.violations
            .push(Violation::from_message(cel::EXISTING_TUNNEL_IMMUTABLE));
    }
    if new.spec.new_tunnel.is_some() != old.spec.new_tunnel.is_some() {
        v.violations
            .push(Violation::from_message(cel::TUNNEL_SOURCE_SWITCH));
    }
    let (n, o) = (&new.spec.cloudflare, &old.spec.cloudflare);
    if changed_once_set(&n.account_id, &o.account_id)
        || changed_once_set(&n.account_name, &o.account_name)
    {
        v.violations
            .push(Violation::from_message(cel::ACCOUNT_IMMUTABLE));
    }
}

/// Mirrors the CEL transition rules: an unset or empty old value may be set, a set one may not change.
fn changed_once_set(new: &Option<String>, old: &Option<String>) -> bool {
    match old.as_deref() {
        None | Some("") => false,
        Some(old) => new.as_deref() != Some(old),
    }
}
