//! Tunnel and ClusterTunnel, versions v1alpha2 (storage) and v1alpha1 (deprecated, served).
//!
//! Both kinds share one spec shape; a macro stamps out the pair so the two can never drift.

macro_rules! tunnel_kinds {
    (
        version = $version:literal, extra_doc = $doc:literal,
        { $($extra:tt)* }
    ) => {
        use kube::CustomResource;
        use schemars::JsonSchema;
        use serde::{Deserialize, Serialize};

        use crate::tunnel_common::{AllowedRoutes, CloudflareDetails, ConfigSource, ExistingTunnel, NewTunnel, TunnelStatus, WarpRouting};

        tunnel_kinds!(@kind TunnelSpec, "Tunnel", $version, $doc, [namespaced,], { $($extra)* });
        tunnel_kinds!(@kind ClusterTunnelSpec, "ClusterTunnel", $version, $doc, [], { $($extra)* });
    };
    (@kind $spec:ident, $kind:literal, $version:literal, $doc:literal, [$($scope:ident,)?], { $($extra:tt)* }) => {
        #[doc = $doc]
        #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
        #[kube(
            group = "networking.cfargotunnel.com",
            version = $version,
            kind = $kind,
            $($scope,)?
            status = "TunnelStatus",
            derive = "PartialEq",
            doc = $doc,
            printcolumn = r#"{"name":"TunnelID","type":"string","jsonPath":".status.tunnelId"}"#,
            printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
            printcolumn = r#"{"name":"Edge","type":"string","jsonPath":".status.edge.status"}"#,
            printcolumn = r#"{"name":"Connectors","type":"integer","jsonPath":".status.connectors.ready"}"#,
            printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
        )]
        #[serde(rename_all = "camelCase")]
        pub struct $spec {
            /// Create a tunnel with this name. Exactly one of `newTunnel` and `existingTunnel` is set.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub new_tunnel: Option<NewTunnel>,
            /// Run a tunnel that already exists (by `id`, or by `name`). It is never deleted by cftunnel.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub existing_tunnel: Option<ExistingTunnel>,
            /// Cloudflare account, zone and API credentials.
            pub cloudflare: CloudflareDetails,
            /// cloudflared transport protocol: `auto`, `quic` or `http2`.
            #[serde(default = "crate::defaults::protocol")]
            pub protocol: String,
            /// Service of the final catch-all ingress rule, e.g. `http_status:404`.
            #[serde(default = "crate::defaults::fallback_target")]
            pub fallback_target: String,
            /// Skip TLS verification of origins for every route of this tunnel.
            #[serde(default)]
            pub no_tls_verify: bool,
            /// Name of a Secret whose `tls.crt` is the CA pool for origin certificates.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub origin_ca_pool: Option<String>,
            /// Which namespaces may bind routes to this tunnel (`All`, `Same` or `Selector`).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub allowed_routes: Option<AllowedRoutes>,
            /// Where cloudflared takes its ingress rules from: `Local` (a rendered config.yaml;
            /// a route change rolls the pods) or `Cloudflare` (the tunnel's configuration on
            /// Cloudflare, applied live). Unset: cftunnel's `--default-config-source`, `Local`
            /// unless set otherwise.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub config_source: Option<ConfigSource>,
            /// Options of cloudflared's proxy of private traffic (`warp-routing`), for
            /// NetworkRoutes through this tunnel. With `configSource: Cloudflare`, the options
            /// set here replace those keys of the tunnel's configuration; others are kept.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub warp_routing: Option<Box<WarpRouting>>,
            $($extra)*
        }

        impl $spec {
            /// Exactly-one check input: is `newTunnel` set, is `existingTunnel` set (docs/design.md §1.1).
            pub fn tunnel_sources(&self) -> (bool, bool) {
                (self.new_tunnel.is_some(), self.existing_tunnel.as_ref().is_some_and(ExistingTunnel::is_set))
            }
        }
    };
}

pub mod v1alpha2 {
    tunnel_kinds! {
        version = "v1alpha2",
        extra_doc = "A Cloudflare tunnel and the cloudflared Deployment that runs it.",
        {
            /// A strategic-merge patch (YAML or JSON) applied to the generated cloudflared
            /// Deployment, e.g. `{"spec": {"replicas": 3}}`.
            #[serde(default = "crate::defaults::deploy_patch")]
            pub deploy_patch: String,
        }
    }
}

pub mod v1alpha1 {
    tunnel_kinds! {
        version = "v1alpha1",
        extra_doc = "A Cloudflare tunnel (deprecated version: use v1alpha2 and its deployPatch).",
        {
            /// Number of cloudflared replicas (v1alpha2: `deployPatch` spec.replicas).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub size: Option<i32>,
            /// cloudflared image (v1alpha2: `deployPatch`, container `cloudflared`).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub image: Option<String>,
            /// Node selector of the cloudflared pods (v1alpha2: `deployPatch`).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub node_selectors: Option<std::collections::BTreeMap<String, String>>,
            /// Tolerations of the cloudflared pods (v1alpha2: `deployPatch`).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub tolerations: Option<Vec<k8s_openapi::api::core::v1::Toleration>>,
        }
    }
}
