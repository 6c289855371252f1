//! Keeps `cfargotunnel.com/checksum` on user-managed cloudflared Deployments and DaemonSets (e.g.
//! the `cloudflare-tunnel` Helm chart's) equal to the hash of the ConfigMaps their pods mount, so
//! a config change rolls the pods (docs/design.md §2.3). Workloads controlled by a Tunnel are left to the
//! tunnel reconciler. The admission path never reads ConfigMaps: stamping happens here.
//!
//! Runs only in the leader. Workloads are watched by label; ConfigMaps metadata-only (names and
//! resourceVersions), so memory stays small however many unrelated ConfigMaps the cluster has.
//! Both watches are the term's shared ones ([`crate::caches::TermCaches`]).
use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Patch, PatchParams};
use kube::core::PartialObjectMeta;
use kube::runtime::controller::{Action, Config, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, Client, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::caches::{Shared, TermCaches, kept_by_cftunnel};
use crate::metrics::Metrics;
use cftunnel_policy::hardening::mutate::{
    ConfigMapContent, config_checksum, mounted_config_maps, restamp,
};

#[derive(Debug, thiserror::Error)]
pub(crate) enum ChecksumError {
    #[error("reading ConfigMap {namespace}/{name}: {source}")]
    ReadConfigMap {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("stamping {kind} {namespace}/{name}: {source}")]
    Stamp {
        kind: String,
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("serializing the workload: {0}")]
    Serialize(#[from] serde_json::Error),
}

struct Context {
    client: Client,
}

/// Runs the watchers for Deployments and DaemonSets until the term ends, from the term's
/// shared watches of the watched namespace (the first of each list).
pub async fn run(client: Client, caches: TermCaches, metrics: Arc<Metrics>) {
    let (Some(deployments), Some(daemon_sets), Some(config_maps)) = (
        caches.deployments.first(),
        caches.daemon_sets.first(),
        caches.config_maps.first(),
    ) else {
        return;
    };
    let deployments = watch(client.clone(), deployments.clone(), config_maps, &metrics);
    let daemon_sets = watch(client, daemon_sets.clone(), config_maps, &metrics);
    futures::join!(deployments, daemon_sets);
}

async fn watch<K>(
    client: Client,
    workloads: Shared<K, Store<K>>,
    config_maps: &Shared<PartialObjectMeta<ConfigMap>>,
    metrics: &Metrics,
) where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + Debug
        + Serialize
        + DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let store = workloads.store();
    Controller::for_shared_stream(workloads.objects(), workloads.store())
        .watches_shared_stream(
            config_maps.changes(),
            move |cm: Arc<PartialObjectMeta<ConfigMap>>| {
                let namespace = cm.namespace().unwrap_or_default();
                let name = cm.name_any();
                store
                    .state()
                    .into_iter()
                    .filter(|w| w.namespace().as_deref() == Some(namespace.as_str()))
                    .filter(|w| !kept_by_cftunnel(w.meta()))
                    .filter(|w| {
                        pod_spec(w.as_ref())
                            .is_some_and(|pod| mounted_config_maps(&pod).contains(&name))
                    })
                    .map(|w| ObjectRef::from_obj(w.as_ref()))
                    .collect::<Vec<_>>()
            },
        )
        .with_config(Config::default().concurrency(CONCURRENCY))
        .run(
            reconcile::<K>,
            error_policy::<K>,
            Arc::new(Context { client }),
        )
        .for_each(|result| async move {
            metrics.controller_event(&K::kind(&()), &result);
            if let Err(e) = result {
                tracing::debug!(error = %e, "checksum watcher event");
            }
        })
        .await;
}

/// Stamps running at once. The watcher only reads ConfigMaps and patches one annotation: a
/// few at a time keep up with any edit rate, and a new leader facing thousands of user-managed
/// workloads does not open a connection per workload.
const CONCURRENCY: u16 = 4;

fn pod_spec<K: Serialize>(workload: &K) -> Option<Value> {
    serde_json::to_value(workload)
        .ok()?
        .pointer("/spec/template/spec")
        .cloned()
}

async fn reconcile<K>(workload: Arc<K>, ctx: Arc<Context>) -> Result<Action, ChecksumError>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + Debug
        + Serialize
        + DeserializeOwned,
{
    if kept_by_cftunnel(workload.meta()) {
        return Ok(Action::await_change());
    }
    let namespace = workload.namespace().unwrap_or_default();
    let mut object = serde_json::to_value(workload.as_ref())?;
    // The stores keep no `apiVersion`/`kind` (a watch's objects are all of one kind), and the
    // stamp is decided by kind: put them back.
    if let Some(fields) = object.as_object_mut() {
        fields.insert("apiVersion".into(), K::api_version(&()).into());
        fields.insert("kind".into(), K::kind(&()).into());
    }
    let names = object
        .pointer("/spec/template/spec")
        .map(mounted_config_maps)
        .unwrap_or_default();
    let config_maps: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &namespace);
    let mut contents: Vec<ConfigMapContent> = Vec::with_capacity(names.len());
    for name in names {
        let found =
            config_maps
                .get_opt(&name)
                .await
                .map_err(|source| ChecksumError::ReadConfigMap {
                    namespace: namespace.clone(),
                    name: name.clone(),
                    source,
                })?;
        // A missing (optional) ConfigMap counts as absent: creating it changes the checksum.
        if let Some(cm) = found {
            let binary: BTreeMap<String, String> = cm
                .binary_data
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| {
                    (
                        k,
                        base64::Engine::encode(&base64::engine::general_purpose::STANDARD, v.0),
                    )
                })
                .collect();
            contents.push((name, cm.data.unwrap_or_default(), binary));
        }
    }
    if let Some(patch) = restamp(&object, &config_checksum(&contents)) {
        let api: Api<K> = Api::namespaced(ctx.client.clone(), &namespace);
        api.patch(
            &workload.name_any(),
            &PatchParams::default(),
            &Patch::<()>::Json(patch),
        )
        .await
        .map_err(|source| ChecksumError::Stamp {
            kind: K::kind(&()).into_owned(),
            namespace: namespace.clone(),
            name: workload.name_any(),
            source,
        })?;
        tracing::info!(
            namespace,
            name = workload.name_any(),
            "stamped the config checksum"
        );
    }
    Ok(Action::await_change())
}

fn error_policy<K>(_workload: Arc<K>, error: &ChecksumError, _ctx: Arc<Context>) -> Action {
    tracing::warn!(%error, "config checksum not updated; retrying");
    Action::requeue(Duration::from_secs(10))
}
