//! The generic reconcile core shared by Tunnels and ClusterTunnels (docs/design.md §3.1).
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::runtime::controller::Action;
use kube::{Api, ResourceExt};

use super::context::TunnelContext;
use super::render_input::{TunnelFacts, render_options, tunnel_input, with_config_source};
use super::{apply, deletion, drift, go_cluster_workload, remote, secret_guard, setup, status};
use crate::term::ReconcileError;
use crate::term::adapters::TunnelKindAdapter;
use crate::term::asks::Lane;
use crate::term::conditions::ReadyReason;
use crate::term::{credentials, events, finalizer};
use cftunnel_cloudflare::Priority;
use cftunnel_policy::render;
use cftunnel_policy::render::remote::remote_config;
use cftunnel_types::names::{ANNOTATION_ABANDON_CLEANUP, FINALIZER};

/// Longest wait before a refused configuration push is tried again.
const PUSH_RETRY_MAX: Duration = Duration::from_secs(10);

/// How long a reconcile waits for the first route table.
const ROUTES_WAIT: Duration = Duration::from_millis(500);

/// Entry point of both controllers.
pub async fn reconcile<K: TunnelKindAdapter>(
    obj: Arc<K>,
    ctx: Arc<TunnelContext>,
) -> Result<Action, ReconcileError> {
    let key = obj.display();
    let started = std::time::Instant::now();
    // Status written during the reconcile (drift) is carried here, so a failure report keeps it.
    let mut current = (*obj).clone();
    let outcome = if obj.meta().deletion_timestamp.is_some() {
        Box::pin(delete(&*obj, &ctx)).await
    } else {
        // A deletion that arrives while this reconcile waits (at the pacer, behind a backlog)
        // is not held up by it: the reconcile gives way, as if cut short by a restart, and the
        // deletion runs next. Every step it may stop after is one a restart may stop after too.
        tokio::select! {
            outcome = converge(&mut current, &ctx) => outcome,
            () = deletion_seen(&*obj, &ctx) => {
                tracing::debug!(object = %key, "deletion seen: the reconcile in progress gives way");
                return Ok(Action::requeue(Duration::ZERO));
            }
        }
    };
    ctx.metrics
        .reconciled(K::KIND, outcome.is_ok(), started.elapsed());
    match outcome {
        Ok(action) => {
            ctx.reset_backoff(&key);
            Ok(action)
        }
        Err(error) => {
            tracing::warn!(object = %key, reason = error.metric_label(), %error, "tunnel not reconciled");
            let in_streak = ctx.in_failure_streak(&key);
            Box::pin(status::report_failure(&current, &ctx, &error, in_streak)).await?;
            let backoff = ctx.next_backoff(&key);
            Ok(Action::requeue(match error {
                // Nothing tells cftunnel when Cloudflare takes the push again (a token given
                // Tunnel Edit, an outage over): look again soon; the rate limiter paces it.
                ReconcileError::Push { .. } => backoff.min(PUSH_RETRY_MAX),
                _ if error.is_transient() => backoff.min(ctx.options.transient_retry_max),
                _ => backoff,
            }))
        }
    }
}

/// How often a reconcile in progress looks for its object's deletion.
const DELETION_POLL: Duration = Duration::from_secs(1);

/// Returns once the stores see `obj` being deleted (never while it is not).
async fn deletion_seen<K: TunnelKindAdapter>(obj: &K, ctx: &TunnelContext) {
    loop {
        tokio::time::sleep(DELETION_POLL).await;
        if ctx.claims.get().is_some_and(|c| c.deletion_started(obj)) {
            return;
        }
    }
}

/// Only reached when reporting a failure itself failed.
pub(crate) fn error_policy<K: TunnelKindAdapter>(
    obj: Arc<K>,
    error: &ReconcileError,
    ctx: Arc<TunnelContext>,
) -> Action {
    tracing::warn!(object = %obj.display(), %error, "reconcile failed");
    Action::requeue(ctx.next_backoff(&obj.display()))
}

/// How often a deleted tunnel looks again at the AccessPolicies it waits for.
const ACCESS_CLEANUP_WAIT: Duration = Duration::from_secs(2);

/// Deletion: cleanup on Cloudflare, then the AccessPolicies being deleted that use its
/// credentials (`deletion_access`), then the finalizer goes, then the API Secret guard.
async fn delete<K: TunnelKindAdapter>(
    obj: &K,
    ctx: &Arc<TunnelContext>,
) -> Result<Action, ReconcileError> {
    if !obj.finalizers().iter().any(|f| f == FINALIZER) {
        return Ok(Action::await_change());
    }
    match deletion::cleanup(obj, ctx).await {
        Ok(Some(wait)) => return Ok(wait),
        Ok(None) => {}
        Err(error) if deletion::abandons_cleanup(obj) => {
            let note = format!(
                "{ANNOTATION_ABANDON_CLEANUP}=true: deleted without cleaning up on Cloudflare ({error}); the tunnel and its DNS records may be left there"
            );
            tracing::warn!(object = %obj.display(), %error, "clean-up abandoned by annotation");
            events::warning(ctx, obj, "CleanupAbandoned", note).await;
        }
        Err(error) => return Err(error.while_deleting()),
    }
    let waited = match deletion::abandons_cleanup(obj) {
        true => Vec::new(),
        false => super::deletion_access::policies_cleaning_up(obj, ctx)
            .await
            .map_err(ReconcileError::while_deleting)?,
    };
    if !waited.is_empty() {
        let message = format!(
            "waiting for AccessPolicy {} to delete its Access applications with this tunnel's API credentials",
            waited.join(", ")
        );
        status::report_progress(obj, ctx, ReadyReason::Deleting, &message).await?;
        return Ok(Action::requeue(ACCESS_CLEANUP_WAIT));
    }
    finalizer::remove(obj, ctx).await?;
    ctx.forget_drift(&obj.uid().unwrap_or_default());
    let (namespace, secret) = (obj.managed_namespace(&ctx.options), obj.api_secret_name());
    if let Err(error) = secret_guard::release_if_unused(ctx, &namespace, secret).await {
        // The object is gone now and cannot be requeued: the release is retried on its own.
        tracing::warn!(object = %obj.display(), %error, "API Secret guard not released yet; retrying");
        secret_guard::release_later(ctx.ctx.clone(), namespace, secret.to_string());
    }
    Ok(Action::await_change())
}

/// Has the spec changed since the object was last Ready (or was it never Ready)?
pub(super) fn spec_changed<K: TunnelKindAdapter>(obj: &K) -> bool {
    let status = obj.tunnel_status();
    let observed = status.and_then(|s| s.observed_generation);
    let ready = crate::term::conditions::find_ready(status.and_then(|s| s.conditions.as_ref()))
        .is_some_and(|c| c.reason == ReadyReason::Ready.as_str());
    !ready || observed.is_none() || observed != obj.meta().generation
}

/// The lane of a reconcile of `obj`: its open request's; once it converged, its open route
/// change's, or routine.
fn lane_of<K: TunnelKindAdapter>(obj: &K, ctx: &TunnelContext) -> Lane {
    let uid = obj.uid().unwrap_or_default();
    match spec_changed(obj) {
        true => ctx
            .asks
            .ask(&uid, obj.meta().generation.unwrap_or_default()),
        false => {
            ctx.asks.met(&uid);
            ctx.asks.routine_or_routes(&obj.display())
        }
    }
}

/// Steps 2–5 of docs/design.md §3.1 for a live object.
///
/// The API calls before the pacer, the drift check, `setup::resolve` and everything after it
/// are boxed futures: a first sync has every tunnel's reconcile in flight, most parked at the
/// pacer, and an unboxed step's state would be part of each (about 15 KiB instead of 5).
async fn converge<K: TunnelKindAdapter>(
    current: &mut K,
    ctx: &TunnelContext,
) -> Result<Action, ReconcileError> {
    let obj = &*current;
    // Every Cloudflare call and API slot of this reconcile waits in its request's lane, as old
    // as the request (docs/design.md §3.8).
    let lane = lane_of(obj, ctx);
    if ctx.routes.tunnel(&obj.route_identity()).is_none() {
        // The route caches are still listing: rendering now would drop every ingress rule.
        return Ok(Action::requeue(ROUTES_WAIT));
    }
    let spec = with_config_source(obj.tunnel_spec(), ctx.options.default_config_source);
    let (is_new, is_existing) = spec.tunnel_sources();
    if is_new == is_existing {
        return Err(ReconcileError::blocked(
            ReadyReason::InvalidSpec,
            "exactly one of spec.newTunnel and spec.existingTunnel must be set".to_string(),
        ));
    }
    let namespace = obj.managed_namespace(&ctx.options);
    // The API server's part before Cloudflare takes a slot (see `TunnelContext::api_slots`); the
    // wait at the Cloudflare pacer holds none.
    let reading = ctx.api_slots.acquire(lane).await;
    // Both kinds hold the finalizer: a new tunnel is deleted on Cloudflare, and the DNS records
    // cftunnel wrote for an existing one are removed (the tunnel itself stays).
    Box::pin(finalizer::add(obj, ctx)).await?;
    let api_secret = Box::pin(credentials::read_api_secret(
        &ctx.client,
        &namespace,
        &spec.cloudflare,
    ))
    .await?;
    Box::pin(secret_guard::ensure(
        ctx,
        &namespace,
        &spec.cloudflare.secret,
        &api_secret,
    ))
    .await?;
    if spec_changed(obj) {
        // The spec may name another API Secret now: the old one's guard must not stay.
        Box::pin(secret_guard::release_others(
            ctx,
            &namespace,
            &spec.cloudflare.secret,
        ))
        .await?;
    }
    let identity = obj.identity(&ctx.options);
    let names = render::ObjectNames::for_owner(&identity);
    let display = obj.display();
    Box::pin(apply::ensure_controlled::<Secret>(
        ctx,
        &namespace,
        &names.workload,
        &identity.uid,
        &display,
    ))
    .await?;
    let managed_secret = Api::<Secret>::namespaced(ctx.client.clone(), &namespace)
        .get_opt(&names.workload)
        .await
        .map_err(|source| ReconcileError::kube("reading the managed Secret", source))?;
    let cf = ctx
        .cloudflare
        .client(api_secret.credentials.clone())
        .map_err(|source| ReconcileError::cloudflare("building the Cloudflare client", source))?
        .with_priority(lane.priority)
        .for_work(lane.work);
    drop(reading);
    // Drift checks queue behind every change of the credential (and spend at most half of it).
    let drift_checked = Box::pin(drift::check(
        current,
        ctx,
        &cf.with_priority(Priority::Background),
        &api_secret.credentials.fingerprint(),
        &spec,
    ))
    .await?;
    let obj = &*current;
    let resolved = match Box::pin(setup::resolve(
        obj,
        ctx,
        &cf,
        &spec,
        &api_secret,
        managed_secret.as_ref(),
    ))
    .await
    {
        Ok(resolved) => resolved,
        Err(error) if error.reason() == ReadyReason::TunnelIdConflict => {
            // Another object runs this tunnel: no cloudflared of this one may serve it.
            Box::pin(deletion::scale_to_zero(obj, ctx)).await?;
            return Err(error);
        }
        Err(error) => return Err(error),
    };
    // An existing tunnel named again by a new object after its old object's deletion.
    ctx.dns
        .guard
        .readmit(&resolved.tunnel_id, &current.uid().unwrap_or_default());
    let origin_ca_pem = {
        let _reading = ctx.api_slots.acquire(lane).await;
        Box::pin(setup::origin_ca(
            ctx,
            &namespace,
            spec.origin_ca_pool.as_deref(),
        ))
        .await?
    };
    let facts = TunnelFacts {
        tunnel_id: resolved.tunnel_id.clone(),
        tunnel_name: resolved.tunnel_name.clone(),
        credentials: resolved.credentials.clone(),
        origin_ca_pem,
    };
    // A tunnel whose rules are not pushed takes its slot before it copies its routes into the
    // render input: a first sync parks a reconcile per tunnel at the slots, and each would hold
    // its copy there.
    let early_slot = match remote::pushes(&*current, &spec) {
        false => Some(ctx.api_slots.acquire(lane).await),
        true => None,
    };
    // Protected hostnames are closed or checked by cloudflared (docs/design.md §3.7). Routes
    // and protections come from one table, the newest: a hostname this tunnel serves in it is
    // protected by that table's guard.
    let route_identity = current.route_identity();
    let Some(snapshot) = ctx.routes.snapshot(&route_identity) else {
        return Ok(Action::requeue(ROUTES_WAIT));
    };
    let (routes, mut protections, mut access_unknown) =
        (snapshot.routes, snapshot.protections, snapshot.unknown);
    let served = render::protection::protect(&routes.routes, &protections);
    drop(routes);
    let mut input = tunnel_input(identity, spec, facts, served);
    if remote::pushes(&*current, &input.spec) {
        // Before anything is applied: a workload switched to the token starts only once
        // Cloudflare holds its rules, and until then the one running keeps serving. The push
        // waits at the pacer holding no API slot: a slot held there would keep every other
        // reconcile (a new tunnel's among them) waiting for the pushes queued ahead of it.
        // Its rules come from the newest table when its turn comes, with that table's
        // protections, which are then the ones applied below.
        let mut newest = || {
            if let Some(snapshot) = ctx.routes.snapshot(&route_identity) {
                input.routes =
                    render::protection::protect(&snapshot.routes.routes, &snapshot.protections);
                (protections, access_unknown) = (snapshot.protections, snapshot.unknown);
            }
            Ok(remote_config(&input)?)
        };
        Box::pin(remote::ensure_pushed(
            current,
            ctx,
            &cf,
            &resolved,
            drift_checked,
            &mut newest,
        ))
        .await?;
    }
    let input = input;
    // Cloudflare has answered: from here on the reconcile holds rendered objects and API
    // answers, a few at a time however many wait above.
    let _slot = match early_slot {
        Some(slot) => slot,
        None => ctx.api_slots.acquire(lane).await,
    };
    // The rest is a future of its own: one parked at the pacer above does not carry the
    // rendered objects' room (a first sync parks a reconcile per tunnel there).
    Box::pin(async {
        let rendered = render::render_all(&input, &render_options(&ctx.options.cloudflared_image))?;
        apply::apply_all(ctx, &namespace, &input.identity.uid, &display, &rendered).await?;
        // Applied (and pushed): the Access reconciler may now make or delete applications.
        ctx.access.applied(&route_identity, protections);
        let obj = &*current;
        status::ensure_labels(obj, ctx, &input).await?;
        status::report_ready(obj, ctx, &resolved, access_unknown.as_ref()).await?;
        // What a user asked of its routes is served (a newer change stays asked).
        ctx.asks.routes_met(&display, lane);
        if let Some(wait) = go_cluster_workload::retire(obj, ctx, &input.identity).await? {
            return Ok(wait);
        }
        Ok::<_, ReconcileError>(match ctx.drift_requeue(&obj.uid().unwrap_or_default()) {
            Some(wait) => Action::requeue(wait),
            None => Action::await_change(),
        })
    })
    .await
}
