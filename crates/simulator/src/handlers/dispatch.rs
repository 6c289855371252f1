//! One request's path through the simulator: limits, faults, the operation, the log.
use std::collections::HashMap;

use axum::extract::{FromRequestParts, RawPathParams, Request};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use tokio::time::Instant;

use super::{Ctx, auth, handle};
use crate::Simulator;
use crate::envelope::{Answer, ApiError, Reply, dropped_connection};
use crate::fault_target::Call;
use crate::faults::{Failure, FaultPlan};
use crate::operation::Operation;
use crate::query::Query;
use crate::state::{LoggedRequest, State};

/// Largest request body accepted: a DNS batch of 3,500 records with comments and TXT contents
/// is a few MiB; every other body is tiny.
const MAX_BODY_BYTES: usize = 8 << 20;

/// How a request ends.
enum Ending {
    Answered(Result<Reply, ApiError>),
    Dropped,
}

/// What was decided under the lock before the operation may run.
struct Admission {
    early: bool,
    budgeted: bool,
    /// A 429 of the credential's block or budget; it starts no block of its own.
    refusal: Option<ApiError>,
    plan: FaultPlan,
}

pub(super) async fn dispatch(sim: Simulator, op: Option<Operation>, request: Request) -> Response {
    let arrival = Instant::now();
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
    let credential = auth::fingerprint(&ctx.headers);
    let call = Call {
        operation: op,
        method: &parts.method,
        path: &ctx.path,
    };

    let admission = admit(&mut sim.lock(), &call, &ctx, credential.as_deref(), arrival);
    let refused = admission.refusal.is_some();
    let ending = match admission.refusal {
        Some(error) => Ending::Answered(Err(error)),
        None => run(&sim, op, &ctx, admission.plan).await,
    };

    let mut state = sim.lock();
    let answered = Instant::now();
    let answer = match &ending {
        Ending::Answered(outcome) => {
            let mut answer = Answer::from(outcome);
            if let Some(credential) = credential.as_deref() {
                if let (false, Some(secs)) = (refused, answer.retry_after) {
                    state.limits.rate_limited(credential, secs, answered);
                }
                if admission.budgeted
                    && let Some(headers) = state.limits.headers(credential, answered)
                {
                    answer.headers.extend(headers);
                }
            }
            Some(answer)
        }
        Ending::Dropped => None,
    };
    let status = answer.as_ref().map_or(0, |a| a.status.as_u16());
    tracing::debug!(
        operation = op.map(|o| o.to_string()),
        method = %parts.method,
        path = %ctx.path,
        status,
        credential = credential.as_deref(),
        early = admission.early,
        "cloudflare-sim request"
    );
    let since_start = |at: Instant| at.saturating_duration_since(state.created);
    let entry = LoggedRequest {
        operation: op,
        method: parts.method.to_string(),
        path: ctx.path.clone(),
        query: parts.uri.query().unwrap_or_default().to_string(),
        request_body: ctx.body.clone().ok().flatten(),
        status,
        response_body: answer.as_ref().map_or(Value::Null, |a| a.body.clone()),
        credential,
        early: admission.early,
        at: since_start(arrival),
        answered_at: since_start(answered),
    };
    state.push_log(entry);
    drop(state);
    match answer {
        Some(answer) => answer.into_response(),
        None => dropped_connection(),
    }
}

/// Counts the call, judges it by its credential's limits, then draws its faults.
fn admit(
    state: &mut State,
    call: &Call<'_>,
    ctx: &Ctx,
    credential: Option<&str>,
    arrival: Instant,
) -> Admission {
    state.total_calls += 1;
    if let Some(op) = call.operation {
        *state.calls.entry(op).or_default() += 1;
    }
    let budgeted = credential.is_some() && auth::authenticate(state, &ctx.headers).is_ok();
    let (early, refusal) = match credential {
        Some(credential) => (
            state.limits.note_arrival(credential, arrival),
            state.limits.admit(credential, budgeted, Instant::now()),
        ),
        None => (false, None),
    };
    let plan = if refusal.is_none() {
        let State { faults, rng, .. } = state;
        faults.plan(call, rng)
    } else {
        FaultPlan::default()
    };
    Admission {
        early,
        budgeted,
        refusal,
        plan,
    }
}

/// Waits the faults' latency, then answers as they decided or runs the operation.
async fn run(sim: &Simulator, op: Option<Operation>, ctx: &Ctx, plan: FaultPlan) -> Ending {
    if !plan.latency.is_zero() {
        tokio::time::sleep(plan.latency).await;
    }
    if let Some(failure) = plan.reject {
        return ending(failure);
    }
    let mut state = sim.lock();
    let outcome = match op {
        Some(op) => handle(&mut state, op, ctx),
        None => Err(ApiError::no_route(&ctx.path)),
    };
    match plan.after_apply {
        Some(failure) => ending(failure),
        None => Ending::Answered(outcome),
    }
}

fn ending(failure: Failure) -> Ending {
    match failure {
        Failure::Answer(error) => Ending::Answered(Err(error)),
        Failure::Drop => Ending::Dropped,
    }
}
