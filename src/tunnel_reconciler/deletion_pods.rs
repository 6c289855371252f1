//! Which cloudflared pods still hold a deletion, and for how long.
//!
//! The tunnel is deleted on Cloudflare only once its connectors stopped, but some pods never go
//! away on their own: a Failed or Succeeded pod (evicted, OOM-killed at start) stays until the
//! pod garbage collector's threshold, and a pod on a lost node stays Terminating until someone
//! force-deletes it. So:
//! - Failed and Succeeded pods never hold the deletion (they run no connector);
//! - every other pod holds it at most `--deletion-pod-wait` (default 2 min) from the object's
//!   own `deletionTimestamp`; after that the connections are cleaned up on Cloudflare, which
//!   disconnects whatever still runs, and the tunnel is deleted.
//!
//! The bound is measured against the API server's `deletionTimestamp` with this process's clock:
//! skew between the two moves the bound by the skew, never makes it unbounded.
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;

/// What the pods mean for a deletion at `now`.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum PodWait {
    /// No pod runs a connector any more (or the wait is over).
    Done,
    /// These pods (sorted names) still run; the wait ends at `until`.
    Waiting {
        pods: Vec<String>,
        until: jiff::Timestamp,
    },
}

/// Does `pod` still hold a deletion (it may run a connector)?
fn holds(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    !matches!(phase, Some("Failed") | Some("Succeeded"))
}

/// When the wait of an object whose deletion started at `deleted_at` ends.
pub fn wait_until(
    deleted_at: Option<&Time>,
    bound: Duration,
    now: jiff::Timestamp,
) -> jiff::Timestamp {
    let start = deleted_at.map(|t| t.0).unwrap_or(now);
    let bound = jiff::SignedDuration::try_from(bound).unwrap_or(jiff::SignedDuration::MAX);
    start.checked_add(bound).unwrap_or(jiff::Timestamp::MAX)
}

/// The wait for `pods` of an object whose deletion started at `deleted_at`.
pub(crate) fn pod_wait(
    pods: &[Pod],
    deleted_at: Option<&Time>,
    bound: Duration,
    now: jiff::Timestamp,
) -> PodWait {
    let mut holding: Vec<String> = pods
        .iter()
        .filter(|p| holds(p))
        .map(|p| p.name_any())
        .collect();
    if holding.is_empty() {
        return PodWait::Done;
    }
    let until = wait_until(deleted_at, bound, now);
    if now >= until {
        return PodWait::Done;
    }
    holding.sort();
    PodWait::Waiting {
        pods: holding,
        until,
    }
}

/// The `Ready` message while waiting.
pub(crate) fn waiting_message(tunnel: &str, pods: &[String], until: jiff::Timestamp) -> String {
    let shown: Vec<&str> = pods.iter().take(5).map(String::as_str).collect();
    let more = pods.len().saturating_sub(shown.len());
    let list = if more > 0 {
        format!("{} and {more} more", shown.join(", "))
    } else {
        shown.join(", ")
    };
    format!(
        "deleting: waiting for {} cloudflared pod(s) to stop ({list}) before tunnel {tunnel} is deleted on Cloudflare; not waited for after {} (--deletion-pod-wait)",
        pods.len(),
        until.strftime("%Y-%m-%dT%H:%M:%SZ"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::term::options::DEFAULT_DELETION_POD_WAIT;
    use serde_json::json;

    fn pod(name: &str, phase: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "status": {"phase": phase},
        }))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    fn at(secs: i64) -> jiff::Timestamp {
        jiff::Timestamp::from_second(secs).unwrap_or(jiff::Timestamp::UNIX_EPOCH)
    }

    #[test]
    fn finished_pods_never_hold_a_deletion() {
        let pods = [pod("a", "Failed"), pod("b", "Succeeded")];
        let wait = pod_wait(
            &pods,
            Some(&Time(at(100))),
            DEFAULT_DELETION_POD_WAIT,
            at(100),
        );
        assert_eq!(wait, PodWait::Done);
    }

    #[test]
    fn running_or_stuck_pods_hold_it_until_the_bound() {
        let pods = [pod("b", "Running"), pod("a", "Pending"), pod("c", "Failed")];
        let start = Some(Time(at(100)));
        let bound = Duration::from_secs(120);
        assert_eq!(
            pod_wait(&pods, start.as_ref(), bound, at(219)),
            PodWait::Waiting {
                pods: vec!["a".into(), "b".into()],
                until: at(220),
            }
        );
        assert_eq!(
            pod_wait(&pods, start.as_ref(), bound, at(220)),
            PodWait::Done
        );
    }

    #[test]
    fn the_message_names_the_pods_and_the_end_of_the_wait() {
        let pods: Vec<String> = (0..7).map(|i| format!("p{i}")).collect();
        let message = waiting_message("web", &pods, at(0));
        assert_eq!(
            message,
            "deleting: waiting for 7 cloudflared pod(s) to stop (p0, p1, p2, p3, p4 and 2 more) before tunnel web is deleted on Cloudflare; not waited for after 1970-01-01T00:00:00Z (--deletion-pod-wait)"
        );
    }
}
