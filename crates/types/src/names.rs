//! Names that are part of the compatibility contract with the Go operator's installations:
//! labels, annotations, finalizers and field managers (docs/design.md §1.5). Never rename them.

pub const GROUP: &str = "networking.cfargotunnel.com";

pub const LABEL_TUNNEL: &str = "cfargotunnel.com/tunnel";
pub const LABEL_APP: &str = "cfargotunnel.com/app";
pub const APP_CLOUDFLARED: &str = "cloudflared";
pub const LABEL_TUNNEL_ID: &str = "cfargotunnel.com/id";
pub const LABEL_TUNNEL_NAME: &str = "cfargotunnel.com/name";
pub const LABEL_DOMAIN: &str = "cfargotunnel.com/domain";
pub const LABEL_IS_CLUSTER_TUNNEL: &str = "cfargotunnel.com/is-cluster-tunnel";
pub const LABEL_KIND: &str = "cfargotunnel.com/kind";

pub const LABEL_EXPOSE_TUNNEL: &str = "cfargotunnel.com/expose-tunnel";
pub const LABEL_EXPOSE_CLUSTER_TUNNEL: &str = "cfargotunnel.com/expose-cluster-tunnel";

/// `spec.controller` of an IngressClass, and `controllerName` of a GatewayClass, that cftunnel
/// serves.
pub const CONTROLLER_NAME: &str = "cfargotunnel.com/cftunnel";
/// The annotation that makes an IngressClass the cluster's default.
pub const ANNOTATION_DEFAULT_INGRESS_CLASS: &str = "ingressclass.kubernetes.io/is-default-class";
/// The annotation older Ingresses name their class with, before `spec.ingressClassName`.
pub const ANNOTATION_LEGACY_INGRESS_CLASS: &str = "kubernetes.io/ingress.class";
pub const ANNOTATION_CHECKSUM: &str = "cfargotunnel.com/checksum";
pub const ANNOTATION_ADOPT_TUNNEL_ID: &str = "cfargotunnel.com/adopt-tunnel-id";
/// `"true"` on a deleting Tunnel/ClusterTunnel whose clean-up Cloudflare refuses: deletion then
/// finishes without it, leaving the tunnel and its records on Cloudflare.
pub const ANNOTATION_ABANDON_CLEANUP: &str = "cfargotunnel.com/abandon-cleanup";
/// Keeps the v1alpha2-only part of `deployPatch` while an object is served as v1alpha1.
pub(crate) const ANNOTATION_V1ALPHA2_DEPLOY_PATCH: &str = "cfargotunnel.com/v1alpha2-deploy-patch";

pub const FINALIZER: &str = "cfargotunnel.com/finalizer";
pub const FINALIZER_SECRET_IN_USE: &str = "cfargotunnel.com/secret-in-use";

pub const FIELD_MANAGER: &str = "cftunnel";
pub const FIELD_MANAGER_SECRET_GUARD: &str = "cftunnel-secret-guard";
/// The Go operator's field manager, whose fields are dropped on takeover.
pub const FIELD_MANAGER_GO_OPERATOR: &str = "cloudflare-operator";

/// Annotations of labelled Services that mirror a binding subject's spec (docs/design.md §1.4).
pub mod service_annotations {
    pub const HOSTNAME: &str = "cfargotunnel.com/hostname";
    pub const PATH: &str = "cfargotunnel.com/path";
    pub const PROTOCOL: &str = "cfargotunnel.com/protocol";
    pub const PORT: &str = "cfargotunnel.com/port";
    pub const NO_TLS_VERIFY: &str = "cfargotunnel.com/no-tls-verify";
    pub const HTTP2_ORIGIN: &str = "cfargotunnel.com/http2-origin";
    pub const HTTP_HOST_HEADER: &str = "cfargotunnel.com/http-host-header";
    pub const ORIGIN_SERVER_NAME: &str = "cfargotunnel.com/origin-server-name";
    pub const CA_POOL: &str = "cfargotunnel.com/ca-pool";
    pub const DISABLE_DNS: &str = "cfargotunnel.com/disable-dns";
}
