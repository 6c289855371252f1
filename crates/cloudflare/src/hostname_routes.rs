//! Private networks, part two: hostname routes (`/accounts/{account_id}/zerotrust/routes/hostname`),
//! newer than the 2024 schema (introduced 2025-09-18). Deletes are soft, as with IP routes.
use http::Method;
use jiff::Timestamp;

use super::engine::{Call, CloudflareClient};
use super::error::CloudflareError;
use super::networks::{push, routes_page_size};
use super::networks_models::{HostnameRoute, HostnameRouteUpdate, NewHostnameRoute};

/// Filters of the hostname route list; unset fields are not sent. All the documented ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostnameRouteFilter {
    pub id: Option<String>,
    /// A case-insensitive part of the hostname (not an exact match: compare each route's
    /// hostname after [`crate::normalize_private_hostname`]).
    pub hostname: Option<String>,
    pub tunnel_id: Option<String>,
    /// Routes with this comment.
    pub comment: Option<String>,
    /// Routes that existed (created, not yet deleted) at this time.
    pub existed_at: Option<Timestamp>,
    /// `Some(false)` (the default): live routes; `Some(true)`: deleted ones only; `None`: not
    /// sent.
    pub is_deleted: Option<bool>,
    /// Page size of the walk, 1..=1000 (default 1000).
    pub per_page: Option<u32>,
}

impl Default for HostnameRouteFilter {
    fn default() -> Self {
        Self {
            id: None,
            hostname: None,
            tunnel_id: None,
            comment: None,
            existed_at: None,
            is_deleted: Some(false),
            per_page: None,
        }
    }
}

impl HostnameRouteFilter {
    /// Live routes through `tunnel_id`.
    pub fn through_tunnel(tunnel_id: impl Into<String>) -> Self {
        Self {
            tunnel_id: Some(tunnel_id.into()),
            ..Self::default()
        }
    }

    fn query(&self) -> Vec<(&'static str, String)> {
        let mut query = Vec::new();
        push(&mut query, "id", self.id.as_deref());
        push(&mut query, "hostname", self.hostname.as_deref());
        push(&mut query, "tunnel_id", self.tunnel_id.as_deref());
        push(&mut query, "comment", self.comment.as_deref());
        if let Some(at) = self.existed_at {
            query.push(("existed_at", at.to_string()));
        }
        if let Some(deleted) = self.is_deleted {
            query.push(("is_deleted", deleted.to_string()));
        }
        query
    }
}

impl CloudflareClient {
    /// Every hostname route matching `filter`, all pages.
    pub async fn list_hostname_routes(
        &self,
        account_id: &str,
        filter: &HostnameRouteFilter,
    ) -> Result<Vec<HostnameRoute>, CloudflareError> {
        let path = ["accounts", account_id, "zerotrust", "routes", "hostname"];
        let per_page = routes_page_size(filter.per_page);
        self.fetch_all("hostname_route.list", &path, filter.query(), per_page)
            .await
    }

    /// Creates a hostname route. Refused when a live route holds the hostname already
    /// ([`CloudflareError::is_hostname_route_exists`], also what a retry after a lost answer
    /// gets) or the account holds as many routes (IP and hostname together) as it may
    /// ([`CloudflareError::is_route_limit_reached`]).
    pub async fn create_hostname_route(
        &self,
        account_id: &str,
        route: &NewHostnameRoute,
    ) -> Result<HostnameRoute, CloudflareError> {
        route.validate()?;
        let path = ["accounts", account_id, "zerotrust", "routes", "hostname"];
        self.fetch(Call::with_json(
            "hostname_route.create",
            Method::POST,
            &path,
            route,
        )?)
        .await
    }

    /// One hostname route; a deleted one still answers, with `deleted_at`.
    pub async fn get_hostname_route(
        &self,
        account_id: &str,
        route_id: &str,
    ) -> Result<HostnameRoute, CloudflareError> {
        let path = hostname_route_path(account_id, route_id);
        self.fetch(Call::get("hostname_route.get", &path)).await
    }

    /// Changes the fields `update` sets; the route keeps its id.
    pub async fn update_hostname_route(
        &self,
        account_id: &str,
        route_id: &str,
        update: &HostnameRouteUpdate,
    ) -> Result<HostnameRoute, CloudflareError> {
        update.validate()?;
        let path = hostname_route_path(account_id, route_id);
        self.fetch(Call::with_json(
            "hostname_route.update",
            Method::PATCH,
            &path,
            update,
        )?)
        .await
    }

    /// Deletes a hostname route (no body); a 404 means it is already gone.
    pub async fn delete_hostname_route(
        &self,
        account_id: &str,
        route_id: &str,
    ) -> Result<(), CloudflareError> {
        let path = hostname_route_path(account_id, route_id);
        self.execute::<serde::de::IgnoredAny>(Call::delete("hostname_route.delete", &path))
            .await?;
        Ok(())
    }
}

/// `accounts/{account}/zerotrust/routes/hostname/{route}`.
fn hostname_route_path<'a>(account_id: &'a str, route_id: &'a str) -> [&'a str; 6] {
    [
        "accounts",
        account_id,
        "zerotrust",
        "routes",
        "hostname",
        route_id,
    ]
}
