//! Lossless conversion between Tunnel/ClusterTunnel v1alpha1 and v1alpha2 (docs/design.md §1.2).
//!
//! Up: `size`, `image`, `nodeSelectors`, `tolerations` move into `deployPatch`, so they take
//! effect; they win over the round-trip annotation, which is removed. Down: those four are
//! taken out of `deployPatch`, and whatever else it holds waits in the annotation
//! `cfargotunnel.com/v1alpha2-deploy-patch`. Only that annotation changes in metadata.
//!
//! One exception to losslessness: an `image` equal to a default of the Go operator's v1alpha1
//! schema ([`GO_OPERATOR_DEFAULT_IMAGES`]) is dropped on the way up. The API server wrote that
//! default into every v1alpha1 object that named no image, so it pins nothing the user chose,
//! and carried into `deployPatch` it would run a years-old cloudflared instead of cftunnel's
//! pinned image.
use serde_json::{Map, Value, json};

use super::names::ANNOTATION_V1ALPHA2_DEPLOY_PATCH;

pub const V1ALPHA1: &str = "networking.cfargotunnel.com/v1alpha1";
pub const V1ALPHA2: &str = "networking.cfargotunnel.com/v1alpha2";
const CONTAINER: &str = "cloudflared";

/// The `spec.image` defaults of the Go operator's v1alpha1 Tunnel and ClusterTunnel schema, as
/// found in its CRDs and types (`+kubebuilder:default`) across its releases: 2022.3.1, 2022.12.1
/// and 2025.4.0 (v0.13, the release that added v1alpha2). A release between them may have used
/// another default; such an object keeps its image as a pin.
pub const GO_OPERATOR_DEFAULT_IMAGES: &[&str] = &[
    "cloudflare/cloudflared:2022.3.1",
    "cloudflare/cloudflared:2022.12.1",
    "cloudflare/cloudflared:2025.4.0",
];

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConversionError {
    #[error("cannot convert {kind} from {from} to {to}: only {V1ALPHA1} and {V1ALPHA2} exist")]
    UnknownVersion {
        kind: String,
        from: String,
        to: String,
    },
    #[error("cannot convert {0}: only Tunnel and ClusterTunnel have several versions")]
    UnknownKind(String),
    #[error("object is not a JSON object with apiVersion and kind")]
    NotAnObject,
}

/// Converts one object to `desired` (an apiVersion); the object is returned unchanged when it
/// is already there.
pub fn convert(mut object: Value, desired: &str) -> Result<Value, ConversionError> {
    let (from, kind) = match (
        object.get("apiVersion").and_then(Value::as_str),
        object.get("kind").and_then(Value::as_str),
    ) {
        (Some(v), Some(k)) => (v.to_string(), k.to_string()),
        _ => return Err(ConversionError::NotAnObject),
    };
    if kind != "Tunnel" && kind != "ClusterTunnel" {
        return Err(ConversionError::UnknownKind(kind));
    }
    match (from.as_str(), desired) {
        (a, b) if a == b => {}
        (V1ALPHA1, V1ALPHA2) => up(&mut object),
        (V1ALPHA2, V1ALPHA1) => down(&mut object),
        _ => {
            return Err(ConversionError::UnknownVersion {
                kind,
                from,
                to: desired.to_string(),
            });
        }
    }
    object["apiVersion"] = json!(desired);
    Ok(object)
}

fn up(object: &mut Value) {
    let stored = take_annotation(object);
    let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    let size = spec.remove("size");
    let image = spec.remove("image").filter(|image| {
        !image
            .as_str()
            .is_some_and(|i| GO_OPERATOR_DEFAULT_IMAGES.contains(&i))
    });
    let node_selector = spec.remove("nodeSelectors");
    let tolerations = spec.remove("tolerations");
    let mut patch = match stored.as_deref().map(serde_json::from_str::<Value>) {
        Some(Ok(Value::Object(p))) => p,
        // A stored patch that is not a JSON object was kept verbatim: give it back verbatim.
        Some(_)
            if size.is_none()
                && image.is_none()
                && node_selector.is_none()
                && tolerations.is_none() =>
        {
            spec.insert("deployPatch".into(), json!(stored.unwrap_or_default()));
            return;
        }
        _ => Map::new(),
    };
    if let Some(size) = size.filter(|v| !v.is_null()) {
        set(&mut patch, &["spec"], "replicas", size);
    }
    if let Some(node_selector) = node_selector.filter(|v| !v.is_null()) {
        set(
            &mut patch,
            &["spec", "template", "spec"],
            "nodeSelector",
            node_selector,
        );
    }
    if let Some(tolerations) = tolerations.filter(|v| !v.is_null()) {
        set(
            &mut patch,
            &["spec", "template", "spec"],
            "tolerations",
            tolerations,
        );
    }
    if let Some(image) = image.filter(|v| !v.is_null()) {
        set_container_image(&mut patch, image);
    }
    spec.insert(
        "deployPatch".into(),
        json!(canonical(&Value::Object(patch))),
    );
}

fn down(object: &mut Value) {
    let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    let raw = match spec.remove("deployPatch") {
        Some(Value::String(s)) => s,
        _ => String::new(),
    };
    let mut rest = match serde_yaml_ng::from_str::<Value>(&raw) {
        Ok(Value::Object(p)) => p,
        _ if raw.trim().is_empty() => Map::new(),
        _ => {
            put_annotation(object, raw);
            return;
        }
    };
    if let Some(size) = take(&mut rest, &["spec"], "replicas") {
        spec.insert("size".into(), size);
    }
    if let Some(ns) = take(&mut rest, &["spec", "template", "spec"], "nodeSelector") {
        spec.insert("nodeSelectors".into(), ns);
    }
    if let Some(t) = take(&mut rest, &["spec", "template", "spec"], "tolerations") {
        spec.insert("tolerations".into(), t);
    }
    if let Some(image) = take_container_image(&mut rest) {
        spec.insert("image".into(), image);
    }
    if !rest.is_empty() {
        put_annotation(object, canonical(&Value::Object(rest)));
    }
}

/// Sorted keys, no whitespace: the same patch always gives the same string.
pub fn canonical(value: &Value) -> String {
    fn sort(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<_> = m.keys().collect();
                keys.sort();
                Value::Object(keys.into_iter().map(|k| (k.clone(), sort(&m[k]))).collect())
            }
            Value::Array(a) => Value::Array(a.iter().map(sort).collect()),
            other => other.clone(),
        }
    }
    sort(value).to_string()
}

fn object_at<'a>(root: &'a mut Map<String, Value>, path: &[&str]) -> &'a mut Map<String, Value> {
    let mut cur = root;
    for key in path {
        let entry = cur.entry(key.to_string()).or_insert_with(|| json!({}));
        if !entry.is_object() {
            *entry = json!({});
        }
        cur = match entry {
            Value::Object(m) => m,
            _ => unreachable!("just made an object"),
        };
    }
    cur
}

fn set(root: &mut Map<String, Value>, path: &[&str], key: &str, value: Value) {
    object_at(root, path).insert(key.to_string(), value);
}

/// Removes `path.key`, pruning parents that become empty.
fn take(root: &mut Map<String, Value>, path: &[&str], key: &str) -> Option<Value> {
    let (first, rest) = match path.split_first() {
        None => return root.remove(key),
        Some(split) => split,
    };
    let child = root.get_mut(*first)?.as_object_mut()?;
    let taken = take(child, rest, key);
    if child.is_empty() {
        root.remove(*first);
    }
    taken
}

fn set_container_image(patch: &mut Map<String, Value>, image: Value) {
    let pod = object_at(patch, &["spec", "template", "spec"]);
    let containers = pod.entry("containers").or_insert_with(|| json!([]));
    if !containers.is_array() {
        *containers = json!([]);
    }
    let Value::Array(list) = containers else {
        return;
    };
    match list
        .iter_mut()
        .find(|c| c.get("name").and_then(Value::as_str) == Some(CONTAINER))
    {
        Some(c) => c["image"] = image,
        None => list.push(json!({"name": CONTAINER, "image": image})),
    }
}

fn take_container_image(patch: &mut Map<String, Value>) -> Option<Value> {
    let pod = patch
        .get_mut("spec")?
        .get_mut("template")?
        .get_mut("spec")?
        .as_object_mut()?;
    let list = pod.get_mut("containers")?.as_array_mut()?;
    let index = list
        .iter()
        .position(|c| c.get("name").and_then(Value::as_str) == Some(CONTAINER))?;
    let container = list[index].as_object_mut()?;
    let image = container.remove("image")?;
    if container.len() == 1 {
        list.remove(index);
    }
    if list.is_empty() {
        pod.remove("containers");
    }
    prune_empty(patch, &["spec", "template", "spec"]);
    Some(image)
}

fn prune_empty(root: &mut Map<String, Value>, path: &[&str]) {
    if let Some((first, rest)) = path.split_first()
        && let Some(child) = root.get_mut(*first).and_then(Value::as_object_mut)
    {
        prune_empty(child, rest);
        if child.is_empty() {
            root.remove(*first);
        }
    }
}

fn take_annotation(object: &mut Value) -> Option<String> {
    let annotations = object
        .pointer_mut("/metadata/annotations")?
        .as_object_mut()?;
    let value = annotations.remove(ANNOTATION_V1ALPHA2_DEPLOY_PATCH)?;
    if annotations.is_empty()
        && let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut)
    {
        meta.remove("annotations");
    }
    value.as_str().map(str::to_string)
}

fn put_annotation(object: &mut Value, value: String) {
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        let annotations = meta.entry("annotations").or_insert_with(|| json!({}));
        if let Some(map) = annotations.as_object_mut() {
            map.insert(ANNOTATION_V1ALPHA2_DEPLOY_PATCH.into(), json!(value));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v1(spec_extra: Value) -> Value {
        let mut spec = json!({"newTunnel": {"name": "t"}, "cloudflare": {"domain": "example.com", "secret": "s", "accountId": "a"}});
        for (k, v) in spec_extra.as_object().expect("object") {
            spec[k] = v.clone();
        }
        json!({"apiVersion": V1ALPHA1, "kind": "Tunnel", "metadata": {"name": "t", "namespace": "n", "labels": {"a": "b"}}, "spec": spec})
    }

    #[test]
    fn v1alpha1_fields_move_into_deploy_patch_and_back() {
        let original = v1(json!({
            "size": 3, "image": "cloudflare/cloudflared:2026.11.0",
            "nodeSelectors": {"disk": "ssd"},
            "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "edge", "effect": "NoSchedule"}]
        }));
        let up = convert(original.clone(), V1ALPHA2).expect("up");
        let patch: Value =
            serde_json::from_str(up["spec"]["deployPatch"].as_str().expect("string"))
                .expect("JSON patch");
        assert_eq!(patch["spec"]["replicas"], 3);
        assert_eq!(
            patch["spec"]["template"]["spec"]["containers"],
            json!([{"name": "cloudflared", "image": "cloudflare/cloudflared:2026.11.0"}])
        );
        assert_eq!(
            patch["spec"]["template"]["spec"]["nodeSelector"],
            json!({"disk": "ssd"})
        );
        assert_eq!(
            patch["spec"]["template"]["spec"]["tolerations"][0]["key"],
            "dedicated"
        );
        assert!(up["spec"].get("size").is_none());
        let down = convert(up, V1ALPHA1).expect("down");
        assert_eq!(down, original, "lossless round trip");
    }

    #[test]
    fn the_go_operator_default_image_is_no_pin() {
        for default in GO_OPERATOR_DEFAULT_IMAGES {
            let up = convert(v1(json!({"image": default})), V1ALPHA2).expect("up");
            assert_eq!(up["spec"]["deployPatch"], "{}", "{default}");
            let down = convert(up, V1ALPHA1).expect("down");
            assert!(down["spec"].get("image").is_none(), "{default}");
        }
        let up = convert(
            v1(json!({"image": "cloudflare/cloudflared:2025.4.1", "size": 2})),
            V1ALPHA2,
        )
        .expect("up");
        assert_eq!(
            up["spec"]["deployPatch"],
            r#"{"spec":{"replicas":2,"template":{"spec":{"containers":[{"image":"cloudflare/cloudflared:2025.4.1","name":"cloudflared"}]}}}}"#,
            "any other image is a pin"
        );
    }

    #[test]
    fn other_deploy_patch_content_survives_down_and_up() {
        let patch = r#"{"spec":{"replicas":4,"template":{"metadata":{"labels":{"team":"edge"}},"spec":{"containers":[{"env":[{"name":"TUNNEL_LOGLEVEL","value":"debug"}],"image":"img:1","name":"cloudflared"}],"priorityClassName":"high"}}}}"#;
        let v2 = json!({"apiVersion": V1ALPHA2, "kind": "ClusterTunnel", "metadata": {"name": "t"}, "spec": {"newTunnel": {"name": "t"}, "deployPatch": patch}});
        let down = convert(v2.clone(), V1ALPHA1).expect("down");
        assert_eq!(down["spec"]["size"], 4);
        assert_eq!(down["spec"]["image"], "img:1");
        let kept = down["metadata"]["annotations"][ANNOTATION_V1ALPHA2_DEPLOY_PATCH]
            .as_str()
            .expect("annotation");
        assert!(
            kept.contains("TUNNEL_LOGLEVEL")
                && kept.contains("priorityClassName")
                && !kept.contains("img:1"),
            "{kept}"
        );
        let up = convert(down, V1ALPHA2).expect("up");
        assert_eq!(up, v2, "patch restored, annotation removed");
    }

    #[test]
    fn explicit_v1alpha1_fields_win_over_the_stored_annotation() {
        let mut obj = v1(json!({"size": 5}));
        obj["metadata"]["annotations"] =
            json!({ANNOTATION_V1ALPHA2_DEPLOY_PATCH: r#"{"spec":{"replicas":2,"paused":true}}"#});
        let up = convert(obj, V1ALPHA2).expect("up");
        assert_eq!(
            up["spec"]["deployPatch"],
            r#"{"spec":{"paused":true,"replicas":5}}"#
        );
        assert!(up["metadata"].get("annotations").is_none());
    }

    #[test]
    fn empty_patch_converts_to_nothing_and_back_to_the_default() {
        let v2 = json!({"apiVersion": V1ALPHA2, "kind": "Tunnel", "metadata": {"name": "t"}, "spec": {"deployPatch": "{}"}});
        let down = convert(v2.clone(), V1ALPHA1).expect("down");
        assert_eq!(
            down,
            json!({"apiVersion": V1ALPHA1, "kind": "Tunnel", "metadata": {"name": "t"}, "spec": {}})
        );
        assert_eq!(convert(down, V1ALPHA2).expect("up"), v2);
    }

    #[test]
    fn an_unparseable_patch_is_kept_verbatim() {
        let v2 = json!({"apiVersion": V1ALPHA2, "kind": "Tunnel", "metadata": {"name": "t"}, "spec": {"deployPatch": "{oops"}});
        let down = convert(v2.clone(), V1ALPHA1).expect("down");
        assert_eq!(
            down["metadata"]["annotations"][ANNOTATION_V1ALPHA2_DEPLOY_PATCH],
            "{oops"
        );
        assert_eq!(convert(down, V1ALPHA2).expect("up"), v2);
    }

    #[test]
    fn refuses_unknown_versions_and_kinds() {
        let obj = json!({"apiVersion": V1ALPHA1, "kind": "TunnelBinding"});
        assert_eq!(
            convert(obj, V1ALPHA2),
            Err(ConversionError::UnknownKind("TunnelBinding".into()))
        );
        let obj = json!({"apiVersion": "networking.cfargotunnel.com/v9", "kind": "Tunnel"});
        assert!(matches!(
            convert(obj, V1ALPHA2),
            Err(ConversionError::UnknownVersion { .. })
        ));
    }
}
