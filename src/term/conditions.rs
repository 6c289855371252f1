//! The `Ready` condition and its typed reasons.
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

pub(crate) const READY: &str = "Ready";

/// Why a tunnel is (not) ready. The string form is the condition reason and the Event reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadyReason {
    Ready,
    InvalidSpec,
    SecretNotFound,
    SecretKeyMissing,
    CloudflareAuthFailed,
    CloudflareError,
    AccountNotFound,
    ZoneNotFound,
    TunnelNotFound,
    TunnelDeleted,
    TunnelNameConflict,
    /// Another object runs the same Cloudflare tunnel id (`term/claims.rs`).
    TunnelIdConflict,
    RemotelyManagedTunnel,
    /// A remotely-managed tunnel's configuration could not be pushed (the message has the
    /// API's error); the workload was left as it was.
    ConfigurationPushFailed,
    CredentialsInvalid,
    NameConflict,
    RenderFailed,
    KubernetesError,
    /// Hostnames are served closed because the AccessPolicies cannot be known (the message
    /// says why and which); everything else is configured.
    AccessPoliciesUnknown,
    /// Deletion in progress, waiting for something the message names.
    Deleting,
}

impl ReadyReason {
    pub fn as_str(&self) -> &'static str {
        match self {
            ReadyReason::Ready => "Ready",
            ReadyReason::InvalidSpec => "InvalidSpec",
            ReadyReason::SecretNotFound => "SecretNotFound",
            ReadyReason::SecretKeyMissing => "SecretKeyMissing",
            ReadyReason::CloudflareAuthFailed => "CloudflareAuthFailed",
            ReadyReason::CloudflareError => "CloudflareError",
            ReadyReason::AccountNotFound => "AccountNotFound",
            ReadyReason::ZoneNotFound => "ZoneNotFound",
            ReadyReason::TunnelNotFound => "TunnelNotFound",
            ReadyReason::TunnelDeleted => "TunnelDeleted",
            ReadyReason::TunnelNameConflict => "TunnelNameConflict",
            ReadyReason::TunnelIdConflict => "TunnelIdConflict",
            ReadyReason::RemotelyManagedTunnel => "RemotelyManagedTunnel",
            ReadyReason::ConfigurationPushFailed => "ConfigurationPushFailed",
            ReadyReason::CredentialsInvalid => "CredentialsInvalid",
            ReadyReason::NameConflict => "NameConflict",
            ReadyReason::RenderFailed => "RenderFailed",
            ReadyReason::KubernetesError => "KubernetesError",
            ReadyReason::AccessPoliciesUnknown => "AccessPoliciesUnknown",
            ReadyReason::Deleting => "Deleting",
        }
    }

    fn status(&self) -> &'static str {
        if *self == ReadyReason::Ready {
            "True"
        } else {
            "False"
        }
    }
}

/// The new `Ready` condition; `lastTransitionTime` moves only when the status flips.
pub fn ready_condition(
    previous: Option<&Condition>,
    reason: ReadyReason,
    message: &str,
    generation: Option<i64>,
    now: Time,
) -> Condition {
    let status = reason.status();
    let last_transition_time = match previous {
        Some(p) if p.status == status => p.last_transition_time.clone(),
        _ => now,
    };
    Condition {
        type_: READY.to_string(),
        status: status.to_string(),
        reason: reason.as_str().to_string(),
        message: message.to_string(),
        observed_generation: generation,
        last_transition_time,
    }
}

/// Replaces (or adds) the `Ready` entry, keeping other condition types.
pub(crate) fn with_ready(conditions: Option<&Vec<Condition>>, ready: Condition) -> Vec<Condition> {
    let mut out: Vec<Condition> = conditions
        .map(|c| c.iter().filter(|c| c.type_ != READY).cloned().collect())
        .unwrap_or_default();
    out.insert(0, ready);
    out
}

pub(crate) fn find_ready(conditions: Option<&Vec<Condition>>) -> Option<&Condition> {
    conditions?.iter().find(|c| c.type_ == READY)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn time(secs: i64) -> Time {
        Time(jiff::Timestamp::from_second(secs).unwrap_or(jiff::Timestamp::UNIX_EPOCH))
    }

    #[test]
    fn transition_time_moves_only_when_status_changes() {
        let first = ready_condition(None, ReadyReason::SecretNotFound, "a", Some(1), time(10));
        let same = ready_condition(
            Some(&first),
            ReadyReason::SecretKeyMissing,
            "b",
            Some(2),
            time(20),
        );
        assert_eq!(same.last_transition_time, time(10));
        assert_eq!(same.reason, "SecretKeyMissing");
        let flipped = ready_condition(Some(&same), ReadyReason::Ready, "ok", Some(2), time(30));
        assert_eq!(flipped.last_transition_time, time(30));
        assert_eq!(flipped.status, "True");
    }

    #[test]
    fn ready_replaces_only_its_own_entry() {
        let other = Condition {
            type_: "RoutesReady".into(),
            status: "True".into(),
            reason: "Ok".into(),
            message: String::new(),
            observed_generation: None,
            last_transition_time: time(1),
        };
        let ready = ready_condition(None, ReadyReason::Ready, "", None, time(2));
        let out = with_ready(Some(&vec![other.clone()]), ready.clone());
        assert_eq!(out, vec![ready, other]);
    }
}
