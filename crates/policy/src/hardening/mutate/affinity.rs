//! Required node affinity to Linux on amd64/arm64 (the architectures of the cloudflared
//! image), ANDed into every existing node selector term: terms are ORed, so appending a term
//! of our own would widen scheduling instead of narrowing it.
use serde_json::{Map, Value, json};

use super::fill::{fill_object, str_field};

const LABEL_OS: &str = "kubernetes.io/os";
const LABEL_ARCH: &str = "kubernetes.io/arch";

fn requirements() -> [(&'static str, Value); 2] {
    [
        (
            LABEL_OS,
            json!({"key": LABEL_OS, "operator": "In", "values": ["linux"]}),
        ),
        (
            LABEL_ARCH,
            json!({"key": LABEL_ARCH, "operator": "In", "values": ["amd64", "arm64"]}),
        ),
    ]
}

/// Adds the OS and architecture requirements to the pod's required node affinity.
pub(super) fn require_linux_nodes(pod: &mut Map<String, Value>) {
    fill_object(pod, "affinity", |affinity| {
        fill_object(affinity, "nodeAffinity", |node| {
            fill_object(
                node,
                "requiredDuringSchedulingIgnoredDuringExecution",
                |required| match required.get_mut("nodeSelectorTerms") {
                    None => {
                        required.insert("nodeSelectorTerms".to_string(), json!([only_term()]));
                    }
                    Some(Value::Array(terms)) if terms.is_empty() => terms.push(only_term()),
                    Some(Value::Array(terms)) => {
                        terms
                            .iter_mut()
                            .filter_map(Value::as_object_mut)
                            .for_each(narrow_term);
                    }
                    Some(_) => {}
                },
            )
        })
    });
}

fn only_term() -> Value {
    let expressions: Vec<Value> = requirements().into_iter().map(|(_, e)| e).collect();
    json!({ "matchExpressions": expressions })
}

/// ANDs the requirements into one term, skipping a key the term already constrains. An empty
/// term matches no node at all, so adding to it would widen scheduling: it is left alone.
fn narrow_term(term: &mut Map<String, Value>) {
    let has_requirements = ["matchExpressions", "matchFields"].iter().any(|k| {
        term.get(*k)
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty())
    });
    if !has_requirements {
        return;
    }
    let missing: Vec<Value> = match term.get("matchExpressions") {
        None => requirements().into_iter().map(|(_, e)| e).collect(),
        Some(Value::Array(existing)) => requirements()
            .into_iter()
            .filter(|(key, _)| {
                !existing
                    .iter()
                    .filter_map(Value::as_object)
                    .any(|e| str_field(e, "key") == Some(key))
            })
            .map(|(_, e)| e)
            .collect(),
        Some(_) => return,
    };
    if missing.is_empty() {
        return;
    }
    match term.get_mut("matchExpressions") {
        Some(Value::Array(existing)) => existing.extend(missing),
        _ => {
            term.insert("matchExpressions".to_string(), Value::Array(missing));
        }
    }
}
