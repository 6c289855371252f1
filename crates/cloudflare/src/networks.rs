//! Private networks, part one: virtual networks and IP (CIDR) routes
//! (`/accounts/{account_id}/teamnet/…`). IP routes are changed and deleted by route id; the
//! CIDR-in-path endpoints were removed on 2026-10-05 and are not used.
//!
//! Deletes are soft on Cloudflare: a deleted object is listed again only with
//! `is_deleted=true`. Lists send `is_deleted=false` unless told otherwise, since lists that
//! leave it out returned deleted objects too before 2025-12-01.
use http::Method;
use jiff::Timestamp;

use super::engine::{Call, CloudflareClient};
use super::error::CloudflareError;
use super::networks_models::{
    IpRoute, IpRouteUpdate, NewIpRoute, NewVirtualNetwork, VirtualNetwork, VirtualNetworkUpdate,
};

/// Largest page of the IP route and hostname route lists (the schema's `per_page` 1..=1000).
pub const MAX_ROUTES_PER_PAGE: u32 = 1000;

/// Filters of the virtual network list (the schema's: it has no `comment` filter, so a
/// network is found by `name` and its comment checked after). The list is not paged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VirtualNetworkFilter {
    pub id: Option<String>,
    /// Exact name.
    pub name: Option<String>,
    /// `Some(true)`: the default network only; `Some(false)`: every other one.
    pub is_default: Option<bool>,
    /// `Some(false)` (the default): live networks; `Some(true)`: deleted ones only; `None`:
    /// not sent, which is Cloudflare's live-only default since 2025-12-01.
    pub is_deleted: Option<bool>,
}

impl Default for VirtualNetworkFilter {
    fn default() -> Self {
        Self {
            id: None,
            name: None,
            is_default: None,
            is_deleted: Some(false),
        }
    }
}

impl VirtualNetworkFilter {
    /// Live networks called exactly `name`.
    pub fn named(name: impl Into<String>) -> Self {
        Self {
            name: Some(name.into()),
            ..Self::default()
        }
    }

    fn query(&self) -> Vec<(&'static str, String)> {
        let mut query = Vec::new();
        push(&mut query, "id", self.id.as_deref());
        push(&mut query, "name", self.name.as_deref());
        if let Some(default) = self.is_default {
            query.push(("is_default", default.to_string()));
        }
        if let Some(deleted) = self.is_deleted {
            query.push(("is_deleted", deleted.to_string()));
        }
        query
    }
}

/// Filters of the IP route list that a reconciler uses; unset fields are not sent. Left out:
/// `tun_types` (cftunnel routes through cloudflared tunnels only, which every tunnel id it
/// filters by already is).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IpRouteFilter {
    pub tunnel_id: Option<String>,
    pub virtual_network_id: Option<String>,
    pub route_id: Option<String>,
    /// Routes with this comment (whether Cloudflare matches it exactly or as a part is not
    /// documented: check the comment of each route listed).
    pub comment: Option<String>,
    /// Routes within this range (CIDR).
    pub network_subset: Option<String>,
    /// Routes containing this range (CIDR). With `network_subset` set to the same range: that
    /// exact range, as cloudflared looks a route up.
    pub network_superset: Option<String>,
    /// Routes that existed (created, not yet deleted) at this time.
    pub existed_at: Option<Timestamp>,
    /// `Some(false)` (the default): live routes; `Some(true)`: deleted ones only; `None`: not
    /// sent.
    pub is_deleted: Option<bool>,
    /// Page size of the walk, 1..=1000 (default 1000).
    pub per_page: Option<u32>,
}

impl Default for IpRouteFilter {
    fn default() -> Self {
        Self {
            tunnel_id: None,
            virtual_network_id: None,
            route_id: None,
            comment: None,
            network_subset: None,
            network_superset: None,
            existed_at: None,
            is_deleted: Some(false),
            per_page: None,
        }
    }
}

impl IpRouteFilter {
    /// Live routes through `tunnel_id`.
    pub fn through_tunnel(tunnel_id: impl Into<String>) -> Self {
        Self {
            tunnel_id: Some(tunnel_id.into()),
            ..Self::default()
        }
    }

    /// The live route of exactly `network` in `virtual_network_id` (at most one exists).
    pub fn exact(network: impl Into<String>, virtual_network_id: impl Into<String>) -> Self {
        let network = network.into();
        Self {
            virtual_network_id: Some(virtual_network_id.into()),
            network_subset: Some(network.clone()),
            network_superset: Some(network),
            ..Self::default()
        }
    }

    fn query(&self) -> Vec<(&'static str, String)> {
        let mut query = Vec::new();
        push(&mut query, "tunnel_id", self.tunnel_id.as_deref());
        push(
            &mut query,
            "virtual_network_id",
            self.virtual_network_id.as_deref(),
        );
        push(&mut query, "route_id", self.route_id.as_deref());
        push(&mut query, "comment", self.comment.as_deref());
        push(&mut query, "network_subset", self.network_subset.as_deref());
        push(
            &mut query,
            "network_superset",
            self.network_superset.as_deref(),
        );
        if let Some(at) = self.existed_at {
            query.push(("existed_at", at.to_string()));
        }
        if let Some(deleted) = self.is_deleted {
            query.push(("is_deleted", deleted.to_string()));
        }
        query
    }
}

pub(crate) fn push(
    query: &mut Vec<(&'static str, String)>,
    key: &'static str,
    value: Option<&str>,
) {
    if let Some(value) = value {
        query.push((key, value.to_string()));
    }
}

pub(crate) fn routes_page_size(per_page: Option<u32>) -> u32 {
    per_page
        .unwrap_or(MAX_ROUTES_PER_PAGE)
        .clamp(1, MAX_ROUTES_PER_PAGE)
}

impl CloudflareClient {
    /// Every virtual network matching `filter` (one answer: the list is not paged).
    pub async fn list_virtual_networks(
        &self,
        account_id: &str,
        filter: &VirtualNetworkFilter,
    ) -> Result<Vec<VirtualNetwork>, CloudflareError> {
        let path = ["accounts", account_id, "teamnet", "virtual_networks"];
        let mut call = Call::get("vnet.list", &path);
        call.query = filter.query();
        Ok(self.fetch_page(call).await?.items)
    }

    /// Creates a virtual network. Retried after timeouts and 5xx like every call; a lost
    /// answer makes the retry fail as a name already taken
    /// ([`CloudflareError::is_virtual_network_name_exists`]): the caller finds it by name.
    pub async fn create_virtual_network(
        &self,
        account_id: &str,
        network: &NewVirtualNetwork,
    ) -> Result<VirtualNetwork, CloudflareError> {
        network.validate()?;
        let path = ["accounts", account_id, "teamnet", "virtual_networks"];
        self.fetch(Call::with_json(
            "vnet.create",
            Method::POST,
            &path,
            network,
        )?)
        .await
    }

    /// Changes the fields `update` sets.
    pub async fn update_virtual_network(
        &self,
        account_id: &str,
        network_id: &str,
        update: &VirtualNetworkUpdate,
    ) -> Result<VirtualNetwork, CloudflareError> {
        update.validate()?;
        let path = [
            "accounts",
            account_id,
            "teamnet",
            "virtual_networks",
            network_id,
        ];
        self.fetch(Call::with_json(
            "vnet.update",
            Method::PATCH,
            &path,
            update,
        )?)
        .await
    }

    /// Deletes a virtual network (no body). Refused while IP routes use it
    /// ([`CloudflareError::is_virtual_network_in_use`]): delete or move them first. A 404
    /// means it is already gone.
    pub async fn delete_virtual_network(
        &self,
        account_id: &str,
        network_id: &str,
    ) -> Result<(), CloudflareError> {
        let path = [
            "accounts",
            account_id,
            "teamnet",
            "virtual_networks",
            network_id,
        ];
        self.execute::<serde::de::IgnoredAny>(Call::delete("vnet.delete", &path))
            .await?;
        Ok(())
    }

    /// Every IP route matching `filter`, all pages.
    pub async fn list_ip_routes(
        &self,
        account_id: &str,
        filter: &IpRouteFilter,
    ) -> Result<Vec<IpRoute>, CloudflareError> {
        let path = ["accounts", account_id, "teamnet", "routes"];
        let per_page = routes_page_size(filter.per_page);
        self.fetch_all("route.list", &path, filter.query(), per_page)
            .await
    }

    /// Creates an IP route. Refused when the range is routed in that network already
    /// ([`CloudflareError::is_route_exists`], also what a retry after a lost answer gets) or
    /// the account holds as many routes as it may ([`CloudflareError::is_route_limit_reached`]).
    pub async fn create_ip_route(
        &self,
        account_id: &str,
        route: &NewIpRoute,
    ) -> Result<IpRoute, CloudflareError> {
        route.validate()?;
        let path = ["accounts", account_id, "teamnet", "routes"];
        self.fetch(Call::with_json("route.create", Method::POST, &path, route)?)
            .await
    }

    /// Changes the fields `update` sets; the route keeps its id.
    pub async fn update_ip_route(
        &self,
        account_id: &str,
        route_id: &str,
        update: &IpRouteUpdate,
    ) -> Result<IpRoute, CloudflareError> {
        update.validate()?;
        let path = ["accounts", account_id, "teamnet", "routes", route_id];
        self.fetch(Call::with_json(
            "route.update",
            Method::PATCH,
            &path,
            update,
        )?)
        .await
    }

    /// Deletes an IP route (no body); a 404 (code 1015) means it is already gone.
    pub async fn delete_ip_route(
        &self,
        account_id: &str,
        route_id: &str,
    ) -> Result<(), CloudflareError> {
        let path = ["accounts", account_id, "teamnet", "routes", route_id];
        self.execute::<serde::de::IgnoredAny>(Call::delete("route.delete", &path))
            .await?;
        Ok(())
    }
}
