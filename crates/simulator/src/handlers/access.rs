//! Zero Trust Access: the organization, and what every Access operation shares (the
//! organization check, the errors, the JSON of applications and policies).
//!
//! The errors copy what Cloudflare is reported to answer; the codes are not in its published
//! list. An account without a Zero Trust organization: code 9999
//! `access.api.error.not_enabled: Access is not enabled` on every Access operation (reported
//! for the organization and the applications; the HTTP status is not reported, 400 is the
//! simulator's choice). An unknown application or policy: 404/12135
//! `access.api.error.not_found`. A refused body: 400/12130
//! `access.api.error.invalid_request: <detail>`. A policy still used by applications cannot be
//! deleted: 409/12130 `access.api.error.conflict: …` (the refusal, its status and its code are
//! guesses).
use http::StatusCode;
use serde_json::{Value, json};

use super::Ctx;
use crate::access_state::{SimAccessApp, SimAccessOrganization, SimAccessPolicy};
use crate::envelope::{ApiError, Reply};
use crate::state::State;

/// Code and message answered for an account without a Zero Trust organization.
pub(crate) const NOT_ENABLED_CODE: u32 = 9999;
const NOT_ENABLED: &str = "access.api.error.not_enabled: Access is not enabled";
/// Code of an unknown application or policy.
pub(crate) const NOT_FOUND_CODE: u32 = 12135;
/// Code of a refused request.
pub(crate) const INVALID_CODE: u32 = 12130;

/// Default and largest page of the Access lists (the simulator's choice: the subset declares
/// no paging, the current API pages them).
pub(super) const DEFAULT_PER_PAGE: u64 = 20;
pub(super) const MAX_PER_PAGE: u64 = 1000;

pub(super) fn not_enabled() -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, NOT_ENABLED_CODE, NOT_ENABLED)
}

pub(super) fn not_found() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        NOT_FOUND_CODE,
        "access.api.error.not_found",
    )
}

pub(super) fn invalid(detail: impl std::fmt::Display) -> ApiError {
    ApiError::new(
        StatusCode::BAD_REQUEST,
        INVALID_CODE,
        format!("access.api.error.invalid_request: {detail}"),
    )
}

pub(super) fn conflict(detail: impl std::fmt::Display) -> ApiError {
    ApiError::new(
        StatusCode::CONFLICT,
        INVALID_CODE,
        format!("access.api.error.conflict: {detail}"),
    )
}

/// The path's account, refused unless it is the simulated one and has an organization.
pub(super) fn enabled<'s>(
    state: &'s State,
    ctx: &Ctx,
) -> Result<&'s SimAccessOrganization, ApiError> {
    ctx.check_account(state)?;
    state.access.organization.as_ref().ok_or_else(not_enabled)
}

pub(super) fn organization(state: &State, ctx: &Ctx) -> Result<Reply, ApiError> {
    let org = enabled(state, ctx)?;
    Ok(Reply::new(json!({
        "name": org.name,
        "auth_domain": org.auth_domain,
        "created_at": org.created_at,
        "updated_at": org.updated_at,
        "is_ui_read_only": false,
        "auto_redirect_to_identity": false,
        "session_duration": "24h",
    })))
}

/// A reusable policy as answered: `reusable` is always true, `app_count` counts its links.
pub(super) fn policy_json(state: &State, policy: &SimAccessPolicy) -> Value {
    json!({
        "id": policy.id,
        "name": policy.name,
        "decision": policy.decision,
        "include": policy.include,
        "exclude": policy.exclude,
        "require": policy.require,
        "session_duration": policy.session_duration,
        "created_at": policy.created_at,
        "updated_at": policy.updated_at,
        "reusable": true,
        "app_count": state.access.app_count(&policy.id),
    })
}

/// An application as answered, its policies in full with their precedence, in that order.
pub(super) fn app_json(state: &State, app: &SimAccessApp) -> Value {
    let policies: Vec<Value> = app
        .policies
        .iter()
        .filter_map(|link| {
            let mut policy = policy_json(state, state.access.policy(&link.id)?);
            if let Some(fields) = policy.as_object_mut() {
                fields.insert("precedence".into(), json!(link.precedence));
            }
            Some(policy)
        })
        .collect();
    json!({
        "id": app.id,
        "aud": app.aud,
        "type": app.app_type,
        "name": app.name,
        "domain": app.domain,
        "self_hosted_domains": app.self_hosted_domains,
        "session_duration": app.session_duration,
        "policies": policies,
        "created_at": app.created_at,
        "updated_at": app.updated_at,
    })
}

/// The `{id}` result of a delete, answered 202 as the subset declares.
pub(super) fn deleted(id: &str) -> Reply {
    Reply::new(json!({ "id": id })).with_status(StatusCode::ACCEPTED)
}
