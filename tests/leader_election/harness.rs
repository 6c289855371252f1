//! One harness for the leader election tests: the shared control plane with the shipped RBAC,
//! candidates running `run_while_leading` with a work future that records who runs and how many
//! ran at once, and lease helpers.
#![allow(dead_code)] // each test uses its own subset

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use cftunnel::leader::{
    LeaderConfigError, LeaderElectionConfig, LeaderState, LeaderStatus, LeaseRecord, record_of,
    run_while_leading,
};
use cftunnel_testenv::{ControlPlane, ControlPlaneOptions, poll_until, shared};
use cftunnel_types::crds::{self, ConversionService};
use k8s_openapi::api::coordination::v1::Lease;
use kube::{Api, Client};
use tokio::sync::{OnceCell, oneshot};
use tokio::task::JoinHandle;

use crate::install_support::install_namespaces_and_rbac;
pub use crate::install_support::{operator_client, serving_cert_dir};

pub const WAIT: Duration = Duration::from_secs(90);
pub const POLL: Duration = Duration::from_millis(100);
pub const OPERATOR_NAMESPACE: &str = "cftunnel-system";

static RBAC: OnceCell<()> = OnceCell::const_new();

/// The shared control plane (no KCM needed; the CRDs for `cftunnel run`) with
/// manifests/rbac.yaml applied once.
pub async fn plane() -> &'static ControlPlane {
    let plane = shared(|| ControlPlaneOptions {
        crds: crds::all(&ConversionService::default()),
        ..ControlPlaneOptions::default()
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    RBAC.get_or_init(|| install_namespaces_and_rbac(plane))
        .await;
    plane
}

/// Short timings for tests: a 4 s lease, 2 s renew deadline, 250 ms retry; no Go lease check.
pub fn fast_config(namespace: &str, lease: &str, identity: &str) -> LeaderElectionConfig {
    LeaderElectionConfig {
        identity: identity.to_string(),
        lease_duration: Duration::from_secs(4),
        renew_deadline: Duration::from_secs(2),
        retry_period: Duration::from_millis(250),
        go_operator_lease_namespace: None,
        ..LeaderElectionConfig::new(namespace, lease)
    }
}

/// What every candidate's work reports: how many ran at once, at most, and how many started.
#[derive(Clone, Default)]
pub struct Ledger {
    running: Arc<AtomicUsize>,
    max_concurrent: Arc<AtomicUsize>,
    starts: Arc<AtomicUsize>,
}

impl Ledger {
    /// The most work futures that were running at the same moment.
    pub fn max_concurrent(&self) -> usize {
        self.max_concurrent.load(Ordering::SeqCst)
    }

    /// How many leadership terms started their work.
    pub fn starts(&self) -> usize {
        self.starts.load(Ordering::SeqCst)
    }
}

/// Marks one running work future; unmarks when the future is dropped (aborted).
struct Running {
    ledger: Ledger,
    mine: Arc<AtomicBool>,
}

impl Running {
    fn enter(ledger: Ledger, mine: Arc<AtomicBool>) -> Self {
        let now = ledger.running.fetch_add(1, Ordering::SeqCst) + 1;
        ledger.max_concurrent.fetch_max(now, Ordering::SeqCst);
        ledger.starts.fetch_add(1, Ordering::SeqCst);
        mine.store(true, Ordering::SeqCst);
        Running { ledger, mine }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.mine.store(false, Ordering::SeqCst);
        self.ledger.running.fetch_sub(1, Ordering::SeqCst);
    }
}

/// One process competing for the lease, its work recorded in a shared [`Ledger`].
pub struct Candidate {
    pub identity: String,
    pub status: LeaderStatus,
    running: Arc<AtomicBool>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<(), LeaderConfigError>>>,
}

impl Candidate {
    pub fn start(client: Client, config: LeaderElectionConfig, ledger: &Ledger) -> Candidate {
        let status = LeaderStatus::new();
        let running = Arc::new(AtomicBool::new(false));
        let (stop, stopped) = oneshot::channel::<()>();
        let identity = config.identity.clone();
        let work = {
            let (ledger, running) = (ledger.clone(), running.clone());
            move |_term| {
                let (ledger, running) = (ledger.clone(), running.clone());
                async move {
                    let _running = Running::enter(ledger, running);
                    std::future::pending::<()>().await;
                }
            }
        };
        let task = tokio::spawn(run_while_leading(
            client,
            Some(config),
            status.clone(),
            cftunnel::scope::Scope::root("candidate"),
            async move {
                let _ = stopped.await;
            },
            work,
        ));
        Candidate {
            identity,
            status,
            running,
            stop: Some(stop),
            task: Some(task),
        }
    }

    /// Whether this candidate's work runs now.
    pub fn is_running(&self) -> bool {
        self.running.load(Ordering::SeqCst)
    }

    /// Graceful shutdown (stops the work, releases the lease); waits until done.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let result = tokio::time::timeout(WAIT, task)
                .await
                .expect("candidate shut down in time")
                .expect("candidate task");
            assert_eq!(result, Ok(()));
        }
        assert_eq!(self.status.state(), LeaderState::Stopped);
        assert!(!self.is_running(), "work still running after shutdown");
    }

    /// Waits until the status is `state`.
    pub async fn wait_for(&self, state: LeaderState, what: &str) {
        let status = self.status.clone();
        poll_until(what, WAIT, POLL, || {
            let status = status.clone();
            async move { (status.state() == state).then_some(()) }
        })
        .await
        .unwrap_or_else(|e| panic!("{}: {e} (state {:?})", self.identity, self.status.state()));
    }

    /// Waits until the work has stopped and the candidate no longer leads.
    pub async fn wait_stopped_leading(&self, what: &str) {
        let (status, running) = (self.status.clone(), self.running.clone());
        poll_until(what, WAIT, POLL, || {
            let (status, running) = (status.clone(), running.clone());
            async move { (!status.is_leading() && !running.load(Ordering::SeqCst)).then_some(()) }
        })
        .await
        .unwrap_or_else(|e| panic!("{}: {e}", self.identity));
    }
}

impl Drop for Candidate {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

pub fn leases(client: &Client, ns: &str) -> Api<Lease> {
    Api::namespaced(client.clone(), ns)
}

/// The lease's leader-election record, if it exists.
pub async fn read_record(client: &Client, ns: &str, name: &str) -> Option<LeaseRecord> {
    leases(client, ns)
        .get_opt(name)
        .await
        .expect("read lease")
        .map(|lease| record_of(&lease))
}

/// Waits until the lease's record satisfies `check`; returns it.
pub async fn wait_record(
    client: &Client,
    ns: &str,
    name: &str,
    what: &str,
    check: impl Fn(&LeaseRecord) -> bool,
) -> LeaseRecord {
    let check = &check;
    poll_until(what, WAIT, POLL, || async move {
        read_record(client, ns, name).await.filter(check)
    })
    .await
    .unwrap_or_else(|e| {
        panic!("{e}");
    })
}

/// Waits until `check` holds.
pub async fn wait_until(what: &str, check: impl Fn() -> bool) {
    let check = &check;
    poll_until(what, WAIT, POLL, || async move { check().then_some(()) })
        .await
        .unwrap_or_else(|e| panic!("{e}"));
}
