//! IP (CIDR) routes: list, create, update (PATCH), soft delete, the last two by route id (the
//! CIDR-in-path endpoints were removed on 2026-10-05 and are not served).
//!
//! A create needs `network` (CIDR; host bits set are refused) and `tunnel_id` (a live
//! tunnel); `virtual_network_id` (a live network) defaults to the account's default network,
//! `comment` (at most 100 characters) to `""`. A range is unique among a network's live routes
//! (409/1014); another network may route the same range. Routes count against the account's
//! route limit together with hostname routes (400/1018).
//!
//! The list takes the schema's filters: `tunnel_id`, `virtual_network_id`, `route_id`,
//! `comment` (an exact match; whether Cloudflare's is exact is not documented),
//! `network_subset` (routes within that range), `network_superset` (routes containing it; both
//! together with one range find that exact route), `existed_at`, `tun_types` (comma-separated;
//! every simulated route is `cfd_tunnel`), `is_deleted` (live routes unless `true`), `page` and
//! `per_page` (1..=1000, default 20).
use http::StatusCode;
use serde_json::{Map, Value};

use super::Ctx;
use super::network_rules::{ROUTE_COMMENT_MAX, cidr_filter, network, required_text, text};
use super::networks::{
    DEFAULT_PER_PAGE, MAX_PER_PAGE, ROUTE_EXISTS_CODE, check_route_limit, deleted_filter, existed,
    existed_at, listed_route_json, live_tunnel, route_json, route_not_found,
};
use crate::cidr::Cidr;
use crate::envelope::{ApiError, Reply};
use crate::network_state::SimIpRoute;
use crate::state::{State, now, uuid_id};

pub(super) fn list(state: &State, ctx: &Ctx) -> Result<Reply, ApiError> {
    ctx.check_account(state)?;
    let q = &ctx.query;
    let paging = q.paging(DEFAULT_PER_PAGE, 1, MAX_PER_PAGE)?;
    let deleted = deleted_filter(q)?;
    let existed_at = existed_at(q)?;
    let subset = cidr_filter(q.get("network_subset"), "network_subset")?;
    let superset = cidr_filter(q.get("network_superset"), "network_superset")?;
    let cfd_tunnels = q
        .get("tun_types")
        .is_none_or(|types| types.split(',').any(|t| t.trim() == "cfd_tunnel"));
    let items: Vec<Value> = state
        .networks
        .ip_routes
        .iter()
        .filter(|_| cfd_tunnels)
        .filter(|r| r.deleted_at.is_some() == deleted)
        .filter(|r| {
            q.get("route_id")
                .is_none_or(|id| r.id.eq_ignore_ascii_case(id))
        })
        .filter(|r| {
            q.get("tunnel_id")
                .is_none_or(|id| r.tunnel_id.eq_ignore_ascii_case(id))
        })
        .filter(|r| {
            q.get("virtual_network_id")
                .is_none_or(|id| r.virtual_network_id.eq_ignore_ascii_case(id))
        })
        .filter(|r| q.get("comment").is_none_or(|c| r.comment == c))
        .filter(|r| {
            let range = Cidr::parse(&r.network).ok();
            let within = subset.is_none_or(|s| range.is_some_and(|r| s.contains(&r)));
            let around = superset.is_none_or(|s| range.is_some_and(|r| r.contains(&s)));
            within && around
        })
        .filter(|r| existed_at.is_none_or(|at| existed(&r.created_at, r.deleted_at.as_deref(), at)))
        .map(|r| listed_route_json(state, r))
        .collect();
    let (page, info) = paging.apply(items);
    Ok(Reply::list(page, info))
}

pub(super) fn create(state: &mut State, ctx: &Ctx) -> Result<Reply, ApiError> {
    ctx.check_account(state)?;
    let route = insert(state, ctx.object()?)?;
    Ok(Reply::new(route_json(&route)))
}

/// Stores a route from a create body, checked with the create's rules.
pub(crate) fn insert(state: &mut State, body: &Map<String, Value>) -> Result<SimIpRoute, ApiError> {
    let cidr = network(body)?
        .ok_or_else(|| ApiError::invalid_request("missing required field `network`"))?;
    let tunnel_id = live_tunnel(state, &required_text(body, "tunnel_id", usize::MAX)?)?;
    let network_id = match text(body, "virtual_network_id", usize::MAX)? {
        Some(id) => live_network(state, &id)?,
        None => state
            .networks
            .default_network()
            .map(|n| n.id.clone())
            .ok_or_else(|| ApiError::invalid_request("the account has no default network"))?,
    };
    let comment = text(body, "comment", ROUTE_COMMENT_MAX)?.unwrap_or_default();
    range_free(state, &network_id, &cidr, None)?;
    check_route_limit(state)?;
    let route = SimIpRoute {
        id: uuid_id(),
        network: cidr,
        tunnel_id,
        virtual_network_id: network_id,
        comment,
        created_at: now(),
        deleted_at: None,
    };
    state.networks.ip_routes.push(route.clone());
    Ok(route)
}

/// Changes the fields sent (`network`, `tunnel_id`, `virtual_network_id`, `comment`), with
/// the create's rules; the route keeps its id.
pub(super) fn update(state: &mut State, ctx: &Ctx) -> Result<Reply, ApiError> {
    ctx.check_account(state)?;
    let current = live(state, ctx)?.clone();
    let body = ctx.object()?;
    let cidr = network(body)?.unwrap_or(current.network);
    let tunnel_id = match text(body, "tunnel_id", usize::MAX)? {
        Some(id) => live_tunnel(state, &id)?,
        None => current.tunnel_id,
    };
    let network_id = match text(body, "virtual_network_id", usize::MAX)? {
        Some(id) => live_network(state, &id)?,
        None => current.virtual_network_id,
    };
    let comment = text(body, "comment", ROUTE_COMMENT_MAX)?;
    range_free(state, &network_id, &cidr, Some(&current.id))?;
    let route = state
        .networks
        .ip_route_mut(&current.id)
        .ok_or_else(route_not_found)?;
    route.network = cidr;
    route.tunnel_id = tunnel_id;
    route.virtual_network_id = network_id;
    if let Some(comment) = comment {
        route.comment = comment;
    }
    Ok(Reply::new(route_json(route)))
}

/// Soft-deletes a route and answers it; an unknown or deleted route is 404/1015.
pub(super) fn delete(state: &mut State, ctx: &Ctx) -> Result<Reply, ApiError> {
    ctx.check_account(state)?;
    let id = live(state, ctx)?.id.clone();
    let route = state
        .networks
        .ip_route_mut(&id)
        .ok_or_else(route_not_found)?;
    route.deleted_at = Some(now());
    Ok(Reply::new(route_json(route)))
}

/// The live route the path names.
fn live<'s>(state: &'s State, ctx: &Ctx) -> Result<&'s SimIpRoute, ApiError> {
    state
        .networks
        .ip_route(ctx.param("route_id"))
        .filter(|r| r.deleted_at.is_none())
        .ok_or_else(route_not_found)
}

/// The stored id of the live network a body names.
fn live_network(state: &State, id: &str) -> Result<String, ApiError> {
    state
        .networks
        .live_network(id)
        .map(|n| n.id.clone())
        .ok_or_else(|| {
            ApiError::invalid_request(format!("`virtual_network_id` {id:?}: no such network"))
        })
}

fn range_free(
    state: &State,
    network_id: &str,
    cidr: &str,
    except: Option<&str>,
) -> Result<(), ApiError> {
    match state.networks.ip_route_for(network_id, cidr, except) {
        None => Ok(()),
        Some(_) => Err(ApiError::new(
            StatusCode::CONFLICT,
            ROUTE_EXISTS_CODE,
            format!("A route for {cidr} already exists in this virtual network"),
        )),
    }
}
