//! "One core, two controllers": what differs between a Tunnel and a ClusterTunnel, and nothing
//! else. The core is generic over [`TunnelKindAdapter`].
use std::fmt::Debug;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Client, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::options::ControllerOptions;
use crate::caches::WatchScope;
use cftunnel_policy::render::OwnerIdentity;
use cftunnel_policy::render::labels::is_cluster_tunnel_value;
use cftunnel_types::TunnelKind;
use cftunnel_types::names::{APP_CLOUDFLARED, LABEL_APP, LABEL_IS_CLUSTER_TUNNEL};
use cftunnel_types::{ClusterTunnel, ClusterTunnelSpec, Tunnel, TunnelSpec, TunnelStatus};

/// A tunnel custom resource kind as the generic reconcile core sees it.
pub trait TunnelKindAdapter:
    Resource<DynamicType = ()> + Clone + Debug + Serialize + DeserializeOwned + Send + Sync + 'static
{
    const KIND: TunnelKind;

    /// The Api the controller watches, narrowed by the scope.
    fn watch_api(client: &Client, scope: &WatchScope) -> Api<Self>;
    /// The Api that reads and patches this very object.
    fn object_api(&self, client: &Client) -> Api<Self>;
    /// Namespace of the managed objects and of the API Secret.
    fn managed_namespace(&self, options: &ControllerOptions) -> String;
    /// The v1alpha2 spec (both kinds share one shape).
    fn tunnel_spec(&self) -> TunnelSpec;
    /// `spec.cloudflare.secret`: the API Secret, in [`Self::managed_namespace`].
    fn api_secret_name(&self) -> &str;
    /// Is `spec.newTunnel` set? (Without copying the spec, as [`Self::tunnel_spec`] does.)
    fn is_new_tunnel(&self) -> bool;
    /// `spec.existingTunnel.id`, when set.
    fn existing_tunnel_id(&self) -> Option<&str>;
    fn tunnel_status(&self) -> Option<&TunnelStatus>;
    /// The status, writable: a reconcile carries its own writes forward.
    fn tunnel_status_mut(&mut self) -> &mut Option<TunnelStatus>;

    /// Owner of the rendered objects.
    fn identity(&self, options: &ControllerOptions) -> OwnerIdentity {
        OwnerIdentity {
            kind: Self::KIND,
            namespace: self.managed_namespace(options),
            name: self.name_any(),
            uid: self.uid().unwrap_or_default(),
        }
    }

    /// The identity routes are indexed by (a ClusterTunnel has no namespace).
    fn route_identity(&self) -> cftunnel_types::TunnelIdentity {
        cftunnel_types::TunnelIdentity {
            kind: Self::KIND,
            namespace: self.namespace().unwrap_or_default(),
            name: self.name_any(),
        }
    }

    /// `Tunnel ns/name` or `ClusterTunnel name`, for messages.
    fn display(&self) -> String {
        match self.namespace() {
            Some(ns) => format!("{:?} {ns}/{}", Self::KIND, self.name_any()),
            None => format!("{:?} {}", Self::KIND, self.name_any()),
        }
    }

    /// Children of this kind carry these labels (the watch selector).
    fn child_selector() -> String {
        format!(
            "{LABEL_APP}={APP_CLOUDFLARED},{LABEL_IS_CLUSTER_TUNNEL}={}",
            is_cluster_tunnel_value(Self::KIND)
        )
    }

    /// The object controlling a child, from its controller owner reference.
    fn controlling_object(child: &ObjectMeta) -> Option<ObjectRef<Self>>;
}

pub(crate) fn controller_named(child: &ObjectMeta, kind: &str) -> Option<String> {
    child
        .owner_references
        .as_ref()?
        .iter()
        .find(|o| o.controller == Some(true) && o.kind == kind)
        .map(|o| o.name.clone())
}

/// The accessors that read the same fields in both kinds (their specs and status are stamped
/// from one shape).
macro_rules! same_field_accessors {
    () => {
        fn api_secret_name(&self) -> &str {
            &self.spec.cloudflare.secret
        }

        fn is_new_tunnel(&self) -> bool {
            self.spec.new_tunnel.is_some()
        }

        fn existing_tunnel_id(&self) -> Option<&str> {
            self.spec.existing_tunnel.as_ref()?.id.as_deref()
        }

        fn tunnel_status(&self) -> Option<&TunnelStatus> {
            self.status.as_ref()
        }

        fn tunnel_status_mut(&mut self) -> &mut Option<TunnelStatus> {
            &mut self.status
        }
    };
}

impl TunnelKindAdapter for Tunnel {
    const KIND: TunnelKind = TunnelKind::Tunnel;

    fn watch_api(client: &Client, scope: &WatchScope) -> Api<Self> {
        match &scope.namespace {
            Some(ns) => Api::namespaced(client.clone(), ns),
            None => Api::all(client.clone()),
        }
    }

    fn object_api(&self, client: &Client) -> Api<Self> {
        Api::namespaced(client.clone(), &self.namespace().unwrap_or_default())
    }

    fn managed_namespace(&self, _options: &ControllerOptions) -> String {
        self.namespace().unwrap_or_default()
    }

    fn tunnel_spec(&self) -> TunnelSpec {
        self.spec.clone()
    }

    same_field_accessors!();

    fn controlling_object(child: &ObjectMeta) -> Option<ObjectRef<Self>> {
        let name = controller_named(child, "Tunnel")?;
        Some(ObjectRef::new(&name).within(child.namespace.as_deref().unwrap_or_default()))
    }
}

impl TunnelKindAdapter for ClusterTunnel {
    const KIND: TunnelKind = TunnelKind::ClusterTunnel;

    fn watch_api(client: &Client, _scope: &WatchScope) -> Api<Self> {
        Api::all(client.clone())
    }

    fn object_api(&self, client: &Client) -> Api<Self> {
        Api::all(client.clone())
    }

    fn managed_namespace(&self, options: &ControllerOptions) -> String {
        options.cluster_resource_namespace.clone()
    }

    fn tunnel_spec(&self) -> TunnelSpec {
        cluster_spec_as_tunnel_spec(&self.spec)
    }

    same_field_accessors!();

    fn controlling_object(child: &ObjectMeta) -> Option<ObjectRef<Self>> {
        controller_named(child, "ClusterTunnel").map(|name| ObjectRef::new(&name))
    }
}

/// Field by field: the two specs are stamped from one macro, so this is total.
fn cluster_spec_as_tunnel_spec(spec: &ClusterTunnelSpec) -> TunnelSpec {
    TunnelSpec {
        new_tunnel: spec.new_tunnel.clone(),
        existing_tunnel: spec.existing_tunnel.clone(),
        cloudflare: spec.cloudflare.clone(),
        protocol: spec.protocol.clone(),
        fallback_target: spec.fallback_target.clone(),
        no_tls_verify: spec.no_tls_verify,
        origin_ca_pool: spec.origin_ca_pool.clone(),
        allowed_routes: spec.allowed_routes.clone(),
        config_source: spec.config_source,
        warp_routing: spec.warp_routing.clone(),
        deploy_patch: spec.deploy_patch.clone(),
    }
}
