//! `POST /zones/{zone_id}/dns_records/batch`: deletes, patches, puts, posts in one transaction.
//!
//! The actions run against a copy of the zone's records, each with the single calls' rules
//! (validation, CNAME exclusivity, identical-record refusal) against the records as the earlier
//! actions left them, so the record quota counts the posts after the deletes. The copy replaces
//! the zone only when every action succeeded; the first failure is the answer, its message
//! prefixed with the action (`posts[3]: …`).
use http::StatusCode;
use serde_json::{Map, Value};

use super::Ctx;
use super::dns::{check_quota, draft_fields, record_json, record_not_found, stored, zone};
use super::dns_rules::{check_conflicts, parse_draft};
use crate::envelope::{ApiError, Reply};
use crate::state::{SimDnsRecord, State, Zone, hex_id, now};

const KINDS: [&str; 4] = ["deletes", "patches", "puts", "posts"];

pub(super) fn batch(state: &mut State, ctx: &Ctx) -> Result<Reply, ApiError> {
    let zone = zone(state, ctx)?.clone();
    let body = ctx.object()?;
    let mut lists: Vec<&[Value]> = Vec::with_capacity(KINDS.len());
    for kind in KINDS {
        lists.push(match body.get(kind) {
            None | Some(Value::Null) => &[][..],
            Some(Value::Array(items)) => items.as_slice(),
            Some(_) => {
                return Err(ApiError::dns_validation(format!(
                    "`{kind}` must be an array"
                )));
            }
        });
    }
    let total: usize = lists.iter().map(|l| l.len()).sum();
    if total == 0 {
        return Err(ApiError::dns_validation(
            "a batch needs at least one of deletes, patches, puts or posts",
        ));
    }
    let limit = state.batch_limit(&zone);
    if total > limit {
        return Err(ApiError::dns_validation(format!(
            "a batch may change at most {limit} records on this zone's plan, got {total}"
        )));
    }
    let mut records = state.records.get(&zone.id).cloned().unwrap_or_default();
    let mut results: Vec<Vec<Value>> = vec![Vec::new(); KINDS.len()];
    for (k, (kind, list)) in KINDS.iter().zip(&lists).enumerate() {
        for (i, item) in list.iter().enumerate() {
            let at = |e: ApiError| ApiError {
                message: format!("{kind}[{i}]: {}", e.message),
                ..e
            };
            let item = item
                .as_object()
                .ok_or_else(|| at(ApiError::dns_validation("each action must be an object")))?;
            let record = apply(&mut records, &zone, k, item).map_err(at)?;
            results[k].push(record_json(&record));
        }
    }
    state.records.insert(zone.id.clone(), records);
    let mut result = Map::new();
    for (kind, list) in KINDS.iter().zip(results) {
        result.insert((*kind).to_string(), Value::Array(list));
    }
    Ok(Reply::new(Value::Object(result)))
}

/// One action (`kind` indexes [`KINDS`]) on the working copy; the record it leaves (or removed).
fn apply(
    records: &mut Vec<SimDnsRecord>,
    zone: &Zone,
    kind: usize,
    item: &Map<String, Value>,
) -> Result<SimDnsRecord, ApiError> {
    if kind == 3 {
        let draft = parse_draft(item, &zone.name)?;
        check_conflicts(&draft, records, None)?;
        check_quota(zone, records)?;
        let at = now();
        let record = stored(draft, hex_id(), zone, at.clone(), at);
        records.push(record.clone());
        return Ok(record);
    }
    let id = match item.get("id") {
        Some(Value::String(id)) if !id.is_empty() => id.as_str(),
        _ => {
            return Err(
                ApiError::new(StatusCode::BAD_REQUEST, 1004, "DNS Validation Error")
                    .with_chain(9003, "missing required field `id`"),
            );
        }
    };
    let index = records
        .iter()
        .position(|r| r.id == id)
        .ok_or_else(record_not_found)?;
    if kind == 0 {
        return Ok(records.remove(index));
    }
    let mut fields = item.clone();
    fields.remove("id");
    let draft = if kind == 1 {
        let mut merged = draft_fields(&records[index]);
        merged.extend(fields);
        parse_draft(&merged, &zone.name)?
    } else {
        parse_draft(&fields, &zone.name)?
    };
    check_conflicts(&draft, records, Some(id))?;
    let created_on = records[index].created_on.clone();
    let record = stored(draft, id.to_string(), zone, created_on, now());
    records[index] = record.clone();
    Ok(record)
}
