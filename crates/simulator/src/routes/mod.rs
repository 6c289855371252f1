//! The HTTP surface: one route per operation, all funnelled through `dispatch`.
mod accounts;
mod auth;
mod dns;
mod dns_batch;
mod dns_rules;
mod tunnels;

use std::collections::{BTreeMap, HashMap};

use axum::Router;
use axum::extract::{FromRequestParts, RawPathParams, Request};
use axum::routing::{MethodFilter, MethodRouter};
use serde_json::{Map, Value};

use super::Simulator;
use super::envelope::{Answer, ApiError, Reply};
use super::faults::FaultPlan;
use super::operation::Operation;
use super::query::Query;
use super::state::{LoggedRequest, State};

/// Largest request body accepted: a DNS batch of 3,500 records with comments and TXT contents
/// is a few MiB; every other body is tiny.
const MAX_BODY_BYTES: usize = 8 << 20;

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

type BoxedAnswer = std::pin::Pin<Box<dyn Future<Output = Answer> + Send>>;

fn handler(
    sim: &Simulator,
    op: Option<Operation>,
) -> impl Fn(Request) -> BoxedAnswer + Clone + Send + Sync + 'static {
    let sim = sim.clone();
    move |request: Request| {
        let sim = sim.clone();
        Box::pin(async move { dispatch(sim, op, request).await })
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

async fn dispatch(sim: Simulator, op: Option<Operation>, request: Request) -> Answer {
    let (mut parts, body) = request.into_parts();
    let params: HashMap<String, String> =
        match RawPathParams::from_request_parts(&mut parts, &()).await {
            Ok(raw) => raw
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            Err(_) => HashMap::new(),
        };
    let body = axum::body::to_bytes(body, MAX_BODY_BYTES).await;
    let body_json = match &body {
        Ok(bytes) if bytes.iter().all(u8::is_ascii_whitespace) => Ok(None),
        Ok(bytes) => serde_json::from_slice::<Value>(bytes)
            .map(Some)
            .map_err(|e| e.to_string()),
        Err(_) => Err(format!("larger than {MAX_BODY_BYTES} bytes")),
    };
    let ctx = Ctx {
        path: parts.uri.path().to_string(),
        params,
        query: Query::parse(parts.uri.query().unwrap_or_default()),
        headers: parts.headers,
        body: body_json,
    };

    let plan = {
        let mut state = sim.lock();
        state.total_calls += 1;
        match op {
            Some(op) => {
                *state.calls.entry(op).or_default() += 1;
                let State { faults, rng, .. } = &mut *state;
                faults
                    .get_mut(&op)
                    .map(|set| set.plan(rng))
                    .unwrap_or_default()
            }
            None => FaultPlan::default(),
        }
    };
    if let Some(delay) = plan.latency {
        tokio::time::sleep(delay).await;
    }
    let outcome = match plan.reject {
        Some(error) => Err(error),
        None => {
            let mut state = sim.lock();
            let outcome = match op {
                Some(op) => handle(&mut state, op, &ctx),
                None => Err(ApiError::no_route(&ctx.path)),
            };
            match plan.fail_after_apply {
                Some(error) => Err(error),
                None => outcome,
            }
        }
    };
    let answer = Answer::from(&outcome);
    tracing::debug!(
        operation = op.map(|o| o.to_string()),
        method = %parts.method,
        path = %ctx.path,
        status = answer.status.as_u16(),
        "cloudflare-sim request"
    );
    sim.lock().push_log(LoggedRequest {
        operation: op,
        method: parts.method.to_string(),
        path: ctx.path.clone(),
        query: parts.uri.query().unwrap_or_default().to_string(),
        request_body: ctx.body.clone().ok().flatten(),
        status: answer.status.as_u16(),
        response_body: answer.body.clone(),
    });
    answer
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
    }
}

pub(crate) use dns::insert_record;
pub(crate) use tunnels::token_for;
