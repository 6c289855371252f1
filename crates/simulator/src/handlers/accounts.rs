//! Token verification, the account list and zones.
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::Ctx;
use crate::envelope::{ApiError, Reply};
use crate::query::matches_operator;
use crate::state::{State, Zone};

pub(super) fn verify_token(_state: &State, token: &str) -> Result<Reply, ApiError> {
    Ok(
        Reply::new(json!({ "id": token_id(token), "status": "active" }))
            .with_message(10000, "This API Token is valid and active"),
    )
}

/// A stable 32-hex identifier for a token that does not reveal it.
fn token_id(token: &str) -> String {
    let digest = Sha256::digest(token.as_bytes());
    digest.iter().take(16).map(|b| format!("{b:02x}")).collect()
}

pub(super) fn list_accounts(state: &State, ctx: &Ctx) -> Result<Reply, ApiError> {
    let paging = ctx.query.paging(20, 5, 50)?;
    let account = json!({
        "id": state.account_id,
        "name": state.account_name,
        "type": "standard",
        "settings": { "enforce_twofactor": false, "use_account_custom_ns_by_default": false },
        "created_on": state.account_created_on,
    });
    let items = match ctx.query.get("name") {
        Some(name) if !matches_operator(&state.account_name, name) => Vec::new(),
        _ => vec![account],
    };
    let (page, info) = paging.apply(items);
    Ok(Reply::list(page, info))
}

pub(super) fn list_zones(state: &State, ctx: &Ctx) -> Result<Reply, ApiError> {
    let paging = ctx.query.paging(20, 5, 50)?;
    let q = &ctx.query;
    let items: Vec<Value> = state
        .zones
        .iter()
        .filter(|z| q.get("name").is_none_or(|f| matches_operator(&z.name, f)))
        .filter(|z| q.get("status").is_none_or(|s| s == z.status))
        .filter(|_| {
            q.get("account.id")
                .is_none_or(|id| id.eq_ignore_ascii_case(&state.account_id))
        })
        .filter(|_| {
            q.get("account.name")
                .is_none_or(|f| matches_operator(&state.account_name, f))
        })
        .map(|z| zone_json(state, z))
        .collect();
    let (page, info) = paging.apply(items);
    Ok(Reply::list(page, info))
}

pub(super) fn get_zone(state: &State, ctx: &Ctx) -> Result<Reply, ApiError> {
    let zone = state
        .zone_by_id(ctx.param("zone_id"))
        .ok_or_else(|| ApiError::no_route(&ctx.path))?;
    Ok(Reply::new(zone_json(state, zone)))
}

/// A zone carrying every field `zones_zone` requires.
fn zone_json(state: &State, zone: &Zone) -> Value {
    json!({
        "id": zone.id,
        "name": zone.name,
        "status": zone.status,
        "paused": false,
        "type": "full",
        "development_mode": 0,
        "name_servers": ["ada.ns.cloudflare.com", "bob.ns.cloudflare.com"],
        "original_name_servers": null,
        "original_registrar": null,
        "original_dnshost": null,
        "created_on": zone.created_on,
        "modified_on": zone.created_on,
        "activated_on": zone.created_on,
        "owner": { "id": state.account_id, "name": state.account_name, "type": "organization" },
        "account": { "id": state.account_id, "name": state.account_name },
        "meta": {
            "step": 4,
            "custom_certificate_quota": 0,
            "page_rule_quota": 3,
            "phishing_detected": false,
        },
        "permissions": ["#dns_records:edit", "#dns_records:read", "#zone:read"],
        "plan": plan_json(&zone.plan),
    })
}

/// The zone's plan object (ids are the simulator's own).
fn plan_json(legacy_id: &str) -> Value {
    let (id, name) = match legacy_id {
        "pro" => ("1feeeeeeeeeeeeeeeeeeeeeeeeeeeeee", "Pro Website"),
        "business" => ("2feeeeeeeeeeeeeeeeeeeeeeeeeeeeee", "Business Website"),
        "enterprise" => ("3feeeeeeeeeeeeeeeeeeeeeeeeeeeeee", "Enterprise Website"),
        _ => ("0feeeeeeeeeeeeeeeeeeeeeeeeeeeeee", "Free Website"),
    };
    json!({ "id": id, "name": name, "legacy_id": legacy_id })
}
