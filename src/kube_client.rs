//! The Kubernetes client `cftunnel run` talks to the API server with: the inferred
//! configuration (in-cluster service account or kubeconfig), sending `User-Agent:
//! cftunnel/<version>` so the API server's audit log and metrics tell cftunnel's calls apart
//! (kube-rs sends no User-Agent of its own).
use http::HeaderValue;
use http::header::USER_AGENT as USER_AGENT_HEADER;

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

#[cfg(test)]
mod tests {
    use super::*;

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
