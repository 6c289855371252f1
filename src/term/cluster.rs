//! This cluster's identity in DNS ownership: every record cftunnel writes names it, in the
//! comment marker and in the `_managed` TXT, so two clusters connected to one tunnel are never
//! the same owner (docs/design.md §3.3). `--cluster-id` when given; else the uid of the
//! `kube-system` Namespace, which every cluster has and which lives as long as the cluster.
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::{Api, Client};

use cftunnel_policy::dns::ClusterId;

/// The Namespace whose uid names the cluster by default.
pub const IDENTITY_NAMESPACE: &str = "kube-system";

/// Pause between reads while the API server does not answer.
const RETRY: Duration = Duration::from_secs(2);

/// The configured identity, or the uid of [`IDENTITY_NAMESPACE`].
pub async fn read_cluster_id(
    client: &Client,
    configured: Option<&str>,
) -> Result<ClusterId, String> {
    if let Some(id) = configured {
        return ClusterId::new(id);
    }
    let namespace = Api::<Namespace>::all(client.clone())
        .get(IDENTITY_NAMESPACE)
        .await
        .map_err(|e| format!("reading Namespace {IDENTITY_NAMESPACE} for the cluster id: {e}"))?;
    let uid = namespace.metadata.uid.unwrap_or_default();
    ClusterId::new(&uid.to_ascii_lowercase())
        .map_err(|e| format!("Namespace {IDENTITY_NAMESPACE} has no usable uid: {e}"))
}

/// [`read_cluster_id`], retried until it succeeds: no DNS record is written without it.
pub async fn wait_for_cluster_id(client: &Client, configured: Option<&str>) -> ClusterId {
    loop {
        match read_cluster_id(client, configured).await {
            Ok(id) => {
                tracing::info!(cluster_id = %id, "cluster identity of the DNS records");
                return id;
            }
            Err(error) => {
                tracing::warn!(%error, "no cluster identity yet; DNS waits for it");
                tokio::time::sleep(RETRY).await;
            }
        }
    }
}
