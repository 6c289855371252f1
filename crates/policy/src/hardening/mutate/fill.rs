//! Fill-if-unset helpers over raw JSON: every hardening step is built from these, so none of
//! them can overwrite or remove what the user wrote.
use serde_json::{Map, Value};

/// Inserts `value` at `key` only when the key is absent; any present value is the user's.
pub(super) fn fill_value(map: &mut Map<String, Value>, key: &str, value: Value) {
    if !map.contains_key(key) {
        map.insert(key.to_string(), value);
    }
}

/// Runs `fill` on the object at `key`, creating that object only when `fill` puts something
/// in it; a value of another type at `key` is the user's and is left alone.
pub(super) fn fill_object(
    map: &mut Map<String, Value>,
    key: &str,
    fill: impl FnOnce(&mut Map<String, Value>),
) {
    match map.get_mut(key) {
        Some(Value::Object(inner)) => fill(inner),
        Some(_) => {}
        None => {
            let mut inner = Map::new();
            fill(&mut inner);
            if !inner.is_empty() {
                map.insert(key.to_string(), Value::Object(inner));
            }
        }
    }
}

/// The string at `key`, if there is one.
pub(super) fn str_field<'a>(map: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    map.get(key).and_then(Value::as_str)
}
