//! Patch metadata of `apps/v1` Deployment and the types it contains, as the API server publishes
//! it (`x-kubernetes-patch-strategy` / `x-kubernetes-patch-merge-key` in `/openapi/v2`).
//!
//! Types are named by their OpenAPI definition so the table can be checked against a live API
//! server. A field missing from the table has no strategy: maps merge, lists are replaced.

pub const DEPLOYMENT: &str = "io.k8s.api.apps.v1.Deployment";

const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
const OWNER_REFERENCE: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference";
const DEPLOYMENT_SPEC: &str = "io.k8s.api.apps.v1.DeploymentSpec";
const DEPLOYMENT_STRATEGY: &str = "io.k8s.api.apps.v1.DeploymentStrategy";
const DEPLOYMENT_STATUS: &str = "io.k8s.api.apps.v1.DeploymentStatus";
const DEPLOYMENT_CONDITION: &str = "io.k8s.api.apps.v1.DeploymentCondition";
const POD_TEMPLATE_SPEC: &str = "io.k8s.api.core.v1.PodTemplateSpec";
const POD_SPEC: &str = "io.k8s.api.core.v1.PodSpec";
const CONTAINER: &str = "io.k8s.api.core.v1.Container";
const EPHEMERAL_CONTAINER: &str = "io.k8s.api.core.v1.EphemeralContainer";
const VOLUME: &str = "io.k8s.api.core.v1.Volume";
const LOCAL_OBJECT_REFERENCE: &str = "io.k8s.api.core.v1.LocalObjectReference";
const EVICTION_RESPONDER: &str = "io.k8s.api.core.v1.EvictionResponder";
const HOST_ALIAS: &str = "io.k8s.api.core.v1.HostAlias";
const TOPOLOGY_SPREAD_CONSTRAINT: &str = "io.k8s.api.core.v1.TopologySpreadConstraint";
const POD_RESOURCE_CLAIM: &str = "io.k8s.api.core.v1.PodResourceClaim";
const POD_SCHEDULING_GATE: &str = "io.k8s.api.core.v1.PodSchedulingGate";
const CONTAINER_PORT: &str = "io.k8s.api.core.v1.ContainerPort";
const ENV_VAR: &str = "io.k8s.api.core.v1.EnvVar";
const VOLUME_MOUNT: &str = "io.k8s.api.core.v1.VolumeMount";
const VOLUME_DEVICE: &str = "io.k8s.api.core.v1.VolumeDevice";

/// Patch metadata of one field of one type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PatchField {
    /// OpenAPI definition holding the field.
    pub owner: &'static str,
    pub field: &'static str,
    /// OpenAPI definition of the field's value (of its elements, for a list); `""` for scalars.
    pub child: &'static str,
    /// `x-kubernetes-patch-strategy`, e.g. `merge` or `merge,retainKeys`; `""` when none.
    pub strategy: &'static str,
    /// `x-kubernetes-patch-merge-key`; `""` when none.
    pub merge_key: &'static str,
}

const fn link(owner: &'static str, field: &'static str, child: &'static str) -> PatchField {
    PatchField {
        owner,
        field,
        child,
        strategy: "",
        merge_key: "",
    }
}

const fn merge(
    owner: &'static str,
    field: &'static str,
    child: &'static str,
    strategy: &'static str,
    merge_key: &'static str,
) -> PatchField {
    PatchField {
        owner,
        field,
        child,
        strategy,
        merge_key,
    }
}

/// The paths from Deployment down to every field that has a patch strategy, and those fields.
#[rustfmt::skip]
pub const TABLE: &[PatchField] = &[
    link(DEPLOYMENT, "metadata", OBJECT_META),
    link(DEPLOYMENT, "spec", DEPLOYMENT_SPEC),
    link(DEPLOYMENT, "status", DEPLOYMENT_STATUS),
    merge(OBJECT_META, "finalizers", "", "merge", ""),
    merge(OBJECT_META, "ownerReferences", OWNER_REFERENCE, "merge", "uid"),
    link(DEPLOYMENT_SPEC, "template", POD_TEMPLATE_SPEC),
    merge(DEPLOYMENT_SPEC, "strategy", DEPLOYMENT_STRATEGY, "retainKeys", ""),
    merge(DEPLOYMENT_STATUS, "conditions", DEPLOYMENT_CONDITION, "merge", "type"),
    link(POD_TEMPLATE_SPEC, "metadata", OBJECT_META),
    link(POD_TEMPLATE_SPEC, "spec", POD_SPEC),
    merge(POD_SPEC, "containers", CONTAINER, "merge", "name"),
    merge(POD_SPEC, "initContainers", CONTAINER, "merge", "name"),
    merge(POD_SPEC, "ephemeralContainers", EPHEMERAL_CONTAINER, "merge", "name"),
    merge(POD_SPEC, "evictionResponders", EVICTION_RESPONDER, "merge", "name"),
    merge(POD_SPEC, "volumes", VOLUME, "merge,retainKeys", "name"),
    merge(POD_SPEC, "imagePullSecrets", LOCAL_OBJECT_REFERENCE, "merge", "name"),
    merge(POD_SPEC, "hostAliases", HOST_ALIAS, "merge", "ip"),
    merge(POD_SPEC, "topologySpreadConstraints", TOPOLOGY_SPREAD_CONSTRAINT, "merge", "topologyKey"),
    merge(POD_SPEC, "resourceClaims", POD_RESOURCE_CLAIM, "merge,retainKeys", "name"),
    merge(POD_SPEC, "schedulingGates", POD_SCHEDULING_GATE, "merge", "name"),
    merge(CONTAINER, "ports", CONTAINER_PORT, "merge", "containerPort"),
    merge(CONTAINER, "env", ENV_VAR, "merge", "name"),
    merge(CONTAINER, "volumeMounts", VOLUME_MOUNT, "merge", "mountPath"),
    merge(CONTAINER, "volumeDevices", VOLUME_DEVICE, "merge", "devicePath"),
    merge(EPHEMERAL_CONTAINER, "ports", CONTAINER_PORT, "merge", "containerPort"),
    merge(EPHEMERAL_CONTAINER, "env", ENV_VAR, "merge", "name"),
    merge(EPHEMERAL_CONTAINER, "volumeMounts", VOLUME_MOUNT, "merge", "mountPath"),
    merge(EPHEMERAL_CONTAINER, "volumeDevices", VOLUME_DEVICE, "merge", "devicePath"),
];

/// The patch metadata of `field` in the type `owner`, if it has any.
pub fn lookup(owner: &str, field: &str) -> Option<&'static PatchField> {
    TABLE.iter().find(|f| f.owner == owner && f.field == field)
}

/// The strategy that decides how values are combined; `retainKeys` only shapes generated patches.
pub fn merges(field: &PatchField) -> bool {
    field.strategy.split(',').any(|s| s == "merge")
}

/// Whether the strategy is `replace` (the whole value is taken from the patch).
pub fn replaces(field: &PatchField) -> bool {
    field.strategy.split(',').any(|s| s == "replace")
}
