//! Storage-version migration (docs/design.md §1.2): objects still stored as v1alpha1 are rewritten in the
//! storage version, then `status.storedVersions` of the CRD is pruned to it.
//!
//! The rewrite is an empty merge patch: the API server reads the object (converting it through
//! the webhook), encodes it in the storage version and, since those bytes differ from what etcd
//! holds, writes them. An object already in the storage version encodes to identical bytes and is
//! not written at all, so a second run (or a second replica) costs reads only. The prune carries
//! the CRD's `resourceVersion` read before the rewrite: if the CRD changed meanwhile (its storage
//! version may have moved) the prune fails with 409 and the whole migration runs again.
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DynamicObject, ListParams, Patch, PatchParams};
use kube::{Api, Client};
use serde_json::json;

/// Objects per list page.
const PAGE: u32 = 200;
/// First and longest pause between attempts (the conversion webhook may not be reachable yet).
const FIRST_RETRY: Duration = Duration::from_secs(5);
const LONGEST_RETRY: Duration = Duration::from_secs(300);

/// What a migration of one CRD did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Migration {
    /// `storedVersions` held only the storage version.
    Current,
    /// Every object was rewritten and `storedVersions` pruned to `storage`.
    Migrated {
        storage: String,
        pruned: Vec<String>,
        objects: usize,
    },
}

/// Why a migration attempt failed; the caller retries.
#[derive(Debug, thiserror::Error)]
pub enum MigrationError {
    #[error("cannot {action}: {source}")]
    Kube {
        action: String,
        #[source]
        source: kube::Error,
    },
    #[error("CRD {crd} marks no version as storage version")]
    NoStorageVersion { crd: String },
    #[error("CRD {crd} changed while its objects were rewritten; migrating again")]
    CrdChanged { crd: String },
}

impl MigrationError {
    /// Short stable label for metrics and logs.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Self::Kube { .. } => "kube",
            Self::NoStorageVersion { .. } => "no_storage_version",
            Self::CrdChanged { .. } => "crd_changed",
        }
    }

    fn kube(action: impl Into<String>, source: kube::Error) -> Self {
        Self::Kube {
            action: action.into(),
            source,
        }
    }
}

/// Migrates the objects of the CRD `crd_name` once. Idempotent.
pub async fn migrate_storage(client: &Client, crd_name: &str) -> Result<Migration, MigrationError> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = crds
        .get(crd_name)
        .await
        .map_err(|e| MigrationError::kube(format!("read CRD {crd_name}"), e))?;
    let storage = crd
        .spec
        .versions
        .iter()
        .find(|v| v.storage)
        .map(|v| v.name.clone())
        .ok_or_else(|| MigrationError::NoStorageVersion {
            crd: crd_name.to_owned(),
        })?;
    let stored = crd
        .status
        .as_ref()
        .and_then(|s| s.stored_versions.clone())
        .unwrap_or_default();
    let pruned: Vec<String> = stored.into_iter().filter(|v| *v != storage).collect();
    if pruned.is_empty() {
        return Ok(Migration::Current);
    }
    let objects = rewrite_all(client, &crd, &storage).await?;
    let prune = json!({
        "metadata": {"resourceVersion": crd.metadata.resource_version},
        "status": {"storedVersions": [storage]},
    });
    match crds
        .patch_status(crd_name, &PatchParams::default(), &Patch::Merge(&prune))
        .await
    {
        Ok(_) => Ok(Migration::Migrated {
            storage,
            pruned,
            objects,
        }),
        Err(kube::Error::Api(status)) if status.is_conflict() => Err(MigrationError::CrdChanged {
            crd: crd_name.to_owned(),
        }),
        Err(e) => Err(MigrationError::kube(
            format!("prune status.storedVersions of CRD {crd_name}"),
            e,
        )),
    }
}

/// Rewrites every object of `crd` through the `storage` version; returns how many were patched.
async fn rewrite_all(
    client: &Client,
    crd: &CustomResourceDefinition,
    storage: &str,
) -> Result<usize, MigrationError> {
    let resource = ApiResource {
        group: crd.spec.group.clone(),
        version: storage.to_owned(),
        api_version: format!("{}/{storage}", crd.spec.group),
        kind: crd.spec.names.kind.clone(),
        plural: crd.spec.names.plural.clone(),
    };
    let all: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let mut params = ListParams::default().limit(PAGE);
    let mut objects = 0;
    loop {
        let page = all
            .list(&params)
            .await
            .map_err(|e| MigrationError::kube(format!("list {}", resource.plural), e))?;
        for object in &page.items {
            let name = object.metadata.name.clone().unwrap_or_default();
            let api = match &object.metadata.namespace {
                Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
                None => all.clone(),
            };
            match api
                .patch(&name, &PatchParams::default(), &Patch::Merge(json!({})))
                .await
            {
                Ok(_) => objects += 1,
                // Deleted since the list: nothing left to migrate.
                Err(kube::Error::Api(status)) if status.is_not_found() => {}
                Err(e) => {
                    let place = match &object.metadata.namespace {
                        Some(ns) => format!("{ns}/{name}"),
                        None => name.clone(),
                    };
                    return Err(MigrationError::kube(
                        format!("rewrite {} {place} in {storage}", resource.kind),
                        e,
                    ));
                }
            }
        }
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(objects),
        }
    }
}

/// Migrates each CRD of `crd_names`, retrying with backoff until every one is done (the
/// conversion webhook it depends on may still be starting). Safe on several replicas at once.
pub async fn run(client: Client, crd_names: Vec<String>) {
    for crd in crd_names {
        let mut wait = FIRST_RETRY;
        let mut attempt = 1u32;
        loop {
            match migrate_storage(&client, &crd).await {
                Ok(Migration::Current) => {
                    tracing::debug!(%crd, "storage version migration: nothing stored in older versions");
                    break;
                }
                Ok(Migration::Migrated {
                    storage,
                    pruned,
                    objects,
                }) => {
                    tracing::info!(
                        %crd, objects, %storage, pruned = %pruned.join(","),
                        "storage version migration done: objects rewritten, status.storedVersions pruned"
                    );
                    break;
                }
                Err(error) => {
                    tracing::warn!(%crd, attempt, %error, retry_in = ?wait, "storage version migration failed; retrying");
                }
            }
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(LONGEST_RETRY);
            attempt = attempt.saturating_add(1);
        }
    }
}
