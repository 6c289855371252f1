//! Pointing admission webhook configurations at a server on loopback and installing them.

use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::WebhookClientConfig;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::TestEnvError;

/// Field manager of everything the harness applies.
pub const FIELD_MANAGER: &str = "cftunnel-testenv";

/// Replaces a Service reference by `url_base` + its path and trusts `ca_pem`.
///
/// A Service would need Endpoints, which refuse loopback addresses, so the URL form is the only one
/// that reaches a local server.
pub(crate) fn point_at_local(
    client_config: &mut WebhookClientConfig,
    url_base: &str,
    ca_pem: &str,
) -> Result<(), TestEnvError> {
    if let Some(service) = client_config.service.take() {
        let path = service.path.unwrap_or_else(|| "/".to_string());
        let path = if path.starts_with('/') {
            path
        } else {
            format!("/{path}")
        };
        client_config.url = Some(format!("{}{path}", url_base.trim_end_matches('/')));
    }
    if client_config.url.is_none() {
        return Err(TestEnvError::InvalidWebhook(
            "clientConfig has neither service nor url".to_string(),
        ));
    }
    client_config.ca_bundle = Some(ByteString(ca_pem.as_bytes().to_vec()));
    Ok(())
}

/// Rewrites the client configuration of every webhook of a configuration (see
/// [`point_at_local`]).
pub(crate) fn localize<'a>(
    client_configs: impl Iterator<Item = &'a mut WebhookClientConfig>,
    url_base: &str,
    ca_pem: &str,
) -> Result<(), TestEnvError> {
    for client_config in client_configs {
        point_at_local(client_config, url_base, ca_pem)?;
    }
    Ok(())
}

/// Server-side applies a cluster-scoped object and waits until a GET returns it.
pub(crate) async fn apply_and_wait<K>(client: &kube::Client, object: &K) -> Result<(), TestEnvError>
where
    K: kube::Resource<Scope = k8s_openapi::ClusterResourceScope>
        + Clone
        + std::fmt::Debug
        + Serialize
        + DeserializeOwned,
    K::DynamicType: Default,
{
    let name = object
        .meta()
        .name
        .clone()
        .ok_or_else(|| TestEnvError::InvalidWebhook("metadata.name is missing".to_string()))?;
    let api: Api<K> = Api::all(client.clone());
    api.patch(
        &name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(object),
    )
    .await
    .map_err(|e| TestEnvError::kube(format!("applying {name}"), e))?;
    super::poll_until(
        &format!("{name} to be visible"),
        Duration::from_secs(30),
        Duration::from_millis(100),
        || async { api.get_opt(&name).await.ok().flatten() },
    )
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::admissionregistration::v1::ServiceReference;

    use super::*;

    fn service_config(path: Option<&str>) -> WebhookClientConfig {
        WebhookClientConfig {
            service: Some(ServiceReference {
                name: "cftunnel".to_string(),
                namespace: "cftunnel-system".to_string(),
                path: path.map(str::to_string),
                port: Some(443),
            }),
            ..Default::default()
        }
    }

    #[test]
    fn service_reference_becomes_loopback_url_with_ca_bundle() {
        let mut config = service_config(Some("/validate/tunnels"));
        point_at_local(&mut config, "https://127.0.0.1:8443/", "PEM").expect("rewrites");
        assert_eq!(config.service, None);
        assert_eq!(
            config.url.as_deref(),
            Some("https://127.0.0.1:8443/validate/tunnels")
        );
        assert_eq!(config.ca_bundle, Some(ByteString(b"PEM".to_vec())));
    }

    #[test]
    fn missing_path_means_root() {
        let mut config = service_config(None);
        point_at_local(&mut config, "https://127.0.0.1:8443", "PEM").expect("rewrites");
        assert_eq!(config.url.as_deref(), Some("https://127.0.0.1:8443/"));
    }

    #[test]
    fn config_without_target_is_rejected() {
        let mut config = WebhookClientConfig::default();
        let err = point_at_local(&mut config, "https://127.0.0.1:1", "PEM").err();
        assert_eq!(
            err.map(|e| e.to_string()).as_deref(),
            Some("invalid webhook configuration: clientConfig has neither service nor url")
        );
    }
}
