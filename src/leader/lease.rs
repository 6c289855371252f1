//! Reads and writes of one coordination.k8s.io/v1 Lease. Writes are a create (fails if the
//! lease appeared meanwhile) or a full replace carrying the resourceVersion that was read
//! (fails if anyone wrote since): of two candidates racing for one lease, exactly one wins.
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::PostParams;
use kube::{Api, Client};

use super::decision::LeaseRecord;

/// One named Lease in one namespace.
#[derive(Clone)]
pub struct LeaseLock {
    api: Api<Lease>,
    name: String,
    namespace: String,
}

/// A lease as read: its leader-election record and the object (for a later replace).
pub struct ReadLease {
    /// The leader-election fields.
    pub record: LeaseRecord,
    object: Lease,
}

impl LeaseLock {
    /// The lease `namespace/name`.
    pub fn new(client: Client, namespace: &str, name: &str) -> Self {
        Self {
            api: Api::namespaced(client, namespace),
            name: name.to_string(),
            namespace: namespace.to_string(),
        }
    }

    /// `namespace/name`, for logs.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// The lease, or `None` if it does not exist.
    pub async fn read(&self) -> Result<Option<ReadLease>, kube::Error> {
        Ok(self.api.get_opt(&self.name).await?.map(|object| ReadLease {
            record: record_of(&object),
            object,
        }))
    }

    /// Creates the lease with `record`; a conflict means another candidate created it first.
    pub async fn create(&self, record: &LeaseRecord) -> Result<(), kube::Error> {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                namespace: Some(self.namespace.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(spec_with(LeaseSpec::default(), record)),
        };
        self.api.create(&PostParams::default(), &lease).await?;
        Ok(())
    }

    /// Replaces the lease as it was read with `record`; a conflict means someone wrote since.
    pub async fn replace(&self, read: ReadLease, record: &LeaseRecord) -> Result<(), kube::Error> {
        let mut lease = read.object;
        lease.spec = Some(spec_with(lease.spec.unwrap_or_default(), record));
        self.api
            .replace(&self.name, &PostParams::default(), &lease)
            .await?;
        Ok(())
    }
}

/// The leader-election fields of a lease (absent ones read as empty or zero).
pub fn record_of(lease: &Lease) -> LeaseRecord {
    let spec = lease.spec.clone().unwrap_or_default();
    LeaseRecord {
        holder: spec.holder_identity.unwrap_or_default(),
        duration_seconds: spec.lease_duration_seconds.unwrap_or(0),
        acquire_time: spec.acquire_time.map(|t| t.0),
        renew_time: spec.renew_time.map(|t| t.0),
        transitions: spec.lease_transitions.unwrap_or(0),
    }
}

/// `spec` with the leader-election fields set from `record` (other fields kept).
fn spec_with(spec: LeaseSpec, record: &LeaseRecord) -> LeaseSpec {
    LeaseSpec {
        holder_identity: Some(record.holder.clone()),
        lease_duration_seconds: Some(record.duration_seconds),
        acquire_time: record.acquire_time.map(MicroTime),
        renew_time: record.renew_time.map(MicroTime),
        lease_transitions: Some(record.transitions),
        ..spec
    }
}

/// Whether an API error is a lost write race (409 Conflict or AlreadyExists).
pub(crate) fn is_conflict(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 409)
}

/// Whether reading failed because this identity may not read it (403 Forbidden).
pub(crate) fn is_forbidden(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 403)
}
