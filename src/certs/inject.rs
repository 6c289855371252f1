//! Fills in `caBundle` of the webhook configurations and of the CRD conversion webhooks.
//!
//! Each object is read first and written only when a bundle differs. The write is a server-side
//! apply under [`FIELD_MANAGER`] holding nothing but the `caBundle` fields (and the list keys
//! that locate them), so `kubectl apply` or `helm upgrade` of the manifests, which carry no
//! `caBundle`, never fight it.
use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::{CertError, CertSettings, FIELD_MANAGER};

/// Puts `bundle` (PEM) into every webhook of both configurations and into the conversion
/// webhook of each converted CRD. Returns how many objects were written.
pub async fn inject_ca_bundle(
    client: &Client,
    settings: &CertSettings,
    bundle: &str,
) -> Result<usize, CertError> {
    let wanted = ByteString(bundle.as_bytes().to_vec());
    let name = &settings.webhook_configuration;
    let mut written = 0;

    written +=
        inject_webhooks::<ValidatingWebhookConfiguration>(client, name, &wanted, bundle).await?;
    written +=
        inject_webhooks::<MutatingWebhookConfiguration>(client, name, &wanted, bundle).await?;

    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd_name in &settings.converted_crds {
        let live = read(&crds, crd_name).await?;
        let Some(config) = live
            .spec
            .conversion
            .as_ref()
            .and_then(|c| c.webhook.as_ref())
            .and_then(|w| w.client_config.as_ref())
        else {
            // The start-up CRD check reports a CRD without a conversion webhook.
            continue;
        };
        if config.ca_bundle.as_ref() == Some(&wanted) {
            continue;
        }
        let patch = json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": crd_name},
            "spec": {"conversion": {"webhook": {"clientConfig": {"caBundle": encode(bundle)}}}},
        });
        write(&crds, crd_name, &patch).await?;
        written += 1;
    }
    if written > 0 {
        tracing::info!(
            objects = written,
            "injected the webhook CA bundle into caBundle"
        );
    }
    Ok(written)
}

/// A webhook configuration: its webhooks' names and bundles.
trait WebhookConfiguration:
    Resource<DynamicType = ()> + Clone + std::fmt::Debug + DeserializeOwned
{
    fn bundles(&self) -> Vec<(&String, &Option<ByteString>)>;
}

impl WebhookConfiguration for ValidatingWebhookConfiguration {
    fn bundles(&self) -> Vec<(&String, &Option<ByteString>)> {
        let webhooks = self.webhooks.iter().flatten();
        webhooks
            .map(|w| (&w.name, &w.client_config.ca_bundle))
            .collect()
    }
}

impl WebhookConfiguration for MutatingWebhookConfiguration {
    fn bundles(&self) -> Vec<(&String, &Option<ByteString>)> {
        let webhooks = self.webhooks.iter().flatten();
        webhooks
            .map(|w| (&w.name, &w.client_config.ca_bundle))
            .collect()
    }
}

/// Reads the configuration `name` of kind `K` and writes `bundle` into its webhooks when one
/// differs; 1 when it wrote.
async fn inject_webhooks<K: WebhookConfiguration>(
    client: &Client,
    name: &str,
    wanted: &ByteString,
    bundle: &str,
) -> Result<usize, CertError> {
    let api: Api<K> = Api::all(client.clone());
    let live = read(&api, name).await?;
    let names = webhooks_to_write(live.bundles().into_iter(), wanted);
    apply_webhooks::<K>(&api, name, &names, bundle).await
}

/// Names of all webhooks when any `caBundle` is not `wanted`, else none. All are listed
/// because an apply that omits a field this manager owned would remove it.
fn webhooks_to_write<'a>(
    webhooks: impl Iterator<Item = (&'a String, &'a Option<ByteString>)>,
    wanted: &ByteString,
) -> Vec<String> {
    let mut stale = false;
    let names = webhooks
        .map(|(name, bundle)| {
            stale |= bundle.as_ref() != Some(wanted);
            name.clone()
        })
        .collect();
    if stale { names } else { Vec::new() }
}

async fn apply_webhooks<K>(
    api: &Api<K>,
    name: &str,
    webhooks: &[String],
    bundle: &str,
) -> Result<usize, CertError>
where
    K: Resource<DynamicType = ()> + Clone + std::fmt::Debug + DeserializeOwned,
{
    if webhooks.is_empty() {
        return Ok(0);
    }
    let entries: Vec<Value> = webhooks
        .iter()
        .map(|w| json!({"name": w, "clientConfig": {"caBundle": encode(bundle)}}))
        .collect();
    let patch = json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "metadata": {"name": name},
        "webhooks": entries,
    });
    write(api, name, &patch).await?;
    Ok(1)
}

async fn read<K>(api: &Api<K>, name: &str) -> Result<K, CertError>
where
    K: Resource<DynamicType = ()> + Clone + std::fmt::Debug + DeserializeOwned,
{
    api.get_opt(name)
        .await
        .map_err(|e| CertError::kube(format!("read {} {name}", K::kind(&())), e))?
        .ok_or_else(|| CertError::MissingTarget {
            kind: K::kind(&()).into_owned(),
            name: name.to_owned(),
        })
}

async fn write<K>(api: &Api<K>, name: &str, patch: &Value) -> Result<(), CertError>
where
    K: Resource<DynamicType = ()> + Clone + std::fmt::Debug + DeserializeOwned,
{
    api.patch(
        name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(patch),
    )
    .await
    .map_err(|e| CertError::kube(format!("set caBundle of {} {name}", K::kind(&())), e))?;
    Ok(())
}

fn encode(pem: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(pem)
}
