//! The Kubernetes client `cftunnel run` talks to the API server with: the inferred
//! configuration (in-cluster service account or kubeconfig), sending `User-Agent:
//! cftunnel/<version>` so the API server's audit log and metrics tell cftunnel's calls apart
//! (kube-rs sends no User-Agent of its own). Also whether the API server answers at all, which
//! `/readyz` reports.
use std::time::Duration;

use http::HeaderValue;
use http::header::USER_AGENT as USER_AGENT_HEADER;
use tokio::time::Instant;

pub use cftunnel_cloudflare::USER_AGENT;

/// Adds the User-Agent header to a client configuration.
pub fn identified(mut config: kube::Config) -> kube::Config {
    config.headers.retain(|(name, _)| name != USER_AGENT_HEADER);
    config
        .headers
        .push((USER_AGENT_HEADER, HeaderValue::from_static(USER_AGENT)));
    config
}

/// A client for the inferred configuration, identified as cftunnel.
pub async fn client() -> anyhow::Result<kube::Client> {
    let config = kube::Config::infer().await?;
    Ok(kube::Client::try_from(identified(config))?)
}

/// How often the API server is asked whether it answers (`GET /version`, allowed to everyone).
pub const PROBE_INTERVAL: Duration = Duration::from_secs(2);
/// Longest wait for one answer.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// An API server that has not answered for this long counts as unreachable: long enough that
/// one slow answer or a restart of a watch does not flap readiness.
pub const UNREACHABLE_AFTER: Duration = Duration::from_secs(5);

/// Whether the API server answers, judged from the outcomes of probes.
#[derive(Debug, Clone, Copy)]
pub struct Reachability {
    last_answer: Instant,
    reachable: bool,
}

impl Reachability {
    /// Starts reachable: the process got this far by talking to it.
    pub fn new(now: Instant) -> Self {
        Reachability {
            last_answer: now,
            reachable: true,
        }
    }

    /// Takes one probe's outcome; `Some(reachable)` when that changes.
    pub fn observe(&mut self, answered: bool, now: Instant) -> Option<bool> {
        if answered {
            self.last_answer = now;
        }
        let reachable = now.saturating_duration_since(self.last_answer) < UNREACHABLE_AFTER;
        (reachable != self.reachable).then(|| {
            self.reachable = reachable;
            reachable
        })
    }
}

/// Probes the API server every [`PROBE_INTERVAL`] for as long as it is polled, and calls
/// `report` with each change of reachability. A lost API server is a warning, never a reason to
/// exit: watches resume and leadership is sought again once it answers.
pub async fn track_reachability(client: kube::Client, report: impl Fn(bool)) {
    let mut state = Reachability::new(Instant::now());
    loop {
        tokio::time::sleep(PROBE_INTERVAL).await;
        let answered = matches!(
            tokio::time::timeout(PROBE_TIMEOUT, client.apiserver_version()).await,
            Ok(Ok(_))
        );
        if let Some(reachable) = state.observe(answered, Instant::now()) {
            match reachable {
                true => tracing::info!("the API server answers again; ready"),
                false => tracing::warn!(
                    after_s = UNREACHABLE_AFTER.as_secs(),
                    "the API server does not answer; not ready until it does"
                ),
            }
            report(reachable);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn reachability_is_lost_only_after_a_silence_and_back_at_the_first_answer() {
        let start = Instant::now();
        let mut state = Reachability::new(start);
        let at = |s: u64| start + Duration::from_secs(s);
        assert_eq!(state.observe(false, at(2)), None);
        assert_eq!(state.observe(false, at(4)), None);
        assert_eq!(state.observe(false, at(6)), Some(false));
        assert_eq!(state.observe(false, at(8)), None);
        assert_eq!(state.observe(true, at(10)), Some(true));
        assert_eq!(state.observe(true, at(12)), None);
        assert_eq!(
            state.observe(false, at(14)),
            None,
            "one missed answer is not an outage"
        );
    }

    #[test]
    fn configuration_carries_one_cftunnel_user_agent() {
        let url: http::Uri = "https://127.0.0.1:6443".parse().unwrap_or_default();
        let mut config = kube::Config::new(url);
        config
            .headers
            .push((USER_AGENT_HEADER, HeaderValue::from_static("other")));
        let config = identified(config);
        let agents: Vec<&HeaderValue> = config
            .headers
            .iter()
            .filter(|(name, _)| name == USER_AGENT_HEADER)
            .map(|(_, value)| value)
            .collect();
        assert_eq!(agents, vec![&HeaderValue::from_static(USER_AGENT)]);
        assert!(USER_AGENT.starts_with("cftunnel/0."), "{USER_AGENT}");
    }
}
