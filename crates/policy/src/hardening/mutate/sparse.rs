//! Sparse copies: the few parts of a workload that the hardening reads or writes, copied out of
//! the request so the hardening runs on them instead of on a clone of the whole object.
//!
//! A labelled Deployment at the 3 MiB body limit can hold 60,000 env entries; cloning its JSON
//! tree and diffing the hardened clone cost ~100× the body. The hardening never looks at env,
//! volumes or other containers' contents, so it runs on a sparse copy that keeps every path it
//! touches at the same place (array indices included) and nothing else. The JSON Patch from
//! diffing the sparse copy before and after is then the very patch that diffing the whole
//! object would give: a diff only emits operations where the two sides differ, and every
//! difference lies on a kept path. `props.rs` checks that against the clone-and-diff approach.
use serde_json::{Map, Value};

use cftunnel_types::names::ANNOTATION_CHECKSUM;

/// How much of a value the hardening needs to see. Anything not kept becomes `null`, which the
/// hardening treats exactly like any other value of a type it does not expect: it leaves it alone.
#[derive(Debug)]
pub(super) enum Part {
    /// Only that the member exists (the hardening fills it in only when absent).
    Presence,
    /// A string as it is; anything else becomes null (the hardening only compares strings).
    Str,
    /// A scalar as it is; arrays and objects become null.
    Scalar,
    /// Whether the object is empty: its keys, each with a null value.
    Keys,
    /// The listed members of an object, each as its part says; null when not an object.
    Fields(&'static [(&'static str, Part)]),
    /// Every element of an array, as the part says; null when not an array.
    Each(&'static Part),
}

/// The copy of `value` that keeps only `part`.
pub(super) fn sparse(value: &Value, part: &Part) -> Value {
    match (part, value) {
        (Part::Presence, _) => Value::Null,
        (Part::Str, Value::String(_)) => value.clone(),
        (Part::Scalar, Value::Bool(_) | Value::Number(_) | Value::String(_)) => value.clone(),
        (Part::Keys, Value::Object(map)) => Value::Object(
            map.keys()
                .map(|key| (key.clone(), Value::Null))
                .collect::<Map<String, Value>>(),
        ),
        (Part::Fields(fields), Value::Object(map)) => Value::Object(
            fields
                .iter()
                .filter_map(|(key, part)| {
                    map.get(*key)
                        .map(|member| ((*key).to_string(), sparse(member, part)))
                })
                .collect(),
        ),
        (Part::Each(part), Value::Array(items)) => {
            Value::Array(items.iter().map(|item| sparse(item, part)).collect())
        }
        _ => Value::Null,
    }
}

/// What `harden_pod_spec` reads or writes in a PodSpec, apart from each container's metrics
/// port (read from command, args and env, which are not copied: the port is looked up in the
/// request itself).
pub(super) const POD_SPEC: Part = Part::Fields(&[
    ("os", Part::Fields(&[("name", Part::Str)])),
    (
        "securityContext",
        Part::Fields(&[
            ("runAsNonRoot", Part::Presence),
            ("seccompProfile", Part::Presence),
        ]),
    ),
    ("affinity", AFFINITY),
    ("automountServiceAccountToken", Part::Presence),
    ("containers", Part::Each(&CONTAINER)),
]);

const AFFINITY: Part = Part::Fields(&[(
    "nodeAffinity",
    Part::Fields(&[(
        "requiredDuringSchedulingIgnoredDuringExecution",
        Part::Fields(&[(
            "nodeSelectorTerms",
            Part::Each(&Part::Fields(&[
                (
                    "matchExpressions",
                    Part::Each(&Part::Fields(&[("key", Part::Str)])),
                ),
                ("matchFields", Part::Each(&Part::Presence)),
            ])),
        )]),
    )]),
)]);

const CONTAINER: Part = Part::Fields(&[
    ("name", Part::Str),
    (
        "securityContext",
        Part::Fields(&[
            ("privileged", Part::Scalar),
            ("allowPrivilegeEscalation", Part::Presence),
            ("readOnlyRootFilesystem", Part::Presence),
            (
                "capabilities",
                Part::Fields(&[
                    ("add", Part::Each(&Part::Str)),
                    ("drop", Part::Each(&Part::Str)),
                ]),
            ),
        ]),
    ),
    ("resources", Part::Keys),
    ("readinessProbe", Part::Presence),
    ("startupProbe", Part::Presence),
    ("livenessProbe", Part::Presence),
]);

/// What the checksum stamp reads or writes in a pod template.
pub(super) const TEMPLATE_METADATA: Part = Part::Fields(&[(
    "annotations",
    Part::Fields(&[(ANNOTATION_CHECKSUM, Part::Presence)]),
)]);

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn keeps_only_the_listed_paths_at_their_places() {
        let pod = json!({
            "os": {"name": 7},
            "securityContext": {"runAsNonRoot": false, "runAsUser": 5, "seccompProfile": {"type": "Localhost"}},
            "containers": [
                "not an object",
                {"name": "cloudflared", "env": [{"name": "A", "value": "b"}], "resources": {"limits": {"cpu": "1"}},
                 "securityContext": {"privileged": true, "capabilities": {"drop": ["NET_RAW", 3]}}},
            ],
            "volumes": [{"name": "v"}],
        });
        assert_eq!(
            sparse(&pod, &POD_SPEC),
            json!({
                "os": {"name": null},
                "securityContext": {"runAsNonRoot": null, "seccompProfile": null},
                "containers": [
                    null,
                    {"name": "cloudflared", "resources": {"limits": null},
                     "securityContext": {"privileged": true, "capabilities": {"drop": ["NET_RAW", null]}}},
                ],
            })
        );
        assert_eq!(sparse(&json!([1]), &POD_SPEC), Value::Null);
    }
}
