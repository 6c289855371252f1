//! Points the shipped webhook configurations and CRD conversion at a running cftunnel webhook.
//! Used by the local demo and the tests, so both exercise `manifests/webhooks.yaml` as shipped.
use std::net::SocketAddr;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

use cftunnel_types::crds::CONVERTED_CRDS;

use crate::{ControlPlane, TestEnvError};

/// The shipped configurations (`manifests/webhooks.yaml`).
pub(crate) const WEBHOOKS_YAML: &str = include_str!("../../../manifests/webhooks.yaml");

/// The two configurations of `manifests/webhooks.yaml`.
pub fn shipped_webhooks()
-> Result<(ValidatingWebhookConfiguration, MutatingWebhookConfiguration), serde_yaml_ng::Error> {
    let mut docs = serde_yaml_ng::Deserializer::from_str(WEBHOOKS_YAML);
    let validating = docs
        .next()
        .map(serde::Deserialize::deserialize)
        .transpose()?;
    let mutating = docs
        .next()
        .map(serde::Deserialize::deserialize)
        .transpose()?;
    match (validating, mutating) {
        (Some(v), Some(m)) => Ok((v, m)),
        _ => Err(serde::de::Error::custom(
            "manifests/webhooks.yaml must hold a validating and a mutating configuration",
        )),
    }
}

/// Registers the shipped webhooks and the CRD conversion at `https://<addr>`, trusting the
/// plane's CA. With `opt_in`, every webhook also requires that namespace label (tests use it
/// to store objects before "installing" cftunnel).
pub async fn register_webhook(
    plane: &ControlPlane,
    addr: SocketAddr,
    opt_in: Option<(&str, &str)>,
) -> Result<(), TestEnvError> {
    let (mut validating, mut mutating) = shipped_webhooks()
        .map_err(|e| TestEnvError::InvalidWebhook(format!("manifests/webhooks.yaml: {e}")))?;
    if let Some((key, value)) = opt_in {
        let require = |selector: &mut LabelSelector| {
            selector
                .match_expressions
                .get_or_insert_default()
                .push(LabelSelectorRequirement {
                    key: key.into(),
                    operator: "In".into(),
                    values: Some(vec![value.into()]),
                })
        };
        validating
            .webhooks
            .iter_mut()
            .flatten()
            .for_each(|w| require(w.namespace_selector.get_or_insert_default()));
        mutating
            .webhooks
            .iter_mut()
            .flatten()
            .for_each(|w| require(w.namespace_selector.get_or_insert_default()));
    }
    let url = format!("https://{addr}");
    let ca = plane.ca().cert_pem().to_string();
    plane
        .register_webhooks(Some(validating), Some(mutating), &url, &ca)
        .await?;
    plane.register_conversion(CONVERTED_CRDS, &url, &ca).await
}
