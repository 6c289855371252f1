//! Refusal of explicit weakening of a cloudflared pod (docs/design.md §2.3): the checks shared by
//! workload admission and by a Tunnel's `deployPatch`. Only the pod level and the container
//! named `cloudflared` are judged; other containers have needs of their own.
pub mod mutate;

use serde_json::Value;

use crate::rules::Violation;

pub(crate) const CLOUDFLARED_CONTAINER: &str = "cloudflared";

/// Problems in a pod spec (`pod` is the JSON of a PodSpec, possibly partial as in a patch);
/// `path` is the field path of that pod spec, e.g. `spec.template.spec`.
pub(crate) fn pod_weakening(pod: &Value, path: &str) -> Vec<Violation> {
    let mut out = Vec::new();
    for field in ["hostNetwork", "hostPID", "hostIPC"] {
        if pod.get(field) == Some(&Value::Bool(true)) {
            out.push(Violation::new(
                format!("{path}.{field}"),
                "true is refused; cloudflared needs no host namespace, remove the field",
            ));
        }
    }
    if pod
        .pointer("/securityContext/runAsUser")
        .and_then(Value::as_i64)
        == Some(0)
    {
        out.push(Violation::new(
            format!("{path}.securityContext.runAsUser"),
            "0 (root) is refused; remove it, the cloudflared image runs as the non-root user 65532",
        ));
    }
    if let Some(volumes) = pod.get("volumes").and_then(Value::as_array) {
        for (i, volume) in volumes.iter().enumerate() {
            if volume.get("hostPath").is_some() {
                let name = volume.get("name").and_then(Value::as_str).unwrap_or("");
                out.push(Violation::new(
                    format!("{path}.volumes[{i}].hostPath"),
                    format!("hostPath volume {name:?} is refused; use a ConfigMap, Secret or emptyDir volume"),
                ));
            }
        }
    }
    if let Some(containers) = pod.get("containers").and_then(Value::as_array) {
        for (i, container) in containers.iter().enumerate() {
            if container.get("name").and_then(Value::as_str) == Some(CLOUDFLARED_CONTAINER) {
                out.extend(container_weakening(
                    container,
                    &format!("{path}.containers[{i}]"),
                ));
            }
        }
    }
    out
}

fn container_weakening(container: &Value, path: &str) -> Vec<Violation> {
    let mut out = Vec::new();
    let Some(sc) = container.get("securityContext") else {
        return out;
    };
    let sc_path = format!("{path}.securityContext");
    if sc.get("privileged") == Some(&Value::Bool(true)) {
        out.push(Violation::new(
            format!("{sc_path}.privileged"),
            "true is refused; cloudflared needs no privileges, remove the field",
        ));
    }
    if sc.get("allowPrivilegeEscalation") == Some(&Value::Bool(true)) {
        out.push(Violation::new(
            format!("{sc_path}.allowPrivilegeEscalation"),
            "true is refused; remove the field (cftunnel sets it to false)",
        ));
    }
    if let Some(added) = sc
        .pointer("/capabilities/add")
        .and_then(Value::as_array)
        .filter(|a| !a.is_empty())
    {
        let names: Vec<&str> = added.iter().filter_map(Value::as_str).collect();
        out.push(Violation::new(
            format!("{sc_path}.capabilities.add"),
            format!("{names:?} is refused; cloudflared needs no added capabilities, remove them"),
        ));
    }
    if sc.get("runAsUser").and_then(Value::as_i64) == Some(0) {
        out.push(Violation::new(
            format!("{sc_path}.runAsUser"),
            "0 (root) is refused; remove it, the cloudflared image runs as the non-root user 65532",
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn names_each_weakened_field_of_the_cloudflared_container_only() {
        let pod = json!({
            "hostNetwork": true,
            "volumes": [{"name": "cfg", "configMap": {"name": "x"}}, {"name": "root", "hostPath": {"path": "/"}}],
            "containers": [
                {"name": "sidecar", "securityContext": {"privileged": true}},
                {"name": "cloudflared", "securityContext": {"privileged": true, "capabilities": {"add": ["NET_ADMIN"]}, "runAsUser": 0}}
            ]
        });
        let messages: Vec<String> = pod_weakening(&pod, "spec.template.spec")
            .iter()
            .map(|v| v.message().to_string())
            .collect();
        assert_eq!(
            messages,
            vec![
                "spec.template.spec.hostNetwork: true is refused; cloudflared needs no host namespace, remove the field",
                "spec.template.spec.volumes[1].hostPath: hostPath volume \"root\" is refused; use a ConfigMap, Secret or emptyDir volume",
                "spec.template.spec.containers[1].securityContext.privileged: true is refused; cloudflared needs no privileges, remove the field",
                "spec.template.spec.containers[1].securityContext.capabilities.add: [\"NET_ADMIN\"] is refused; cloudflared needs no added capabilities, remove them",
                "spec.template.spec.containers[1].securityContext.runAsUser: 0 (root) is refused; remove it, the cloudflared image runs as the non-root user 65532",
            ]
        );
    }

    #[test]
    fn a_hardened_pod_passes() {
        let pod = json!({"containers": [{"name": "cloudflared", "securityContext": {"allowPrivilegeEscalation": false, "runAsUser": 65532}}]});
        assert!(pod_weakening(&pod, "spec").is_empty());
    }
}
