//! The checksum of the ConfigMaps a user-managed cloudflared pod mounts (docs/design.md §2.3): stamped
//! on the pod template so that a config change rolls the pods.
use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::Value;
use sha2::{Digest, Sha256};

/// One ConfigMap's name, `data` and `binaryData` (base64 text, as the API serves it).
pub type ConfigMapContent = (String, BTreeMap<String, String>, BTreeMap<String, String>);

/// SHA-256 (lowercase hex) of the ConfigMaps, independent of their order. Every field is
/// tagged and length-prefixed, so no two different inputs share an encoding.
pub fn config_checksum(config_maps: &[ConfigMapContent]) -> String {
    let mut sorted: Vec<&ConfigMapContent> = config_maps.iter().collect();
    sorted.sort();
    let mut hasher = Sha256::new();
    put_len(&mut hasher, b'n', sorted.len());
    for (name, data, binary_data) in sorted {
        put_field(&mut hasher, b'c', name);
        for (tag, entries) in [(b'd', data), (b'b', binary_data)] {
            put_len(&mut hasher, tag, entries.len());
            for (key, value) in entries {
                put_field(&mut hasher, b'k', key);
                put_field(&mut hasher, b'v', value);
            }
        }
    }
    hasher
        .finalize()
        .iter()
        .fold(String::with_capacity(64), |mut hex, byte| {
            let _ = write!(hex, "{byte:02x}");
            hex
        })
}

fn put_len(hasher: &mut Sha256, tag: u8, len: usize) {
    hasher.update([tag]);
    hasher.update((len as u64).to_be_bytes());
}

fn put_field(hasher: &mut Sha256, tag: u8, text: &str) {
    put_len(hasher, tag, text.len());
    hasher.update(text.as_bytes());
}

/// Names of the ConfigMaps a PodSpec mounts through volumes, projected sources included and
/// optional ones too (creating one later must change the checksum); sorted, without repeats.
pub fn mounted_config_maps(pod: &Value) -> Vec<String> {
    let Some(volumes) = pod.get("volumes").and_then(Value::as_array) else {
        return Vec::new();
    };
    let direct = volumes.iter().filter_map(|v| v.get("configMap"));
    let projected = volumes
        .iter()
        .filter_map(|v| v.pointer("/projected/sources").and_then(Value::as_array))
        .flatten()
        .filter_map(|s| s.get("configMap"));
    let mut names: Vec<String> = direct
        .chain(projected)
        .filter_map(|cm| cm.get("name").and_then(Value::as_str))
        .filter(|name| !name.is_empty())
        .map(str::to_string)
        .collect();
    names.sort();
    names.dedup();
    names
}
