//! Kubernetes strategic merge patch, applied to JSON (the API server's semantics, so a
//! `deployPatch` means here what `kubectl patch --type strategic` means there).
//!
//! Maps merge recursively and `null` deletes a key; lists whose field has the `merge` strategy
//! merge by the field's merge key (scalars: set union); other lists are replaced. Directives:
//! `$patch: replace|delete` (map and list element), `$retainKeys`, `$setElementOrder/<field>`,
//! `$deleteFromPrimitiveList/<field>`. Order of merged lists follows the API server: patch order
//! for the items the patch names, live order for the rest, interleaved by live position.
use std::fmt;

use serde_json::{Map, Value};

use super::strategic_merge_keys::{PatchField, lookup, merges, replaces};

const DIRECTIVE: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const SET_ELEMENT_ORDER: &str = "$setElementOrder/";
const DELETE_FROM_PRIMITIVE_LIST: &str = "$deleteFromPrimitiveList/";

/// A patch the merge cannot apply: `<path>: <what>; <fix>`, the path being in the patch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PatchError {
    pub path: String,
    pub what: String,
    pub fix: String,
}

impl fmt::Display for PatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}; {}", self.path, self.what, self.fix)
    }
}

impl std::error::Error for PatchError {}

fn error(path: &str, what: impl Into<String>, fix: impl Into<String>) -> PatchError {
    PatchError {
        path: if path.is_empty() {
            "(root)".into()
        } else {
            path.into()
        },
        what: what.into(),
        fix: fix.into(),
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// Applies `patch` to `original`, whose type is the OpenAPI definition `root_type`.
pub fn strategic_merge(
    original: &Value,
    patch: &Value,
    root_type: &str,
) -> Result<Value, PatchError> {
    match (original, patch) {
        (Value::Object(o), Value::Object(p)) => {
            merge_map(o.clone(), p.clone(), root_type, "").map(Value::Object)
        }
        (_, Value::Object(_)) => Err(error(
            "",
            "the patched document is not an object",
            "patch an object",
        )),
        _ => Err(error(
            "",
            "is not an object",
            "write the patch as a map of fields, e.g. {\"spec\": {\"replicas\": 3}}",
        )),
    }
}

/// Numbers compare by value, as Go's JSON decoding (float64) does.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

/// A value taken from the patch where nothing lives yet: what remains once the API server has
/// stripped directives and decoded it (a map carrying `$patch` is dropped, nulls are absent).
fn clean(value: Value) -> Option<Value> {
    match value {
        Value::Object(map) if map.contains_key(DIRECTIVE) => None,
        Value::Object(map) => Some(Value::Object(
            map.into_iter()
                .filter(|(k, v)| !v.is_null() && !k.starts_with('$'))
                .filter_map(|(k, v)| clean(v).map(|v| (k, v)))
                .collect(),
        )),
        Value::Array(items) => Some(Value::Array(clean_list(items))),
        other => Some(other),
    }
}

/// [`clean`] for a list.
fn clean_list(items: Vec<Value>) -> Vec<Value> {
    items.into_iter().filter_map(clean).collect()
}

fn merge_map(
    mut original: Map<String, Value>,
    mut patch: Map<String, Value>,
    ty: &str,
    path: &str,
) -> Result<Map<String, Value>, PatchError> {
    if let Some(directive) = patch.remove(DIRECTIVE) {
        return match directive.as_str() {
            Some("replace") => match clean(Value::Object(patch)) {
                Some(Value::Object(map)) => Ok(map),
                _ => Ok(Map::new()),
            },
            Some("delete") => Ok(Map::new()),
            _ => Err(error(
                &join(path, DIRECTIVE),
                format!("unknown directive {directive}"),
                "use $patch: replace or $patch: delete",
            )),
        };
    }
    retain_keys(&mut original, &mut patch, path)?;
    let orders: Vec<String> = patch
        .keys()
        .filter(|k| k.starts_with(SET_ELEMENT_ORDER))
        .cloned()
        .collect();
    for key in orders {
        if let Some(order) = patch.remove(&key) {
            set_element_order(&mut original, &mut patch, &key, order, ty, path)?;
        }
    }
    for (key, value) in patch {
        let (field, delete_list) = match key.strip_prefix(DELETE_FROM_PRIMITIVE_LIST) {
            Some(field) => (field.to_string(), true),
            None if key.starts_with('$') => continue,
            None => (key, false),
        };
        let field_path = join(path, &field);
        if value.is_null() {
            original.remove(&field);
            continue;
        }
        let meta = lookup(ty, &field);
        let merged = match (original.remove(&field), value) {
            (None, _) if delete_list => continue,
            (None, value) => clean(value),
            (Some(Value::Object(o)), Value::Object(p)) => match meta {
                Some(m) if replaces(m) => clean(Value::Object(p)),
                _ => Some(Value::Object(merge_map(
                    o,
                    p,
                    meta.map_or("", |m| m.child),
                    &field_path,
                )?)),
            },
            (Some(Value::Array(o)), Value::Array(p)) => Some(Value::Array(merge_list(
                o,
                p,
                meta,
                delete_list,
                &field_path,
            )?)),
            (Some(_), value) => clean(value),
        };
        if let Some(merged) = merged {
            original.insert(field, merged);
        }
    }
    Ok(original)
}

/// `$retainKeys`: keys of the live map not listed are cleared; the patch may set only listed keys.
fn retain_keys(
    original: &mut Map<String, Value>,
    patch: &mut Map<String, Value>,
    path: &str,
) -> Result<(), PatchError> {
    let Some(retain) = patch.remove(RETAIN_KEYS) else {
        return Ok(());
    };
    let here = join(path, RETAIN_KEYS);
    let Some(list) = retain.as_array() else {
        return Err(error(
            &here,
            "is not a list",
            "list the field names to keep",
        ));
    };
    let keep: Vec<&str> = list.iter().filter_map(Value::as_str).collect();
    for (key, value) in patch.iter() {
        let directive =
            key.starts_with(DELETE_FROM_PRIMITIVE_LIST) || key.starts_with(SET_ELEMENT_ORDER);
        if !value.is_null() && !directive && !keep.contains(&key.as_str()) {
            return Err(error(
                &here,
                format!("does not list {key:?}, which the patch sets"),
                format!("add {key:?} to $retainKeys"),
            ));
        }
    }
    original.retain(|k, _| keep.contains(&k.as_str()));
    Ok(())
}

/// The identity of a list element: its merge key value for maps, itself for scalars.
fn identity<'a>(item: &'a Value, merge_key: &str) -> Option<&'a Value> {
    if merge_key.is_empty() {
        Some(item)
    } else {
        item.get(merge_key)
    }
}

fn position(list: &[Value], item: &Value, merge_key: &str) -> Option<usize> {
    let id = identity(item, merge_key)?;
    list.iter()
        .position(|v| identity(v, merge_key).is_some_and(|other| same(other, id)))
}

fn merge_list(
    mut original: Vec<Value>,
    patch: Vec<Value>,
    meta: Option<&PatchField>,
    delete_list: bool,
    path: &str,
) -> Result<Vec<Value>, PatchError> {
    let Some(meta) = meta.filter(|m| merges(m)) else {
        return Ok(clean_list(patch));
    };
    if original.is_empty() && patch.is_empty() {
        return Ok(original);
    }
    let maps = original.iter().chain(&patch).any(Value::is_object);
    if original
        .iter()
        .chain(&patch)
        .any(|v| v.is_object() != maps || v.is_array())
    {
        return Err(error(
            path,
            "mixes maps, scalars or lists",
            "give elements of one kind",
        ));
    }
    if !maps {
        if delete_list {
            original.retain(|v| !patch.iter().any(|p| same(p, v)));
            return Ok(original);
        }
        let mut merged = original.clone();
        for item in &patch {
            if !merged.iter().any(|v| same(v, item)) {
                merged.push(item.clone());
            }
        }
        return Ok(order(merged, &patch, &original, ""));
    }
    let key = meta.merge_key;
    if key.is_empty() {
        return Err(error(
            path,
            "is a merge list without a merge key",
            "replace the list with $patch: replace",
        ));
    }
    let mut plain = Vec::with_capacity(patch.len());
    let mut replace = false;
    for (i, item) in patch.into_iter().enumerate() {
        let here = format!("{path}[{i}]");
        match item.get(DIRECTIVE) {
            None => plain.push(item),
            Some(d) if d == "delete" => {
                let Some(id) = item.get(key) else {
                    return Err(error(
                        &here,
                        format!("$patch: delete has no {key:?}, the merge key of this list"),
                        format!("add {key:?} naming the element to delete"),
                    ));
                };
                original.retain(|v| !v.get(key).is_some_and(|k| same(k, id)));
            }
            Some(d) if d == "replace" => replace = true,
            Some(d) => {
                return Err(error(
                    &here,
                    format!("unknown list directive $patch: {d}"),
                    "use $patch: replace or $patch: delete",
                ));
            }
        }
    }
    if replace {
        return Ok(clean_list(plain));
    }
    let mut merged = original.clone();
    for (i, item) in plain.iter().enumerate() {
        let here = format!("{path}[{i}]");
        let Value::Object(fields) = item else {
            return Err(error(&here, "is not a map", "give a map"));
        };
        let Some(id) = fields.get(key) else {
            return Err(error(
                &here,
                format!("has no {key:?}, the merge key of this list"),
                format!("add {key:?}, or replace the whole list with $patch: replace"),
            ));
        };
        match merged
            .iter()
            .position(|v| v.get(key).is_some_and(|k| same(k, id)))
        {
            Some(at) => {
                let live = match merged[at].take() {
                    Value::Object(map) => map,
                    _ => Map::new(),
                };
                merged[at] = Value::Object(merge_map(live, fields.clone(), meta.child, &here)?);
            }
            None => merged.extend(clean(item.clone())),
        }
    }
    Ok(order(merged, &plain, &original, key))
}

/// The API server's order: items named in `wanted` in that order, the others in `live` order,
/// interleaved so that each keeps its live position relative to the other kind where both exist.
fn order(merged: Vec<Value>, wanted: &[Value], live: &[Value], merge_key: &str) -> Vec<Value> {
    let (mut named, rest): (Vec<Value>, Vec<Value>) = merged
        .into_iter()
        .partition(|v| position(wanted, v, merge_key).is_some());
    named.sort_by_key(|v| position(wanted, v, merge_key));
    let mut out = Vec::with_capacity(named.len() + rest.len());
    let (mut left, mut right) = (rest.into_iter().peekable(), named.into_iter().peekable());
    loop {
        let take_left = match (left.peek(), right.peek()) {
            (Some(l), Some(r)) => {
                match (position(live, l, merge_key), position(live, r, merge_key)) {
                    (Some(li), Some(ri)) => li < ri,
                    _ => false,
                }
            }
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => break,
        };
        let next = if take_left { left.next() } else { right.next() };
        out.extend(next);
    }
    out
}

/// `$setElementOrder/<field>`: merges the field's list, then orders it as listed.
fn set_element_order(
    original: &mut Map<String, Value>,
    patch: &mut Map<String, Value>,
    directive: &str,
    order_list: Value,
    ty: &str,
    path: &str,
) -> Result<(), PatchError> {
    let here = join(path, directive);
    let field = directive.trim_start_matches(SET_ELEMENT_ORDER).to_string();
    let Value::Array(wanted) = order_list else {
        return Err(error(
            &here,
            "is not a list",
            "list the elements (or their merge keys) in order",
        ));
    };
    if field.is_empty() {
        return Err(error(
            &here,
            "names no field",
            "write $setElementOrder/<field>",
        ));
    }
    let meta = lookup(ty, &field);
    let key = meta.map_or("", |m| m.merge_key);
    let live = match original.get(&field) {
        Some(Value::Array(items)) => Some(items.clone()),
        Some(_) => {
            return Err(error(
                &join(path, &field),
                "is not a list",
                "order only lists",
            ));
        }
        None => None,
    };
    let patched = match patch.remove(&field) {
        Some(Value::Array(items)) => Some(items),
        Some(_) => return Err(error(&join(path, &field), "is not a list", "give a list")),
        None => None,
    };
    if let Some(items) = &patched {
        check_order(items, &wanted, key, &here)?;
    }
    let merged = match (live.clone(), patched) {
        (Some(live), None) => live,
        (None, Some(items)) => clean_list(items),
        (Some(live), Some(items)) => merge_list(live, items, meta, false, &join(path, &field))?,
        (None, None) => return Ok(()),
    };
    if !key.is_empty() && merged.iter().chain(&wanted).any(|v| v.get(key).is_none()) {
        return Err(error(
            &here,
            format!("lists an element without {key:?}, the merge key"),
            format!("give {key:?} of every element"),
        ));
    }
    let ordered = order(merged, &wanted, live.as_deref().unwrap_or_default(), key);
    original.insert(field, Value::Array(ordered));
    Ok(())
}

/// The patch list must name its elements in the relative order `$setElementOrder` gives them.
fn check_order(items: &[Value], wanted: &[Value], key: &str, here: &str) -> Result<(), PatchError> {
    let mut at = 0;
    for item in items.iter().filter(|v| v.get(DIRECTIVE).is_none()) {
        let Some(id) = identity(item, key) else {
            return Err(error(
                here,
                format!("orders a list whose element has no {key:?}"),
                format!("give {key:?} of every element"),
            ));
        };
        match wanted[at..]
            .iter()
            .position(|w| identity(w, key).is_some_and(|o| same(o, id)))
        {
            Some(offset) => at += offset + 1,
            None => {
                return Err(error(
                    here,
                    "does not list the patch's elements in the patch's order",
                    "list every patched element, in the same order as the patch",
                ));
            }
        }
    }
    Ok(())
}
