//! Virtual networks: list, create, update (PATCH), soft delete.
//!
//! `name` is required (at most 256 characters, unique among live networks), `comment` is
//! optional (at most 256). A create makes the new network the default when it sends
//! `is_default_network: true` (what cloudflared and the current SDKs send) or `is_default: true`
//! (the 2024 schema's name); the previous default is demoted. The list takes `id`, `name`,
//! `is_default` (or `is_default_network`) and `is_deleted`; it is not paged (the schema declares
//! no paging for it), so `page` and `per_page` are ignored and every match is answered.
use http::StatusCode;
use serde_json::{Map, Value, json};

use super::Ctx;
use super::network_rules::{NETWORK_TEXT_MAX, flag, required_text, text};
use super::networks::{
    DEFAULT_NETWORK_CODE, NETWORK_IN_USE_CODE, NETWORK_NAME_TAKEN_CODE, deleted_filter,
    network_json, network_not_found,
};
use crate::envelope::{ApiError, Reply};
use crate::network_state::SimVirtualNetwork;
use crate::state::{State, now, uuid_id};

pub(super) fn list(state: &State, ctx: &Ctx) -> Result<Reply, ApiError> {
    ctx.check_account(state)?;
    let q = &ctx.query;
    let deleted = deleted_filter(q)?;
    let default = match q.bool("is_default")? {
        Some(flag) => Some(flag),
        None => q.bool("is_default_network")?,
    };
    let items: Vec<Value> = state
        .networks
        .virtual_networks
        .iter()
        .filter(|n| n.deleted_at.is_some() == deleted)
        .filter(|n| q.get("id").is_none_or(|id| n.id.eq_ignore_ascii_case(id)))
        .filter(|n| q.get("name").is_none_or(|name| n.name == name))
        .filter(|n| default.is_none_or(|d| n.is_default_network == d))
        .map(network_json)
        .collect();
    let count = items.len();
    let info = json!({
        "page": 1,
        "per_page": count,
        "count": count,
        "total_count": count,
        "total_pages": 1,
    });
    Ok(Reply::list(items, info))
}

pub(super) fn create(state: &mut State, ctx: &Ctx) -> Result<Reply, ApiError> {
    ctx.check_account(state)?;
    let network = insert(state, ctx.object()?)?;
    Ok(Reply::new(network_json(&network)))
}

/// Stores a network from a create body, checked with the create's rules.
pub(crate) fn insert(
    state: &mut State,
    body: &Map<String, Value>,
) -> Result<SimVirtualNetwork, ApiError> {
    let name = required_text(body, "name", NETWORK_TEXT_MAX)?;
    let comment = text(body, "comment", NETWORK_TEXT_MAX)?.unwrap_or_default();
    let default = flag(body, "is_default_network")?.unwrap_or(false)
        || flag(body, "is_default")?.unwrap_or(false);
    name_free(state, &name, None)?;
    let network = SimVirtualNetwork {
        id: uuid_id(),
        name,
        comment,
        is_default_network: false,
        created_at: now(),
        deleted_at: None,
    };
    let id = network.id.clone();
    state.networks.virtual_networks.push(network);
    if default {
        state.networks.make_default(&id);
    }
    state
        .networks
        .live_network(&id)
        .cloned()
        .ok_or_else(network_not_found)
}

/// Changes the fields sent (`name`, `comment`, `is_default_network`); `true` makes the network
/// the default and demotes the old one, `false` on the default is refused (400/1021).
pub(super) fn update(state: &mut State, ctx: &Ctx) -> Result<Reply, ApiError> {
    ctx.check_account(state)?;
    let id = live_id(state, ctx)?;
    let body = ctx.object()?;
    let name = text(body, "name", NETWORK_TEXT_MAX)?;
    if name.as_ref().is_some_and(|n| n.trim().is_empty()) {
        return Err(ApiError::invalid_request("`name` must not be blank"));
    }
    let comment = text(body, "comment", NETWORK_TEXT_MAX)?;
    let default = flag(body, "is_default_network")?;
    if let Some(name) = &name {
        name_free(state, name, Some(&id))?;
    }
    let is_default = state
        .networks
        .live_network(&id)
        .is_some_and(|n| n.is_default_network);
    if default == Some(false) && is_default {
        return Err(default_refusal(
            "the default virtual network stays the default until another one is made the default",
        ));
    }
    if default == Some(true) {
        state.networks.make_default(&id);
    }
    let network = state
        .networks
        .network_mut(&id)
        .ok_or_else(network_not_found)?;
    if let Some(name) = name {
        network.name = name;
    }
    if let Some(comment) = comment {
        network.comment = comment;
    }
    Ok(Reply::new(network_json(network)))
}

/// Soft-deletes a network and answers it. Refused for the default network (400/1021) and,
/// unless `force=true`, for a network live IP routes use (400/1017); `force=true` deletes
/// those routes with it.
pub(super) fn delete(state: &mut State, ctx: &Ctx) -> Result<Reply, ApiError> {
    ctx.check_account(state)?;
    let id = live_id(state, ctx)?;
    let force = ctx.query.bool("force")?.unwrap_or(false);
    let network = remove(state, &id, force)?;
    Ok(Reply::new(network_json(&network)))
}

/// The soft delete behind [`delete`] (and the out-of-band delete of the test controls).
pub(crate) fn remove(
    state: &mut State,
    id: &str,
    force: bool,
) -> Result<SimVirtualNetwork, ApiError> {
    let network = state
        .networks
        .live_network(id)
        .ok_or_else(network_not_found)?;
    if network.is_default_network {
        return Err(default_refusal(
            "the default virtual network cannot be deleted; make another one the default first",
        ));
    }
    let id = network.id.clone();
    let routes = state.networks.routes_in(&id);
    if routes > 0 && !force {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            NETWORK_IN_USE_CODE,
            format!(
                "Cannot delete the virtual network: {routes} route(s) use it; delete or move them first"
            ),
        ));
    }
    let at = now();
    state.networks.delete_routes_in(&id, &at);
    let network = state
        .networks
        .network_mut(&id)
        .ok_or_else(network_not_found)?;
    network.deleted_at = Some(at);
    Ok(network.clone())
}

/// The stored id of the live network the path names.
fn live_id(state: &State, ctx: &Ctx) -> Result<String, ApiError> {
    state
        .networks
        .live_network(ctx.param("virtual_network_id"))
        .map(|n| n.id.clone())
        .ok_or_else(network_not_found)
}

fn name_free(state: &State, name: &str, except: Option<&str>) -> Result<(), ApiError> {
    match state.networks.network_named(name, except) {
        None => Ok(()),
        Some(_) => Err(ApiError::new(
            StatusCode::CONFLICT,
            NETWORK_NAME_TAKEN_CODE,
            format!("A virtual network named {name:?} already exists"),
        )),
    }
}

fn default_refusal(message: &str) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, DEFAULT_NETWORK_CODE, message)
}
