//! The HTTP surface: one route per operation, all funnelled through `dispatch`.
mod access;
mod access_apps;
mod access_policies;
mod access_rules;
mod accounts;
mod auth;
mod certificates;
mod dispatch;
mod dns;
mod dns_batch;
mod dns_rules;
mod hostname_routes;
mod ip_routes;
mod network_rules;
mod networks;
mod tunnels;
mod virtual_networks;

use std::collections::{BTreeMap, HashMap};

use axum::Router;
use axum::extract::Request;
use axum::response::Response;
use axum::routing::{MethodFilter, MethodRouter};
use serde_json::{Map, Value};

use super::Simulator;
use super::envelope::{ApiError, Reply};
use super::operation::Operation;
use super::query::Query;
use super::state::State;

/// Builds the router serving every operation at paths relative to the API base.
pub(crate) fn build(sim: &Simulator) -> Router {
    let mut by_path: BTreeMap<&'static str, MethodRouter> = BTreeMap::new();
    for op in Operation::ALL {
        let filter = match MethodFilter::try_from(op.method()) {
            Ok(filter) => filter,
            Err(_) => continue,
        };
        let entry = by_path.remove(op.path_template()).unwrap_or_default();
        by_path.insert(op.path_template(), entry.on(filter, handler(sim, Some(op))));
    }
    let mut router = Router::new();
    for (path, methods) in by_path {
        router = router.route(path, methods);
    }
    router
        .fallback(handler(sim, None))
        .method_not_allowed_fallback(handler(sim, None))
}

/// The handler for requests no operation matches (answered 404/7003, logged, counted).
pub(crate) fn unmatched(
    sim: &Simulator,
) -> impl Fn(Request) -> BoxedAnswer + Clone + Send + Sync + 'static {
    handler(sim, None)
}

type BoxedAnswer = std::pin::Pin<Box<dyn Future<Output = Response> + Send>>;

fn handler(
    sim: &Simulator,
    op: Option<Operation>,
) -> impl Fn(Request) -> BoxedAnswer + Clone + Send + Sync + 'static {
    let sim = sim.clone();
    move |request: Request| {
        let sim = sim.clone();
        Box::pin(async move { dispatch::dispatch(sim, op, request).await })
    }
}

/// What a handler sees of the request.
pub(crate) struct Ctx {
    pub path: String,
    pub params: HashMap<String, String>,
    pub query: Query,
    pub headers: http::HeaderMap,
    /// `Ok(None)` for an empty body, `Err` with the parser's message for invalid JSON.
    pub body: Result<Option<Value>, String>,
}

impl Ctx {
    pub(crate) fn param(&self, name: &str) -> &str {
        self.params
            .get(name)
            .map(String::as_str)
            .unwrap_or_default()
    }

    /// The JSON object body a write operation requires.
    pub fn object(&self) -> Result<&Map<String, Value>, ApiError> {
        match &self.body {
            Err(detail) => Err(ApiError::invalid_body(format!("malformed JSON: {detail}"))),
            Ok(None) => Err(ApiError::invalid_body("a JSON object is required")),
            Ok(Some(Value::Object(map))) => Ok(map),
            Ok(Some(_)) => Err(ApiError::invalid_body("expected a JSON object")),
        }
    }

    /// Refuses an account id other than the simulated account's.
    pub(crate) fn check_account(&self, state: &State) -> Result<(), ApiError> {
        if self
            .param("account_id")
            .eq_ignore_ascii_case(&state.account_id)
        {
            Ok(())
        } else {
            Err(ApiError::authentication(http::StatusCode::FORBIDDEN))
        }
    }
}

/// Authenticates, then runs the operation against the state.
fn handle(state: &mut State, op: Operation, ctx: &Ctx) -> Result<Reply, ApiError> {
    match op {
        Operation::VerifyToken => {
            return accounts::verify_token(state, &auth::verified_token(state, &ctx.headers)?);
        }
        Operation::VerifyAccountToken => {
            let token = auth::verified_token(state, &ctx.headers)?;
            ctx.check_account(state)?;
            return accounts::verify_token(state, &token);
        }
        _ => {
            auth::authenticate(state, &ctx.headers)?;
        }
    }
    match op {
        Operation::VerifyToken | Operation::VerifyAccountToken => {
            Err(ApiError::no_route(&ctx.path))
        }
        Operation::ListAccounts => accounts::list_accounts(state, ctx),
        Operation::ListZones => accounts::list_zones(state, ctx),
        Operation::GetZone => accounts::get_zone(state, ctx),
        Operation::CreateTunnel => tunnels::create(state, ctx),
        Operation::ListTunnels => tunnels::list(state, ctx),
        Operation::GetTunnel => tunnels::get(state, ctx),
        Operation::DeleteTunnel => tunnels::delete(state, ctx),
        Operation::GetTunnelToken => tunnels::token(state, ctx),
        Operation::ListConnections => tunnels::connections(state, ctx),
        Operation::CleanupConnections => tunnels::cleanup(state, ctx),
        Operation::GetConfiguration => tunnels::get_config(state, ctx),
        Operation::PutConfiguration => tunnels::put_config(state, ctx),
        Operation::ListDnsRecords => dns::list(state, ctx),
        Operation::CreateDnsRecord => dns::create(state, ctx),
        Operation::GetDnsRecord => dns::get(state, ctx),
        Operation::UpdateDnsRecord => dns::update(state, ctx, false),
        Operation::PatchDnsRecord => dns::update(state, ctx, true),
        Operation::DeleteDnsRecord => dns::delete(state, ctx),
        Operation::BatchDnsRecords => dns_batch::batch(state, ctx),
        Operation::GetAccessOrganization => access::organization(state, ctx),
        Operation::ListAccessApps => access_apps::list(state, ctx),
        Operation::CreateAccessApp => access_apps::create(state, ctx),
        Operation::GetAccessApp => access_apps::get(state, ctx),
        Operation::UpdateAccessApp => access_apps::update(state, ctx),
        Operation::DeleteAccessApp => access_apps::delete(state, ctx),
        Operation::ListAccessPolicies => access_policies::list(state, ctx),
        Operation::CreateAccessPolicy => access_policies::create(state, ctx),
        Operation::GetAccessPolicy => access_policies::get(state, ctx),
        Operation::UpdateAccessPolicy => access_policies::update(state, ctx),
        Operation::DeleteAccessPolicy => access_policies::delete(state, ctx),
        Operation::ListCertificatePacks => certificates::list(state, ctx),
        Operation::ListVirtualNetworks => virtual_networks::list(state, ctx),
        Operation::CreateVirtualNetwork => virtual_networks::create(state, ctx),
        Operation::UpdateVirtualNetwork => virtual_networks::update(state, ctx),
        Operation::DeleteVirtualNetwork => virtual_networks::delete(state, ctx),
        Operation::ListIpRoutes => ip_routes::list(state, ctx),
        Operation::CreateIpRoute => ip_routes::create(state, ctx),
        Operation::UpdateIpRoute => ip_routes::update(state, ctx),
        Operation::DeleteIpRoute => ip_routes::delete(state, ctx),
        Operation::ListHostnameRoutes => hostname_routes::list(state, ctx),
        Operation::CreateHostnameRoute => hostname_routes::create(state, ctx),
        Operation::GetHostnameRoute => hostname_routes::get(state, ctx),
        Operation::UpdateHostnameRoute => hostname_routes::update(state, ctx),
        Operation::DeleteHostnameRoute => hostname_routes::delete(state, ctx),
    }
}

pub(crate) use access_apps::insert as insert_access_app;
pub(crate) use dns::insert_record;
pub(crate) use hostname_routes::insert as insert_hostname_route;
pub(crate) use ip_routes::insert as insert_ip_route;
pub(crate) use tunnels::token_for;
pub(crate) use virtual_networks::{
    insert as insert_virtual_network, remove as remove_virtual_network,
};
