//! The election loop: acquire, start a term (a child [`Scope`] of the process) and run the work
//! in it, renew until lost, end the term (cancel, then wait for every task it started), compete
//! again; on shutdown end the term, then release the lease.
use std::future::Future;
use std::time::Duration;

use jiff::Timestamp;
use kube::Client;
use tokio::time::{Instant, sleep, sleep_until, timeout, timeout_at};

use crate::scope::Scope;
use cftunnel_cloudflare::WriteGate;

use super::decision::{Decision, Observer, decide, next_record, released_record};
use super::lease::{LeaseLock, is_conflict, is_forbidden};
use super::{
    GO_OPERATOR_LEASE, LeaderConfigError, LeaderElectionConfig, LeaderState, LeaderStatus,
};

/// Runs `work` only while this process holds the lease (docs/design.md §7.1), until `shutdown` completes.
///
/// Each leadership term is a child scope of `process`: `work(term)` runs in it and spawns
/// everything it starts there, so the moment leadership is lost (renew deadline passed, lease
/// taken or deleted, Go operator alive) the whole term is cancelled and awaited (at most
/// [`TERM_GRACE`]). The term's write permit expires `renew_deadline` after the start of the
/// last successful renewal. With `None`, there is no election: `work` runs in one term until
/// shutdown. Fails only on an invalid `config`.
pub async fn run_while_leading<W, F>(
    client: Client,
    config: Option<LeaderElectionConfig>,
    status: LeaderStatus,
    process: Scope,
    shutdown: impl Future<Output = ()>,
    mut work: W,
) -> Result<(), LeaderConfigError>
where
    W: FnMut(Scope) -> F,
    F: Future<Output = ()> + Send + 'static,
{
    tokio::pin!(shutdown);
    let Some(config) = config else {
        status.set(LeaderState::Leading);
        let term = process.child("term");
        let mut task = term.spawn("reconcilers", work(term.clone()));
        tokio::select! {
            () = &mut shutdown => {}
            _ = &mut task => tracing::warn!("the reconcilers ended on their own"),
        }
        term.shutdown(TERM_GRACE).await;
        status.set(LeaderState::Stopped);
        return Ok(());
    };
    config.validate()?;
    let mut elector = Elector::new(client, config, status.clone());
    loop {
        let renewed_at = tokio::select! {
            () = &mut shutdown => break,
            started = elector.acquire() => started,
        };
        tracing::info!(lease = %elector.lock.key(), identity = %elector.config.identity, "became leader; starting the reconcilers");
        status.set(LeaderState::Leading);
        let term = process.child("term");
        let gate = term.write_gate();
        gate.renew_until(renewed_at + elector.config.renew_deadline);
        let mut task = term.spawn("reconcilers", work(term.clone()));
        let end = tokio::select! {
            () = &mut shutdown => None,
            loss = elector.hold(renewed_at, &gate) => Some(loss),
            _ = &mut task => Some(Loss::WorkEnded),
        };
        term.shutdown(TERM_GRACE).await;
        status.set(LeaderState::Candidate);
        let Some(loss) = end else { break };
        tracing::warn!(lease = %elector.lock.key(), identity = %elector.config.identity, reason = %loss, "lost leadership; the reconcilers are stopped");
        if loss.hands_over() {
            elector.release().await;
            sleep(elector.config.retry_period).await;
        }
    }
    elector.release().await;
    status.set(LeaderState::Stopped);
    Ok(())
}

/// How long an ended term's tasks may take to stop (they are dropped at their next await point,
/// so this is reached only by a task blocked outside the runtime).
pub const TERM_GRACE: Duration = Duration::from_secs(5);

/// Why a leadership term ended.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
enum Loss {
    #[error("no successful renewal within the renew deadline")]
    RenewDeadline,
    #[error("the lease was deleted")]
    Deleted,
    #[error("the lease now names {0:?}")]
    TakenBy(String),
    #[error("the Go cloudflare-operator's lease is held by {0:?}")]
    GoOperator(String),
    #[error("the reconcilers ended on their own")]
    WorkEnded,
}

impl Loss {
    /// Whether this process still holds the lease and should release it for a successor.
    fn hands_over(&self) -> bool {
        matches!(self, Loss::GoOperator(_) | Loss::WorkEnded)
    }
}

/// What one renewal found.
enum Renewal {
    Renewed,
    Gone,
    TakenBy(String),
    GoOperator(String),
}

/// One candidate: its lease, the Go operator's lease, and what it last saw of each.
struct Elector {
    config: LeaderElectionConfig,
    lock: LeaseLock,
    go_lock: Option<LeaseLock>,
    lease: Observer,
    go_lease: Observer,
    status: LeaderStatus,
    /// The Go operator's holder this process last warned about (warned once per holder).
    go_warned: Option<String>,
    /// The rival this process last logged waiting for.
    waiting_for: Option<String>,
}

impl Elector {
    fn new(client: Client, config: LeaderElectionConfig, status: LeaderStatus) -> Self {
        let lock = LeaseLock::new(client.clone(), &config.namespace, &config.lease_name);
        let go_lock = config
            .go_operator_lease_namespace
            .as_deref()
            .map(|ns| LeaseLock::new(client, ns, GO_OPERATOR_LEASE));
        Self {
            config,
            lock,
            go_lock,
            lease: Observer::default(),
            go_lease: Observer::default(),
            status,
            go_warned: None,
            waiting_for: None,
        }
    }

    /// Tries every retry period (plus up to 20 % jitter) until the lease is held; returns when
    /// the successful attempt started.
    async fn acquire(&mut self) -> Instant {
        loop {
            let started = Instant::now();
            match timeout(self.config.renew_deadline, self.try_acquire()).await {
                Ok(Ok(true)) => {
                    self.waiting_for = None;
                    return started;
                }
                Ok(Ok(false)) => {}
                Ok(Err(error)) => {
                    tracing::warn!(lease = %self.lock.key(), %error, "leader election: cannot read or write the lease; retrying");
                }
                Err(_) => {
                    tracing::warn!(lease = %self.lock.key(), "leader election: the API server did not answer in time; retrying");
                }
            }
            let jitter = self
                .config
                .retry_period
                .mul_f64(rand::random::<f64>() * 0.2);
            sleep(self.config.retry_period + jitter).await;
        }
    }

    /// One attempt: `Ok(true)` when this process now holds the lease.
    async fn try_acquire(&mut self) -> Result<bool, kube::Error> {
        if let Some(holder) = self.go_operator_holder().await {
            self.status.set(LeaderState::BlockedByGoOperator);
            self.warn_go_operator(holder);
            return Ok(false);
        }
        if self.go_warned.take().is_some() {
            tracing::info!(
                "the Go cloudflare-operator's lease is no longer held; competing for leadership"
            );
        }
        self.status.set(LeaderState::Candidate);
        let read = self.lock.read().await?;
        let now = Instant::now().into_std();
        self.lease
            .observe(read.as_ref().map(|r| r.record.clone()), now);
        let decision = decide(&self.config.identity, self.lease.current(), now);
        let previous = read.as_ref().map(|r| &r.record);
        let Some(record) = next_record(
            &decision,
            &self.config.identity,
            self.config.lease_duration_seconds(),
            previous,
            Timestamp::now(),
        ) else {
            if let Decision::Wait { holder, expires_in } = decision
                && self.waiting_for.as_ref() != Some(&holder)
            {
                tracing::info!(lease = %self.lock.key(), %holder, ?expires_in, "another replica leads; waiting");
                self.waiting_for = Some(holder);
            }
            return Ok(false);
        };
        let written = match read {
            None => self.lock.create(&record).await,
            Some(read) => self.lock.replace(read, &record).await,
        };
        match written {
            Ok(()) => {
                self.lease.observe(Some(record), Instant::now().into_std());
                Ok(true)
            }
            Err(error) if is_conflict(&error) => {
                tracing::debug!(lease = %self.lock.key(), "another candidate wrote the lease first");
                Ok(false)
            }
            Err(error) => Err(error),
        }
    }

    /// Renews every retry period until a renewal fails for the renew deadline or finds the
    /// lease gone or taken; returns the moment that is known.
    async fn hold(&mut self, mut renewed_at: Instant, gate: &WriteGate) -> Loss {
        loop {
            let deadline = renewed_at + self.config.renew_deadline;
            tokio::select! {
                () = sleep_until(deadline) => return Loss::RenewDeadline,
                () = sleep(self.config.retry_period) => {}
            }
            let started = Instant::now();
            match timeout_at(deadline, self.renew()).await {
                Err(_) => return Loss::RenewDeadline,
                Ok(Ok(Renewal::Renewed)) => {
                    renewed_at = started;
                    gate.renew_until(renewed_at + self.config.renew_deadline);
                }
                Ok(Ok(Renewal::Gone)) => return Loss::Deleted,
                Ok(Ok(Renewal::TakenBy(holder))) => return Loss::TakenBy(holder),
                Ok(Ok(Renewal::GoOperator(holder))) => {
                    self.warn_go_operator(holder.clone());
                    return Loss::GoOperator(holder);
                }
                Ok(Err(error)) => {
                    tracing::warn!(lease = %self.lock.key(), %error, "renewing the lease failed; retrying until the renew deadline");
                }
            }
        }
    }

    async fn renew(&mut self) -> Result<Renewal, kube::Error> {
        let read = self.lock.read().await?;
        let now = Instant::now().into_std();
        self.lease
            .observe(read.as_ref().map(|r| r.record.clone()), now);
        let Some(read) = read else {
            return Ok(Renewal::Gone);
        };
        if read.record.holder != self.config.identity {
            return Ok(Renewal::TakenBy(read.record.holder));
        }
        let record = next_record(
            &Decision::Renew,
            &self.config.identity,
            self.config.lease_duration_seconds(),
            Some(&read.record),
            Timestamp::now(),
        );
        if let Some(record) = record {
            self.lock.replace(read, &record).await?;
            self.lease.observe(Some(record), Instant::now().into_std());
        }
        Ok(match self.go_operator_holder().await {
            Some(holder) => Renewal::GoOperator(holder),
            None => Renewal::Renewed,
        })
    }

    /// Clears the holder if this process holds the lease, so a successor need not wait.
    async fn release(&mut self) {
        let identity = self.config.identity.clone();
        let lock = self.lock.clone();
        let attempt = timeout(self.config.renew_deadline, async move {
            let Some(read) = lock.read().await? else {
                return Ok(false);
            };
            if read.record.holder != identity {
                return Ok(false);
            }
            let record = released_record(&read.record, Timestamp::now());
            lock.replace(read, &record).await?;
            Ok::<_, kube::Error>(true)
        })
        .await;
        match attempt {
            Ok(Ok(true)) => tracing::info!(lease = %self.lock.key(), "released the leader lease"),
            Ok(Ok(false)) => {}
            Ok(Err(error)) => {
                tracing::warn!(lease = %self.lock.key(), %error, "could not release the leader lease; a successor waits for it to expire");
            }
            Err(_) => {
                tracing::warn!(lease = %self.lock.key(), "releasing the leader lease timed out; a successor waits for it to expire");
            }
        }
    }

    /// The live holder of the Go operator's lease; any read error counts as no holder.
    async fn go_operator_holder(&mut self) -> Option<String> {
        let lock = self.go_lock.as_ref()?;
        match lock.read().await {
            Ok(read) => {
                let now = Instant::now().into_std();
                self.go_lease.observe(read.map(|r| r.record), now);
                self.go_lease
                    .current()
                    .and_then(|observed| observed.live_holder(now))
                    .map(str::to_string)
            }
            Err(error) => {
                tracing::debug!(lease = %lock.key(), %error, forbidden = is_forbidden(&error), "cannot read the Go operator's lease; not blocking leadership");
                None
            }
        }
    }

    fn warn_go_operator(&mut self, holder: String) {
        if self.go_warned.as_ref() == Some(&holder) {
            return;
        }
        let lease = self
            .go_lock
            .as_ref()
            .map(LeaseLock::key)
            .unwrap_or_default();
        tracing::warn!(
            %lease,
            %holder,
            "the Go cloudflare-operator is running (it holds its leader lease): cftunnel will not \
             reconcile until it is scaled to 0, e.g. `kubectl -n <namespace> scale deployment \
             cloudflare-operator-controller-manager --replicas=0`"
        );
        self.go_warned = Some(holder);
    }
}
