//! What the term's watches keep of a cloudflared Deployment or DaemonSet: its metadata, its
//! replicas wanted and ready, its pod template's metadata and the template's volumes, nothing
//! else.
//!
//! The watches decode straight into [`Workload`]; containers, the rest of the pod spec and the
//! status are skipped while decoding, never allocated. A `k8s_openapi` `Deployment` is about
//! 2.5 KB before any of its strings (its pod spec is inline), and there is one per tunnel.
//!
//! Readers: the tunnel reconcilers (a workload's owner triggers its tunnel) and the checksum
//! watcher (a user-managed workload's template annotations and the ConfigMaps its volumes
//! mount), and the edge health task (the replicas: a tunnel's `status.connectors`). A workload of cftunnel's own kinds ([`kept_by_cftunnel`]) keeps no volumes either:
//! only its metadata is read.
use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::kept_by_cftunnel;

/// A Deployment or DaemonSet (`K`) as cftunnel's readers see it. Serializes as the object
/// itself with only these fields, so a JSON pointer such as `/spec/template/spec/volumes` reads
/// the same as on the whole object.
#[derive(Serialize, Deserialize)]
#[serde(bound = "")]
pub struct Workload<K> {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: WorkloadSpec,
    #[serde(default, skip_serializing_if = "WorkloadStatus::is_empty")]
    pub status: WorkloadStatus,
    #[serde(skip)]
    kind: PhantomData<fn() -> K>,
}

/// The part of a workload's spec that is kept.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct WorkloadSpec {
    /// A Deployment's replicas (absent: one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    #[serde(default)]
    pub template: Template,
}

/// The part of a workload's status that is kept: its pods ready, and (a DaemonSet) wanted.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadStatus {
    /// A Deployment's ready pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_replicas: Option<i32>,
    /// A DaemonSet's ready pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub number_ready: Option<i32>,
    /// A DaemonSet's nodes that should run a pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desired_number_scheduled: Option<i32>,
}

impl WorkloadStatus {
    fn is_empty(&self) -> bool {
        *self == WorkloadStatus::default()
    }
}

/// The pod template: its metadata and volumes.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct Template {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<ObjectMeta>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<TemplateSpec>,
}

/// A pod spec's volumes, as the API server wrote them.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct TemplateSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volumes: Option<Value>,
}

impl<K> Workload<K> {
    pub fn new(metadata: ObjectMeta, spec: WorkloadSpec) -> Workload<K> {
        Workload {
            metadata,
            spec,
            status: WorkloadStatus::default(),
            kind: PhantomData,
        }
    }

    /// Pods ready and wanted: a Deployment's `readyReplicas` of `spec.replicas`, a
    /// DaemonSet's `numberReady` of `desiredNumberScheduled`.
    pub fn pods_ready(&self) -> (i32, i32) {
        let s = &self.status;
        match s.desired_number_scheduled {
            Some(desired) => (s.number_ready.unwrap_or(0), desired),
            None => (
                s.ready_replicas.unwrap_or(0),
                self.spec.replicas.unwrap_or(1),
            ),
        }
    }
}

/// Drops the volumes of a workload of cftunnel's own kinds: nothing reads them.
pub(crate) fn strip_workload<K>(workload: &mut Workload<K>) {
    if kept_by_cftunnel(&workload.metadata) {
        workload.spec.template.spec = None;
    }
}

impl<K> Clone for Workload<K> {
    fn clone(&self) -> Self {
        Workload {
            status: self.status.clone(),
            ..Workload::new(self.metadata.clone(), self.spec.clone())
        }
    }
}

impl<K> PartialEq for Workload<K> {
    fn eq(&self, other: &Self) -> bool {
        self.metadata == other.metadata && self.spec == other.spec && self.status == other.status
    }
}

impl<K: kube::Resource<DynamicType = ()>> fmt::Debug for Workload<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct(&K::kind(&()))
            .field("metadata", &self.metadata)
            .field("spec", &self.spec)
            .field("status", &self.status)
            .finish()
    }
}

impl<K> kube::Resource for Workload<K>
where
    K: kube::Resource<DynamicType = (), Scope = NamespaceResourceScope>,
{
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        K::kind(&())
    }

    fn group(_: &()) -> Cow<'_, str> {
        K::group(&())
    }

    fn version(_: &()) -> Cow<'_, str> {
        K::version(&())
    }

    fn plural(_: &()) -> Cow<'_, str> {
        K::plural(&())
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cftunnel_policy::hardening::mutate::mounted_config_maps;
    use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    use kube::Resource;

    fn user_managed() -> Value {
        serde_json::json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "cf", "namespace": "shop", "labels": {"app": "cloudflared"},
                "annotations": {"meta.helm.sh/release-name": "cf"}},
            "spec": {"selector": {"matchLabels": {"app": "cloudflared"}}, "template": {
                "metadata": {"annotations": {"cfargotunnel.com/checksum": "abc"}},
                "spec": {
                    "containers": [{"name": "cloudflared", "image": "cloudflare/cloudflared",
                        "args": ["tunnel", "run"], "env": [{"name": "A", "value": "b"}]}],
                    "volumes": [{"name": "config", "configMap": {"name": "edge-config"}},
                        {"name": "both", "projected": {"sources": [
                            {"configMap": {"name": "extra"}}]}}]}}},
            "status": {"availableReplicas": 1}
        })
    }

    #[test]
    fn a_user_managed_workload_keeps_its_metadata_template_metadata_and_volumes_only() {
        let json = user_managed();
        let full: Deployment =
            serde_json::from_value(json.clone()).unwrap_or_else(|e| panic!("{e}"));
        let mut kept: Workload<Deployment> =
            serde_json::from_value(json.clone()).unwrap_or_else(|e| panic!("{e}"));
        strip_workload(&mut kept);
        assert_eq!(kept.metadata, full.metadata);
        assert_eq!(kept.spec.template.metadata, full.spec.template.metadata);
        let written = serde_json::to_value(&kept).unwrap_or_else(|e| panic!("{e}"));
        let pod = written
            .pointer("/spec/template/spec")
            .cloned()
            .unwrap_or_default();
        assert_eq!(
            pod,
            serde_json::json!({"volumes": json["spec"]["template"]["spec"]["volumes"]})
        );
        assert_eq!(mounted_config_maps(&pod), vec!["edge-config", "extra"]);
        // Of the status only the pods ready: availableReplicas is not kept.
        assert!(written.get("status").is_none());
        assert_eq!(kept.pods_ready(), (0, 1));
    }

    #[test]
    fn pods_ready_and_wanted_are_read_from_a_deployment_or_a_daemon_set() {
        let deployment: Workload<Deployment> = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "a"}, "spec": {"replicas": 3},
            "status": {"readyReplicas": 2, "availableReplicas": 2}
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(deployment.pods_ready(), (2, 3));
        let written = serde_json::to_value(&deployment).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(written["status"], serde_json::json!({"readyReplicas": 2}));
        let daemon_set: Workload<DaemonSet> = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "b"},
            "status": {"numberReady": 4, "desiredNumberScheduled": 5}
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(daemon_set.pods_ready(), (4, 5));
    }

    #[test]
    fn a_workload_of_a_tunnel_keeps_its_metadata_and_no_pod_spec() {
        let mut json = user_managed();
        json["metadata"]["ownerReferences"] = serde_json::to_value([OwnerReference {
            api_version: "networking.cfargotunnel.com/v1alpha2".into(),
            kind: "Tunnel".into(),
            name: "edge".into(),
            uid: "u1".into(),
            controller: Some(true),
            ..OwnerReference::default()
        }])
        .unwrap_or_else(|e| panic!("{e}"));
        let mut kept: Workload<Deployment> =
            serde_json::from_value(json).unwrap_or_else(|e| panic!("{e}"));
        let template_metadata = kept.spec.template.metadata.clone();
        strip_workload(&mut kept);
        assert!(kept.spec.template.spec.is_none());
        assert_eq!(kept.spec.template.metadata, template_metadata);
        assert_eq!(kept.metadata.owner_references.map(|o| o.len()), Some(1));
    }

    #[test]
    fn a_workload_is_addressed_as_its_kind() {
        assert_eq!(Workload::<Deployment>::kind(&()), "Deployment");
        assert_eq!(Workload::<Deployment>::api_version(&()), "apps/v1");
        assert_eq!(Workload::<DaemonSet>::plural(&()), "daemonsets");
        assert!(
            std::mem::size_of::<Workload<Deployment>>() * 2 < std::mem::size_of::<Deployment>(),
            "{} vs {}",
            std::mem::size_of::<Workload<Deployment>>(),
            std::mem::size_of::<Deployment>()
        );
    }
}
