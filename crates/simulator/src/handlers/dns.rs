//! DNS records of a zone: list with filters, create, get, overwrite, patch, delete.
use http::StatusCode;
use serde_json::{Map, Value, json};

use super::Ctx;
use super::dns_rules::{Draft, check_conflicts, parse_draft, proxiable, qualify};
use crate::envelope::{ApiError, Reply};
use crate::query::Query;
use crate::state::{SimDnsRecord, State, Zone, hex_id, now};

/// Largest page served; the schema allows 5,000,000 but nobody needs that in memory.
const MAX_PER_PAGE: u64 = 50_000;

pub(super) fn zone<'s>(state: &'s State, ctx: &Ctx) -> Result<&'s Zone, ApiError> {
    state
        .zone_by_id(ctx.param("zone_id"))
        .ok_or_else(|| ApiError::no_route(&ctx.path))
}

pub(super) fn record_not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, 81044, "Record does not exist.")
}

/// Cloudflare's answer to a create beyond the zone's record quota (code as reported by users;
/// the API documentation does not list it).
fn quota_exceeded() -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, 81045, "Record quota exceeded.")
}

/// Refuses one more record in a zone already holding its quota.
pub(super) fn check_quota(zone: &Zone, records: &[SimDnsRecord]) -> Result<(), ApiError> {
    match zone.record_quota {
        Some(quota) if records.len() >= quota => Err(quota_exceeded()),
        _ => Ok(()),
    }
}

pub(super) fn list(state: &State, ctx: &Ctx) -> Result<Reply, ApiError> {
    let zone = zone(state, ctx)?;
    let q = &ctx.query;
    let paging = q.paging(100, 1, MAX_PER_PAGE)?;
    let proxied = q.bool("proxied")?;
    let any = q
        .get("match")
        .is_some_and(|m| m.eq_ignore_ascii_case("any"));
    let mut records: Vec<&SimDnsRecord> = state
        .records
        .get(&zone.id)
        .into_iter()
        .flatten()
        .filter(|r| {
            let mut verdicts = predicates(q, r, &zone.name);
            if let Some(p) = proxied {
                verdicts.push(r.proxied == p);
            }
            if verdicts.is_empty() {
                true
            } else if any {
                verdicts.iter().any(|v| *v)
            } else {
                verdicts.iter().all(|v| *v)
            }
        })
        .collect();
    sort(&mut records, q);
    let items = records.into_iter().map(record_json).collect();
    let (page, info) = paging.apply(items);
    Ok(Reply::list(page, info))
}

/// One verdict per filter present in the query; name, content, comment and tags ignore case.
fn predicates(q: &Query, r: &SimDnsRecord, zone_name: &str) -> Vec<bool> {
    let mut verdicts = Vec::new();
    if let Some(t) = q.get("type") {
        verdicts.push(r.record_type.eq_ignore_ascii_case(t));
    }
    let name = r.name.to_lowercase();
    for key in ["name", "name.exact"] {
        if let Some(n) = q.get(key) {
            verdicts.push(name == qualify(n, zone_name));
        }
    }
    text_filters(&mut verdicts, q, "name", &name);
    let content = r.content.to_lowercase();
    for key in ["content", "content.exact"] {
        if let Some(c) = q.get(key) {
            verdicts.push(content == c.to_lowercase());
        }
    }
    text_filters(&mut verdicts, q, "content", &content);
    let comment = r.comment.as_deref().map(str::to_lowercase);
    for key in ["comment", "comment.exact"] {
        if let Some(c) = q.get(key) {
            verdicts.push(comment.as_deref() == Some(c.to_lowercase().as_str()));
        }
    }
    if q.has("comment.present") {
        verdicts.push(comment.is_some());
    }
    if q.has("comment.absent") {
        verdicts.push(comment.is_none());
    }
    if let Some(comment) = &comment {
        text_filters(&mut verdicts, q, "comment", comment);
    } else {
        for op in ["contains", "startswith", "endswith"] {
            if q.get(&format!("comment.{op}")).is_some() {
                verdicts.push(false);
            }
        }
    }
    tag_filters(&mut verdicts, q, &r.tags);
    verdicts
}

/// `<field>.contains`, `.startswith`, `.endswith` on an already lower-cased value.
fn text_filters(verdicts: &mut Vec<bool>, q: &Query, field: &str, value: &str) {
    for (op, test) in TEXT_OPS {
        if let Some(needle) = q.get(&format!("{field}.{op}")) {
            verdicts.push(test(value, &needle.to_lowercase()));
        }
    }
}

type TextTest = fn(&str, &str) -> bool;
const TEXT_OPS: [(&str, TextTest); 3] = [
    ("contains", |v, n| v.contains(n)),
    ("startswith", |v, n| v.starts_with(n)),
    ("endswith", |v, n| v.ends_with(n)),
];

fn tag_filters(verdicts: &mut Vec<bool>, q: &Query, tags: &[String]) {
    let tags: Vec<(String, String)> = tags
        .iter()
        .map(|t| {
            let (n, v) = t.split_once(':').unwrap_or((t.as_str(), ""));
            (n.to_lowercase(), v.to_lowercase())
        })
        .collect();
    let has_name = |name: &str| tags.iter().any(|(n, _)| *n == name.to_lowercase());
    if let Some(tag) = q.get("tag") {
        verdicts.push(match tag.split_once(':') {
            Some((n, v)) => tags
                .iter()
                .any(|t| *t == (n.to_lowercase(), v.to_lowercase())),
            None => has_name(tag),
        });
    }
    if let Some(name) = q.get("tag.present") {
        verdicts.push(has_name(name));
    }
    if let Some(name) = q.get("tag.absent") {
        verdicts.push(!has_name(name));
    }
    let value_ops: [(&str, TextTest); 4] = [
        ("exact", |v, n| v == n),
        TEXT_OPS[0],
        TEXT_OPS[1],
        TEXT_OPS[2],
    ];
    for (op, test) in value_ops {
        if let Some(filter) = q.get(&format!("tag.{op}")) {
            let (name, needle) = filter.split_once(':').unwrap_or((filter, ""));
            let (name, needle) = (name.to_lowercase(), needle.to_lowercase());
            verdicts.push(tags.iter().any(|(n, v)| *n == name && test(v, &needle)));
        }
    }
}

/// `order`/`direction` when asked; otherwise creation order, which keeps pages stable.
fn sort(records: &mut [&SimDnsRecord], q: &Query) {
    let Some(order) = q.get("order") else { return };
    let key = |r: &SimDnsRecord| -> (String, u32, bool) {
        match order {
            "type" => (r.record_type.clone(), 0, false),
            "name" => (r.name.to_lowercase(), 0, false),
            "content" => (r.content.to_lowercase(), 0, false),
            "ttl" => (String::new(), r.ttl, false),
            "proxied" => (String::new(), 0, r.proxied),
            _ => (String::new(), 0, false),
        }
    };
    records.sort_by_key(|r| key(r));
    if q.get("direction")
        .is_some_and(|d| d.eq_ignore_ascii_case("desc"))
    {
        records.reverse();
    }
}

pub(super) fn create(state: &mut State, ctx: &Ctx) -> Result<Reply, ApiError> {
    let zone_id = zone(state, ctx)?.id.clone();
    let record = create_in_zone(state, &zone_id, ctx.object()?)?;
    Ok(Reply::new(record_json(&record)))
}

fn create_in_zone(
    state: &mut State,
    zone_id: &str,
    body: &Map<String, Value>,
) -> Result<SimDnsRecord, ApiError> {
    let zone = state
        .zone_by_id(zone_id)
        .cloned()
        .ok_or_else(|| ApiError::no_route(zone_id))?;
    let draft = parse_draft(body, &zone.name)?;
    let records = state.records.entry(zone.id.clone()).or_default();
    check_conflicts(&draft, records, None)?;
    check_quota(&zone, records)?;
    let at = now();
    let record = stored(draft, hex_id(), &zone, at.clone(), at);
    records.push(record.clone());
    Ok(record)
}

/// Seeds a record as if created through the API; `None` when it fails validation.
pub(crate) fn insert_record(state: &mut State, zone_name: &str, record: &Value) -> Option<String> {
    let zone_id = state.zone_by_name(zone_name)?.id.clone();
    create_in_zone(state, &zone_id, record.as_object()?)
        .ok()
        .map(|r| r.id)
}

pub(super) fn stored(
    draft: Draft,
    id: String,
    zone: &Zone,
    created_on: String,
    modified_on: String,
) -> SimDnsRecord {
    SimDnsRecord {
        id,
        zone_id: zone.id.clone(),
        zone_name: zone.name.clone(),
        record_type: draft.record_type,
        name: draft.name,
        content: draft.content,
        ttl: draft.ttl,
        proxied: draft.proxied,
        priority: draft.priority,
        comment: draft.comment,
        tags: draft.tags,
        created_on,
        modified_on,
    }
}

pub(super) fn get(state: &State, ctx: &Ctx) -> Result<Reply, ApiError> {
    let zone = zone(state, ctx)?;
    let record = state
        .records
        .get(&zone.id)
        .and_then(|list| list.iter().find(|r| r.id == ctx.param("dns_record_id")))
        .ok_or_else(record_not_found)?;
    Ok(Reply::new(record_json(record)))
}

/// PUT replaces every field (left-out ones fall back to defaults); PATCH merges into the record.
pub(super) fn update(state: &mut State, ctx: &Ctx, merge: bool) -> Result<Reply, ApiError> {
    let zone = zone(state, ctx)?.clone();
    let body = ctx.object()?;
    let records = state.records.entry(zone.id.clone()).or_default();
    let id = ctx.param("dns_record_id");
    let index = records
        .iter()
        .position(|r| r.id == id)
        .ok_or_else(record_not_found)?;
    let draft = if merge {
        let mut merged = draft_fields(&records[index]);
        merged.extend(body.iter().map(|(k, v)| (k.clone(), v.clone())));
        parse_draft(&merged, &zone.name)?
    } else {
        parse_draft(body, &zone.name)?
    };
    check_conflicts(&draft, records, Some(id))?;
    let created_on = records[index].created_on.clone();
    let record = stored(draft, id.to_string(), &zone, created_on, now());
    records[index] = record.clone();
    Ok(Reply::new(record_json(&record)))
}

pub(super) fn draft_fields(r: &SimDnsRecord) -> Map<String, Value> {
    let value = json!({
        "type": r.record_type,
        "name": r.name,
        "content": r.content,
        "ttl": r.ttl,
        "proxied": r.proxied,
        "priority": r.priority,
        "comment": r.comment,
        "tags": r.tags,
    });
    value.as_object().cloned().unwrap_or_default()
}

pub(super) fn delete(state: &mut State, ctx: &Ctx) -> Result<Reply, ApiError> {
    let zone_id = zone(state, ctx)?.id.clone();
    let records = state.records.entry(zone_id).or_default();
    let id = ctx.param("dns_record_id");
    let index = records
        .iter()
        .position(|r| r.id == id)
        .ok_or_else(record_not_found)?;
    records.remove(index);
    Ok(Reply::new(json!({ "id": id })))
}

/// The record as Cloudflare answers it; `comment` is left out when unset (the schema types it as a string).
pub(crate) fn record_json(r: &SimDnsRecord) -> Value {
    let mut value = json!({
        "id": r.id,
        "zone_id": r.zone_id,
        "zone_name": r.zone_name,
        "name": r.name,
        "type": r.record_type,
        "content": r.content,
        "proxiable": proxiable(&r.record_type),
        "proxied": r.proxied,
        "ttl": r.ttl,
        "locked": false,
        "settings": {},
        "meta": { "auto_added": false, "source": "primary" },
        "tags": r.tags,
        "created_on": r.created_on,
        "modified_on": r.modified_on,
    });
    if let Some(map) = value.as_object_mut() {
        if let Some(comment) = &r.comment {
            map.insert("comment".into(), Value::String(comment.clone()));
        }
        if let Some(priority) = r.priority {
            map.insert("priority".into(), json!(priority));
        }
    }
    value
}
