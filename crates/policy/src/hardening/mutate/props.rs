//! Properties of workload mutation over random pod-spec-shaped JSON: add-only, idempotent,
//! keeps every value the user wrote, leaves other containers alone, never panics.
use proptest::prelude::*;
use proptest::sample::select;
use serde_json::{Map, Value, json};

use super::tests::{assert_no_remove, clone_and_diff};
use super::*;

const KEYS: &[&str] = &[
    "securityContext",
    "runAsNonRoot",
    "seccompProfile",
    "type",
    "capabilities",
    "drop",
    "add",
    "privileged",
    "allowPrivilegeEscalation",
    "readOnlyRootFilesystem",
    "resources",
    "requests",
    "limits",
    "affinity",
    "nodeAffinity",
    "requiredDuringSchedulingIgnoredDuringExecution",
    "nodeSelectorTerms",
    "matchExpressions",
    "matchFields",
    "key",
    "name",
    "value",
    "args",
    "readinessProbe",
    "livenessProbe",
    "startupProbe",
    "annotations",
    "metadata",
    "spec",
];

const STRINGS: &[&str] = &[
    "cloudflared",
    "sidecar",
    "ALL",
    "NET_RAW",
    "SYS_ADMIN",
    "linux",
    "windows",
    "kubernetes.io/os",
    "kubernetes.io/arch",
    "In",
    "NotIn",
    "RuntimeDefault",
    "10m",
    "",
];

const ARGS: &[&str] = &[
    "tunnel",
    "run",
    "--metrics",
    "-metrics",
    "--metrics=0.0.0.0:2000",
    "--metrics=:x",
    "0.0.0.0:2000",
    ":44483",
    "localhost:2000",
    "[::]:9",
    "--",
    "--loglevel",
    "$(ADDR)",
];

fn leaf() -> BoxedStrategy<Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        select(STRINGS).prop_map(Value::from),
        "[a-z0-9:./]{0,6}".prop_map(Value::String),
    ]
    .boxed()
}

fn key() -> BoxedStrategy<String> {
    prop_oneof![select(KEYS).prop_map(str::to_string), "[a-zA-Z]{1,5}"].boxed()
}

fn any_json() -> BoxedStrategy<Value> {
    leaf()
        .prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map(key(), inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
        .boxed()
}

/// An object with a random subset of `fields` (each shaped by its strategy) plus random keys.
fn object_of(fields: Vec<(&'static str, BoxedStrategy<Value>)>) -> BoxedStrategy<Value> {
    let fields: Vec<_> = fields
        .into_iter()
        .map(|(name, strategy)| prop::option::of(strategy).prop_map(move |v| (name, v)))
        .collect();
    let extra = prop::collection::btree_map("x[a-z]{1,4}", any_json(), 0..2);
    (fields, extra)
        .prop_map(|(fields, extra)| {
            let mut map: Map<String, Value> = extra.into_iter().collect();
            for (name, value) in fields {
                if let Some(value) = value {
                    map.insert(name.to_string(), value);
                }
            }
            Value::Object(map)
        })
        .boxed()
}

/// Either the expected shape or, now and then, any JSON at all.
fn shaped(strategy: BoxedStrategy<Value>) -> BoxedStrategy<Value> {
    prop_oneof![4 => strategy, 1 => any_json()].boxed()
}

fn strings_from(pool: &'static [&'static str], max: usize) -> BoxedStrategy<Value> {
    prop::collection::vec(select(pool).prop_map(Value::from), 0..max)
        .prop_map(Value::Array)
        .boxed()
}

fn requirement() -> BoxedStrategy<Value> {
    object_of(vec![
        ("key", select(STRINGS).prop_map(Value::from).boxed()),
        ("operator", select(STRINGS).prop_map(Value::from).boxed()),
        ("values", strings_from(STRINGS, 3)),
    ])
}

fn node_affinity() -> BoxedStrategy<Value> {
    let term = shaped(object_of(vec![
        (
            "matchExpressions",
            shaped(
                prop::collection::vec(requirement(), 0..3)
                    .prop_map(Value::Array)
                    .boxed(),
            ),
        ),
        (
            "matchFields",
            shaped(
                prop::collection::vec(requirement(), 0..2)
                    .prop_map(Value::Array)
                    .boxed(),
            ),
        ),
    ]));
    let required = shaped(object_of(vec![(
        "nodeSelectorTerms",
        shaped(
            prop::collection::vec(term, 0..4)
                .prop_map(Value::Array)
                .boxed(),
        ),
    )]));
    shaped(object_of(vec![(
        "nodeAffinity",
        shaped(object_of(vec![
            ("requiredDuringSchedulingIgnoredDuringExecution", required),
            (
                "preferredDuringSchedulingIgnoredDuringExecution",
                any_json(),
            ),
        ])),
    )]))
}

fn container() -> BoxedStrategy<Value> {
    let env = object_of(vec![
        (
            "name",
            select(&["TUNNEL_METRICS", "OTHER"][..])
                .prop_map(Value::from)
                .boxed(),
        ),
        ("value", select(ARGS).prop_map(Value::from).boxed()),
    ]);
    let security = object_of(vec![
        ("privileged", leaf()),
        ("allowPrivilegeEscalation", leaf()),
        ("readOnlyRootFilesystem", leaf()),
        (
            "capabilities",
            shaped(object_of(vec![
                ("drop", shaped(strings_from(STRINGS, 3))),
                ("add", shaped(strings_from(STRINGS, 2))),
            ])),
        ),
    ]);
    object_of(vec![
        (
            "name",
            prop_oneof![3 => Just(Value::from("cloudflared")), 1 => leaf()].boxed(),
        ),
        ("args", shaped(strings_from(ARGS, 6))),
        ("command", shaped(strings_from(ARGS, 4))),
        (
            "env",
            shaped(
                prop::collection::vec(env, 0..3)
                    .prop_map(Value::Array)
                    .boxed(),
            ),
        ),
        ("securityContext", shaped(security)),
        (
            "resources",
            prop_oneof![Just(json!({})), any_json()].boxed(),
        ),
        ("readinessProbe", any_json()),
        ("livenessProbe", any_json()),
        ("startupProbe", any_json()),
    ])
}

fn pod_spec() -> BoxedStrategy<Value> {
    let containers = || {
        shaped(
            prop::collection::vec(shaped(container()), 0..3)
                .prop_map(Value::Array)
                .boxed(),
        )
    };
    object_of(vec![
        (
            "securityContext",
            shaped(object_of(vec![
                ("runAsNonRoot", leaf()),
                ("seccompProfile", any_json()),
                ("runAsUser", leaf()),
            ])),
        ),
        ("automountServiceAccountToken", leaf()),
        (
            "os",
            shaped(object_of(vec![(
                "name",
                select(STRINGS).prop_map(Value::from).boxed(),
            )])),
        ),
        ("affinity", node_affinity()),
        ("containers", containers()),
        ("initContainers", containers()),
        ("someFutureField", any_json()),
    ])
}

fn workload() -> BoxedStrategy<Value> {
    let kind = select(&["Deployment", "DaemonSet", "Pod", "StatefulSet"][..]);
    let app =
        prop_oneof![4 => Just(Some("cloudflared")), 1 => Just(Some("other")), 1 => Just(None)];
    let owned = any::<bool>();
    let annotations = prop::option::of(prop::collection::btree_map(
        select(&["cfargotunnel.com/checksum", "a"][..]).prop_map(str::to_string),
        leaf(),
        0..2,
    ));
    (kind, app, owned, annotations, pod_spec())
        .prop_map(|(kind, app, owned, annotations, pod)| {
            let mut labels = Map::new();
            if let Some(app) = app {
                labels.insert("cfargotunnel.com/app".into(), app.into());
            }
            let mut metadata = json!({"name": "cf"});
            if owned {
                labels.insert("cfargotunnel.com/tunnel".into(), "t".into());
                metadata["ownerReferences"] = json!([{"apiVersion": "networking.cfargotunnel.com/v1alpha2",
                    "kind": "Tunnel", "name": "t", "uid": "u"}]);
            }
            metadata["labels"] = Value::Object(labels);
            if kind == "Pod" {
                return json!({"kind": kind, "metadata": metadata, "spec": pod});
            }
            let mut template = json!({"spec": pod});
            if let Some(annotations) = annotations {
                template["metadata"] = json!({"annotations": annotations});
            }
            json!({"kind": kind, "metadata": metadata, "spec": {"template": template}})
        })
        .boxed()
}

/// Every value of `before` is still in `after` at the same place (objects may gain keys,
/// arrays may gain trailing elements, scalars are equal).
fn keeps(before: &Value, after: &Value) -> bool {
    match (before, after) {
        (Value::Object(b), Value::Object(a)) => b
            .iter()
            .all(|(k, v)| a.get(k).is_some_and(|av| keeps(v, av))),
        (Value::Array(b), Value::Array(a)) => {
            b.len() <= a.len() && b.iter().zip(a).all(|(bv, av)| keeps(bv, av))
        }
        _ => before == after,
    }
}

/// Everything in the pod spec that is not the `cloudflared` container must be equal.
fn untouched_containers(pod: &Value) -> Vec<Value> {
    let mut out = vec![pod.get("initContainers").cloned().unwrap_or(Value::Null)];
    if let Some(containers) = pod.get("containers").and_then(Value::as_array) {
        out.extend(
            containers
                .iter()
                .filter(|c| c.get("name").and_then(Value::as_str) != Some("cloudflared"))
                .cloned(),
        );
    }
    out
}

/// A labelled Deployment, DaemonSet or Pod whose pod spec holds a `cloudflared` container
/// (random in every other way) among random others: every hardening step has work to do.
fn cloudflared_workload() -> BoxedStrategy<Value> {
    let kind = select(&["Deployment", "DaemonSet", "Pod"][..]);
    let others = prop::collection::vec(shaped(container()), 0..3);
    (kind, pod_spec(), container(), others, any::<prop::sample::Index>())
        .prop_map(|(kind, mut pod, mut cloudflared, mut containers, at)| {
            cloudflared["name"] = json!("cloudflared");
            containers.insert(at.index(containers.len() + 1), cloudflared);
            pod["containers"] = Value::Array(containers);
            let labels = json!({"cfargotunnel.com/app": "cloudflared"});
            if kind == "Pod" {
                return json!({"kind": kind, "metadata": {"name": "cf", "labels": labels}, "spec": pod});
            }
            json!({"kind": kind, "metadata": {"name": "cf", "labels": labels},
                   "spec": {"template": {"spec": pod}}})
        })
        .boxed()
}

/// The object as the webhook decodes it from a review.
fn decoded(object: &Value) -> Option<kube::core::DynamicObject> {
    serde_json::from_value(object.clone()).ok()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    #[test]
    fn the_sparse_patch_equals_the_diff_of_a_hardened_clone(
        object in prop_oneof![workload(), cloudflared_workload()],
        checksum in prop::option::of(Just("abc")),
    ) {
        let expected = clone_and_diff(&object, checksum);
        prop_assert_eq!(mutate_workload_with_checksum(&object, checksum), expected.clone());
        // The webhook's path, from the decoded review object, gives the same patch too.
        let mut typed = object.clone();
        typed["apiVersion"] = json!("apps/v1");
        if let Some(decoded) = decoded(&typed) {
            prop_assert_eq!(mutate_object(&decoded), clone_and_diff(&typed, None));
        }
    }

    #[test]
    fn mutation_is_add_only_idempotent_and_keeps_what_the_user_wrote(
        object in workload(),
        checksum in prop::option::of(Just("abc")),
    ) {
        let Ok(patch) = mutate_workload_with_checksum(&object, checksum) else {
            return Ok(());
        };
        assert_no_remove(&patch);
        let mut after = object.clone();
        prop_assert!(json_patch::patch(&mut after, &patch).is_ok());
        prop_assert!(keeps(&object, &after), "lost a value: {patch}");
        prop_assert_eq!(mutate_workload_with_checksum(&after, checksum), Ok(Patch::default()));
        let pointer = if object["kind"] == "Pod" { "/spec" } else { "/spec/template/spec" };
        let (before_pod, after_pod) = (object.pointer(pointer), after.pointer(pointer));
        prop_assert_eq!(
            before_pod.map(untouched_containers),
            after_pod.map(untouched_containers)
        );
        if object["kind"] == "Pod" || !object["metadata"]["ownerReferences"].is_null() {
            prop_assert_eq!(
                object.pointer("/spec/template/metadata"),
                after.pointer("/spec/template/metadata")
            );
        }
    }

    #[test]
    fn any_json_value_is_handled_without_panicking(value in any_json(), checksum in "[a-f0-9]{0,4}") {
        let _ = mutate_workload_with_checksum(&value, Some(&checksum));
        let _ = restamp(&value, &checksum);
        let _ = mounted_config_maps(&value);
        let mut pod = value.clone();
        harden_pod_spec(&mut pod);
        prop_assert!(keeps(&value, &pod));
    }
}
