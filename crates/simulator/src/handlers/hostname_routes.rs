//! Hostname routes: list, create, get, update (PATCH), soft delete.
//!
//! The schema requires no field; a create without `hostname` or `tunnel_id` (a live tunnel)
//! is refused all the same (400/1001), since it could route nothing. Hostnames are stored
//! normalised (lower-case, leading `*` and `.` and a trailing `.` trimmed; a `*` elsewhere or
//! 255 characters or more are refused) and are unique among the account's live hostname routes
//! (409/1016). `comment` has at most 100 characters, like an IP route's. Routes count against
//! the account's route limit together with IP routes (400/1018). A GET answers a deleted route
//! too, with `deleted_at`; an update or delete of one is 404/1015.
//!
//! The list takes `id`, `hostname` (a case-insensitive substring match, as documented),
//! `tunnel_id`, `comment` (an exact match), `existed_at`, `is_deleted` (live routes unless
//! `true`), `page` and `per_page` (1..=1000, default 20).
use http::StatusCode;
use serde_json::{Map, Value};

use super::Ctx;
use super::network_rules::{ROUTE_COMMENT_MAX, hostname, required_text, text};
use super::networks::{
    DEFAULT_PER_PAGE, HOSTNAME_TAKEN_CODE, MAX_PER_PAGE, check_route_limit, deleted_filter,
    existed, existed_at, hostname_route_json, hostname_route_not_found, live_tunnel,
};
use crate::envelope::{ApiError, Reply};
use crate::network_state::SimHostnameRoute;
use crate::state::{State, now, uuid_id};

pub(super) fn list(state: &State, ctx: &Ctx) -> Result<Reply, ApiError> {
    ctx.check_account(state)?;
    let q = &ctx.query;
    let paging = q.paging(DEFAULT_PER_PAGE, 1, MAX_PER_PAGE)?;
    let deleted = deleted_filter(q)?;
    let existed_at = existed_at(q)?;
    let part = q.get("hostname").map(str::to_ascii_lowercase);
    let items: Vec<Value> = state
        .networks
        .hostname_routes
        .iter()
        .filter(|r| r.deleted_at.is_some() == deleted)
        .filter(|r| q.get("id").is_none_or(|id| r.id.eq_ignore_ascii_case(id)))
        .filter(|r| part.as_deref().is_none_or(|p| r.hostname.contains(p)))
        .filter(|r| {
            q.get("tunnel_id")
                .is_none_or(|id| r.tunnel_id.eq_ignore_ascii_case(id))
        })
        .filter(|r| q.get("comment").is_none_or(|c| r.comment == c))
        .filter(|r| existed_at.is_none_or(|at| existed(&r.created_at, r.deleted_at.as_deref(), at)))
        .map(|r| hostname_route_json(state, r))
        .collect();
    let (page, info) = paging.apply(items);
    Ok(Reply::list(page, info))
}

pub(super) fn create(state: &mut State, ctx: &Ctx) -> Result<Reply, ApiError> {
    ctx.check_account(state)?;
    let route = insert(state, ctx.object()?)?;
    Ok(Reply::new(hostname_route_json(state, &route)))
}

/// Stores a route from a create body, checked with the create's rules.
pub(crate) fn insert(
    state: &mut State,
    body: &Map<String, Value>,
) -> Result<SimHostnameRoute, ApiError> {
    let name = hostname(body)?
        .ok_or_else(|| ApiError::invalid_request("missing required field `hostname`"))?;
    let tunnel_id = live_tunnel(state, &required_text(body, "tunnel_id", usize::MAX)?)?;
    let comment = text(body, "comment", ROUTE_COMMENT_MAX)?.unwrap_or_default();
    hostname_free(state, &name, None)?;
    check_route_limit(state)?;
    let route = SimHostnameRoute {
        id: uuid_id(),
        hostname: name,
        tunnel_id,
        comment,
        created_at: now(),
        deleted_at: None,
    };
    state.networks.hostname_routes.push(route.clone());
    Ok(route)
}

pub(super) fn get(state: &State, ctx: &Ctx) -> Result<Reply, ApiError> {
    ctx.check_account(state)?;
    let route = state
        .networks
        .hostname_route(ctx.param("hostname_route_id"))
        .ok_or_else(hostname_route_not_found)?;
    Ok(Reply::new(hostname_route_json(state, route)))
}

/// Changes the fields sent (`hostname`, `tunnel_id`, `comment`), with the create's rules.
pub(super) fn update(state: &mut State, ctx: &Ctx) -> Result<Reply, ApiError> {
    ctx.check_account(state)?;
    let id = live_id(state, ctx)?;
    let body = ctx.object()?;
    let name = hostname(body)?;
    let tunnel_id = text(body, "tunnel_id", usize::MAX)?
        .map(|id| live_tunnel(state, &id))
        .transpose()?;
    let comment = text(body, "comment", ROUTE_COMMENT_MAX)?;
    if let Some(name) = &name {
        hostname_free(state, name, Some(&id))?;
    }
    let route = state
        .networks
        .hostname_route_mut(&id)
        .ok_or_else(hostname_route_not_found)?;
    if let Some(name) = name {
        route.hostname = name;
    }
    if let Some(tunnel_id) = tunnel_id {
        route.tunnel_id = tunnel_id;
    }
    if let Some(comment) = comment {
        route.comment = comment;
    }
    let route = route.clone();
    Ok(Reply::new(hostname_route_json(state, &route)))
}

/// Soft-deletes a route and answers it.
pub(super) fn delete(state: &mut State, ctx: &Ctx) -> Result<Reply, ApiError> {
    ctx.check_account(state)?;
    let id = live_id(state, ctx)?;
    let route = state
        .networks
        .hostname_route_mut(&id)
        .ok_or_else(hostname_route_not_found)?;
    route.deleted_at = Some(now());
    let route = route.clone();
    Ok(Reply::new(hostname_route_json(state, &route)))
}

/// The stored id of the live route the path names.
fn live_id(state: &State, ctx: &Ctx) -> Result<String, ApiError> {
    state
        .networks
        .hostname_route(ctx.param("hostname_route_id"))
        .filter(|r| r.deleted_at.is_none())
        .map(|r| r.id.clone())
        .ok_or_else(hostname_route_not_found)
}

fn hostname_free(state: &State, name: &str, except: Option<&str>) -> Result<(), ApiError> {
    match state.networks.hostname_route_for(name, except) {
        None => Ok(()),
        Some(_) => Err(ApiError::new(
            StatusCode::CONFLICT,
            HOSTNAME_TAKEN_CODE,
            format!("A hostname route for {name:?} already exists"),
        )),
    }
}
