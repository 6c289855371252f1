//! Private networks: what the virtual network, IP route and hostname route operations share
//! (their errors, the JSON of each object, the `existed_at` and `is_deleted` filters).
//!
//! Errors. Only one code is reported for these operations: 404/1015 "You are trying to modify
//! the route for a network that isn't routed" for an IP route that is unknown or deleted. The
//! others are undocumented; the simulator's choices, each inferred, are:
//! - 409/1014: a live IP route already holds this range in this virtual network;
//! - 404/1015: also an unknown (or deleted) hostname route;
//! - 409/1016: a live hostname route already holds this hostname (hostnames are unique
//!   account-wide);
//! - 400/1017: a virtual network still used by live IP routes cannot be deleted (unless
//!   `force=true`, which `cloudflared tunnel vnet delete -f` sends; neither schema has it);
//! - 400/1018: the account holds as many live routes (IP and hostname together) as its limit;
//! - 404/1019: an unknown (or deleted) virtual network in the path;
//! - 409/1020: a live virtual network already has this name (cloudflared resolves a name to
//!   exactly one network);
//! - 400/1021: the default virtual network cannot be deleted, nor stop being the default but by
//!   making another one the default;
//! - 400/1001: a body field missing or invalid, a `tunnel_id` or `virtual_network_id` in the
//!   body naming nothing live, a query value of the wrong shape.
use http::StatusCode;
use serde_json::{Value, json};

use crate::envelope::ApiError;
use crate::network_state::{SimHostnameRoute, SimIpRoute, SimVirtualNetwork};
use crate::query::Query;
use crate::state::State;

pub(crate) const ROUTE_EXISTS_CODE: u32 = 1014;
pub(crate) const ROUTE_NOT_FOUND_CODE: u32 = 1015;
pub(crate) const HOSTNAME_TAKEN_CODE: u32 = 1016;
pub(crate) const NETWORK_IN_USE_CODE: u32 = 1017;
pub(crate) const ROUTE_LIMIT_CODE: u32 = 1018;
pub(crate) const NETWORK_NOT_FOUND_CODE: u32 = 1019;
pub(crate) const NETWORK_NAME_TAKEN_CODE: u32 = 1020;
pub(crate) const DEFAULT_NETWORK_CODE: u32 = 1021;

/// Page size of the route lists without `per_page`, and its bounds (the schema's 1..=1000).
pub(super) const DEFAULT_PER_PAGE: u64 = 20;
pub(super) const MAX_PER_PAGE: u64 = 1000;

pub(super) fn route_not_found() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        ROUTE_NOT_FOUND_CODE,
        "You are trying to modify the route for a network that isn't routed.",
    )
}

pub(super) fn hostname_route_not_found() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        ROUTE_NOT_FOUND_CODE,
        "Hostname route not found",
    )
}

pub(super) fn network_not_found() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        NETWORK_NOT_FOUND_CODE,
        "Virtual network not found",
    )
}

pub(super) fn route_limit(limit: usize) -> ApiError {
    ApiError::new(
        StatusCode::BAD_REQUEST,
        ROUTE_LIMIT_CODE,
        format!("The account already has {limit} routes, the most it may hold"),
    )
}

/// Refuses a create that would take the account past its route limit.
pub(super) fn check_route_limit(state: &State) -> Result<(), ApiError> {
    let limit = state.networks.route_limit;
    if state.networks.live_routes() >= limit {
        return Err(route_limit(limit));
    }
    Ok(())
}

/// The live tunnel a body's `tunnel_id` names, by its stored id.
pub(super) fn live_tunnel(state: &State, id: &str) -> Result<String, ApiError> {
    state
        .tunnel(id)
        .filter(|t| t.deleted_at.is_none())
        .map(|t| t.id.clone())
        .ok_or_else(|| ApiError::invalid_request(format!("`tunnel_id` {id:?}: no such tunnel")))
}

/// `is_deleted`: `true` lists only deleted objects, `false` or nothing only live ones (the
/// API's default since 2025-12-01).
pub(super) fn deleted_filter(query: &Query) -> Result<bool, ApiError> {
    Ok(query.bool("is_deleted")?.unwrap_or(false))
}

/// `existed_at`: only objects created at or before it and not deleted by then; `None` when
/// absent.
pub(super) fn existed_at(query: &Query) -> Result<Option<jiff::Timestamp>, ApiError> {
    query
        .get("existed_at")
        .map(|at| {
            at.parse::<jiff::Timestamp>().map_err(|_| {
                ApiError::invalid_request(format!(
                    "`existed_at` must be an RFC 3339 time, not {at:?}"
                ))
            })
        })
        .transpose()
}

/// Whether an object created at `created_at` and deleted at `deleted_at` existed at `at`.
pub(super) fn existed(created_at: &str, deleted_at: Option<&str>, at: jiff::Timestamp) -> bool {
    let time = |s: &str| s.parse::<jiff::Timestamp>().ok();
    let created = time(created_at).is_some_and(|c| c <= at);
    let gone = deleted_at.and_then(time).is_some_and(|d| d <= at);
    created && !gone
}

pub(super) fn network_json(network: &SimVirtualNetwork) -> Value {
    json!({
        "id": network.id,
        "name": network.name,
        "comment": network.comment,
        "is_default_network": network.is_default_network,
        "created_at": network.created_at,
        "deleted_at": network.deleted_at,
    })
}

/// An IP route as the writes answer it (the schema's `tunnel_route`).
pub(super) fn route_json(route: &SimIpRoute) -> Value {
    json!({
        "id": route.id,
        "network": route.network,
        "tunnel_id": route.tunnel_id,
        "virtual_network_id": route.virtual_network_id,
        "comment": route.comment,
        "created_at": route.created_at,
        "deleted_at": route.deleted_at,
    })
}

/// An IP route as the list answers it (the schema's `tunnel_teamnet`): with its tunnel's type
/// and name and its network's name.
pub(super) fn listed_route_json(state: &State, route: &SimIpRoute) -> Value {
    let mut json = route_json(route);
    json["tun_type"] = json!("cfd_tunnel");
    json["tunnel_name"] = json!(tunnel_name(state, &route.tunnel_id));
    let network = state
        .networks
        .virtual_networks
        .iter()
        .find(|n| n.id == route.virtual_network_id);
    json["virtual_network_name"] = json!(network.map(|n| n.name.as_str()).unwrap_or_default());
    json
}

pub(super) fn hostname_route_json(state: &State, route: &SimHostnameRoute) -> Value {
    json!({
        "id": route.id,
        "hostname": route.hostname,
        "tunnel_id": route.tunnel_id,
        "tunnel_name": tunnel_name(state, &route.tunnel_id),
        "tun_type": "cfd_tunnel",
        "comment": route.comment,
        "created_at": route.created_at,
        "deleted_at": route.deleted_at,
    })
}

fn tunnel_name<'s>(state: &'s State, tunnel_id: &str) -> &'s str {
    state
        .tunnel(tunnel_id)
        .map(|t| t.name.as_str())
        .unwrap_or_default()
}
