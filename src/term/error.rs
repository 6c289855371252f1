//! Why a reconcile did not converge, and the `Ready` reason it is reported with.
use cftunnel_cloudflare::CloudflareError;
use cftunnel_policy::render::RenderError;
use cftunnel_types::names::ANNOTATION_ABANDON_CLEANUP;

use super::conditions::ReadyReason;

/// Why a reconcile did not converge. Messages never carry credentials.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// A condition the user has to act on; reported as `Ready=False` with this reason.
    #[error("{message}")]
    Blocked {
        reason: ReadyReason,
        message: String,
    },
    #[error("Kubernetes API call failed while {action}: {source}")]
    Kube {
        action: &'static str,
        #[source]
        source: kube::Error,
    },
    #[error("{action}: {source}")]
    Cloudflare {
        action: &'static str,
        #[source]
        source: CloudflareError,
    },
    /// The configuration of a remotely-managed tunnel could not be read or pushed; nothing
    /// of the new render was applied, so the workload keeps serving what it served.
    #[error(
        "the tunnel's configuration was not pushed to Cloudflare, so its workload keeps the configuration it runs until a push succeeds: {source}"
    )]
    Push {
        #[source]
        source: CloudflareError,
    },
    #[error(transparent)]
    Render(#[from] RenderError),
}

impl ReconcileError {
    pub fn blocked(reason: ReadyReason, message: String) -> Self {
        ReconcileError::Blocked { reason, message }
    }

    pub fn kube(action: &'static str, source: kube::Error) -> Self {
        ReconcileError::Kube { action, source }
    }

    pub fn cloudflare(action: &'static str, source: CloudflareError) -> Self {
        ReconcileError::Cloudflare { action, source }
    }

    /// Reading or pushing a remotely-managed tunnel's configuration failed.
    pub fn push(source: CloudflareError) -> Self {
        ReconcileError::Push { source }
    }

    /// The `Ready` reason this failure is reported with.
    pub fn reason(&self) -> ReadyReason {
        match self {
            ReconcileError::Blocked { reason, .. } => *reason,
            ReconcileError::Kube { .. } => ReadyReason::KubernetesError,
            ReconcileError::Cloudflare { source, .. } if source.is_auth() => {
                ReadyReason::CloudflareAuthFailed
            }
            ReconcileError::Cloudflare { .. } => ReadyReason::CloudflareError,
            ReconcileError::Push { .. } => ReadyReason::ConfigurationPushFailed,
            ReconcileError::Render(_) => ReadyReason::RenderFailed,
        }
    }

    /// The same failure, reported on a deleting object: what blocks the deletion and how a user
    /// lets it finish when Cloudflare refuses for good.
    pub(crate) fn while_deleting(self) -> Self {
        let reason = self.reason();
        ReconcileError::Blocked {
            reason,
            message: format!(
                "deletion is blocked: {self}; it resumes once this is fixed, or annotate the object {ANNOTATION_ABANDON_CLEANUP}=true to finish it and leave the tunnel and its DNS records on Cloudflare"
            ),
        }
    }

    /// Will this failure pass by itself (a Cloudflare 5xx, 429, timeout or lost connection)?
    pub fn is_transient(&self) -> bool {
        match self {
            ReconcileError::Cloudflare { source, .. } | ReconcileError::Push { source } => {
                source.is_transient()
            }
            _ => false,
        }
    }

    /// A short, bounded label for metrics.
    pub fn metric_label(&self) -> &'static str {
        self.reason().as_str()
    }
}
