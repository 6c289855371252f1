//! Reusable Access policies: list, create, get, update (a whole replacement), delete.
//!
//! `name`, `decision` and `include` are required, as in the subset; `decision` is `allow`,
//! `deny`, `non_identity` or `bypass`; `exclude` and `require` default to none and
//! `session_duration` to `24h`. Rules are checked for the selectors the simulator knows:
//! `email`, `email_domain`, `group`, `service_token`, `any_valid_service_token` and
//! `everyone`; the subset's other selectors are refused as not simulated. Approval and
//! isolation settings are accepted and not kept.
use http::StatusCode;
use serde_json::{Map, Value};

use super::Ctx;
use super::access::{
    DEFAULT_PER_PAGE, MAX_PER_PAGE, conflict, deleted, enabled, invalid, not_found, policy_json,
};
use super::access_rules::{duration, rules};
use crate::access_state::SimAccessPolicy;
use crate::envelope::{ApiError, Reply};
use crate::state::{State, now, uuid_id};

const DECISIONS: [&str; 4] = ["allow", "deny", "non_identity", "bypass"];

/// What a request body says about a policy.
struct PolicyFields {
    name: String,
    decision: String,
    include: Vec<Value>,
    exclude: Vec<Value>,
    require: Vec<Value>,
    session_duration: String,
}

pub(super) fn list(state: &State, ctx: &Ctx) -> Result<Reply, ApiError> {
    enabled(state, ctx)?;
    let paging = ctx.query.paging(DEFAULT_PER_PAGE, 1, MAX_PER_PAGE)?;
    let items = state
        .access
        .policies
        .iter()
        .map(|policy| policy_json(state, policy))
        .collect();
    let (page, info) = paging.apply(items);
    Ok(Reply::list(page, info))
}

pub(super) fn create(state: &mut State, ctx: &Ctx) -> Result<Reply, ApiError> {
    enabled(state, ctx)?;
    let fields = policy_fields(ctx.object()?)?;
    let created_at = now();
    let policy = SimAccessPolicy {
        id: uuid_id(),
        name: fields.name,
        decision: fields.decision,
        include: fields.include,
        exclude: fields.exclude,
        require: fields.require,
        session_duration: fields.session_duration,
        created_at: created_at.clone(),
        updated_at: created_at,
    };
    let answer = policy_json(state, &policy);
    state.access.policies.push(policy);
    Ok(Reply::new(answer).with_status(StatusCode::CREATED))
}

pub(super) fn get(state: &State, ctx: &Ctx) -> Result<Reply, ApiError> {
    enabled(state, ctx)?;
    let policy = state
        .access
        .policy(ctx.param("policy_id"))
        .ok_or_else(not_found)?;
    Ok(Reply::new(policy_json(state, policy)))
}

pub(super) fn update(state: &mut State, ctx: &Ctx) -> Result<Reply, ApiError> {
    enabled(state, ctx)?;
    let id = known_id(state, ctx)?;
    let fields = policy_fields(ctx.object()?)?;
    let policy = state
        .access
        .policies
        .iter_mut()
        .find(|p| p.id == id)
        .ok_or_else(not_found)?;
    policy.name = fields.name;
    policy.decision = fields.decision;
    policy.include = fields.include;
    policy.exclude = fields.exclude;
    policy.require = fields.require;
    policy.session_duration = fields.session_duration;
    policy.updated_at = now();
    let policy = policy.clone();
    Ok(Reply::new(policy_json(state, &policy)))
}

/// Refused while applications link the policy (a guess: deleting it under them is not
/// reported either way, and refusing keeps callers detaching first).
pub(super) fn delete(state: &mut State, ctx: &Ctx) -> Result<Reply, ApiError> {
    enabled(state, ctx)?;
    let id = known_id(state, ctx)?;
    let used = state.access.app_count(&id);
    if used > 0 {
        return Err(conflict(format!(
            "policy is used by {used} application(s); remove it from them first"
        )));
    }
    state.access.policies.retain(|p| p.id != id);
    Ok(deleted(&id))
}

fn known_id(state: &State, ctx: &Ctx) -> Result<String, ApiError> {
    state
        .access
        .policy(ctx.param("policy_id"))
        .map(|p| p.id.clone())
        .ok_or_else(not_found)
}

fn policy_fields(body: &Map<String, Value>) -> Result<PolicyFields, ApiError> {
    let name = match body.get("name") {
        Some(Value::String(name)) if !name.trim().is_empty() => name.clone(),
        _ => return Err(invalid("`name` is required")),
    };
    let decision = match body.get("decision") {
        Some(Value::String(d)) if DECISIONS.contains(&d.as_str()) => d.clone(),
        Some(Value::String(d)) => {
            return Err(invalid(format!(
                "`decision` must be one of allow, deny, non_identity, bypass, not {d:?}"
            )));
        }
        _ => return Err(invalid("`decision` is required")),
    };
    Ok(PolicyFields {
        name,
        decision,
        include: rules(body, "include", true)?,
        exclude: rules(body, "exclude", false)?,
        require: rules(body, "require", false)?,
        session_duration: duration(body, "session_duration", "24h")?,
    })
}
