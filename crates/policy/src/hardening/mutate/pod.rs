//! Hardening of a PodSpec (docs/design.md §2.3): the pod level and the container named `cloudflared`,
//! filled in where unset; other containers and init containers are never touched.
use serde_json::{Map, Value, json};

use super::affinity::require_linux_nodes;
use super::fill::{fill_object, fill_value, str_field};
use super::probes::{fill_probes, metrics_port};
use crate::hardening::CLOUDFLARED_CONTAINER;

/// Fills in what is unset on a PodSpec's JSON; never overrides or removes a value the user
/// wrote. A value of an unexpected type is left as it is (validation reports it, not us).
pub fn harden_pod_spec(pod: &mut Value) {
    harden_pod_spec_with(pod, |_, container| metrics_port(container));
}

/// As [`harden_pod_spec`], with the metrics port of the container at each index of
/// `containers` given by `port_of` (the container itself, or the one it was copied from).
pub(super) fn harden_pod_spec_with(
    pod: &mut Value,
    port_of: impl Fn(usize, &Map<String, Value>) -> Option<u16>,
) {
    let Some(pod) = pod.as_object_mut() else {
        return;
    };
    // Linux-only fields are forbidden on Windows pods; the API server would refuse the patch.
    let linux = pod
        .get("os")
        .and_then(|os| os.get("name"))
        .and_then(Value::as_str)
        .is_none_or(|name| name == "linux");
    if linux {
        fill_object(pod, "securityContext", |sc| {
            fill_value(sc, "runAsNonRoot", Value::Bool(true));
            fill_value(sc, "seccompProfile", json!({"type": "RuntimeDefault"}));
        });
        require_linux_nodes(pod);
    }
    fill_value(pod, "automountServiceAccountToken", Value::Bool(false));
    if let Some(containers) = pod.get_mut("containers").and_then(Value::as_array_mut) {
        for (index, container) in containers.iter_mut().enumerate() {
            if let Some(c) = container.as_object_mut()
                && str_field(c, "name") == Some(CLOUDFLARED_CONTAINER)
            {
                let port = port_of(index, c);
                harden_cloudflared_container(c, linux, port);
            }
        }
    }
}

fn harden_cloudflared_container(
    container: &mut Map<String, Value>,
    linux: bool,
    port: Option<u16>,
) {
    if linux {
        fill_object(container, "securityContext", harden_container_security);
    }
    fill_resources(container);
    if let Some(port) = port {
        fill_probes(container, port);
    }
}

fn harden_container_security(sc: &mut Map<String, Value>) {
    // The API server refuses allowPrivilegeEscalation=false beside privileged or CAP_SYS_ADMIN;
    // leaving it unset there lets our own refusal of those fields be the message the user sees.
    if !grants_privilege(sc) {
        fill_value(sc, "allowPrivilegeEscalation", Value::Bool(false));
    }
    fill_value(sc, "readOnlyRootFilesystem", Value::Bool(true));
    fill_object(sc, "capabilities", |caps| match caps.get_mut("drop") {
        None => {
            caps.insert("drop".to_string(), json!(["ALL"]));
        }
        Some(Value::Array(drop)) => {
            if !drop.iter().any(|d| d.as_str() == Some("ALL")) {
                drop.push(Value::String("ALL".to_string()));
            }
        }
        Some(_) => {}
    });
}

fn grants_privilege(sc: &Map<String, Value>) -> bool {
    let privileged = sc.get("privileged") == Some(&Value::Bool(true));
    let sys_admin = sc
        .get("capabilities")
        .and_then(|c| c.get("add"))
        .and_then(Value::as_array)
        .is_some_and(|add| {
            add.iter()
                .filter_map(Value::as_str)
                .any(|c| c == "SYS_ADMIN" || c == "CAP_SYS_ADMIN")
        });
    privileged || sys_admin
}

/// Resources only when the user set none: any request or limit of theirs is a deliberate choice.
fn fill_resources(container: &mut Map<String, Value>) {
    let unset = match container.get("resources") {
        None => true,
        Some(Value::Object(r)) => r.is_empty(),
        Some(_) => false,
    };
    if unset {
        fill_object(container, "resources", |r| {
            r.insert(
                "requests".to_string(),
                json!({"cpu": "10m", "memory": "64Mi"}),
            );
            r.insert("limits".to_string(), json!({"memory": "256Mi"}));
        });
    }
}
