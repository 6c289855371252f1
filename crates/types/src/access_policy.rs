//! AccessPolicy v1alpha2: who may reach routes through Cloudflare Zero Trust Access. Attached to
//! its targets by Gateway API policy attachment (GEP-713 `targetRefs`), in its own namespace only.
//!
//! A target reference may carry a `namespace`, although GEP-713's local references have none: an
//! undeclared field would be pruned silently by the API server, and the policy would then
//! protect a same-named object of its own namespace instead of refusing. Declared, it reaches
//! admission, which refuses any namespace other than the policy's and says where to create it.
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The objects an AccessPolicy can target: (group, kind). `""` is the core group.
pub const TARGET_KINDS: &[(&str, &str)] = &[
    (crate::names::GROUP, "TunnelBinding"),
    ("gateway.networking.k8s.io", "HTTPRoute"),
    ("gateway.networking.k8s.io", "GRPCRoute"),
    ("networking.k8s.io", "Ingress"),
    ("", "Service"),
];
/// The most targets one policy names.
pub const MAX_TARGETS: usize = 16;
/// Most applications `status.retiring` lists (the schema's bound).
pub const MAX_RETIRING: usize = 256;
/// The most entries of each `allow` list and of `policies`.
pub const MAX_ALLOW_ENTRIES: usize = 100;
/// The longest name of a reusable Access policy cftunnel accepts.
pub const MAX_POLICY_NAME: usize = 255;

/// The policy has been judged and its targets resolved.
pub const CONDITION_ACCEPTED: &str = "Accepted";
/// The Access applications and policies are in place on Cloudflare.
pub const CONDITION_PROGRAMMED: &str = "Programmed";

/// Protects the hostnames of routes of its namespace with Cloudflare Access.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "networking.cfargotunnel.com",
    version = "v1alpha2",
    kind = "AccessPolicy",
    namespaced,
    status = "AccessPolicyStatus",
    derive = "PartialEq",
    doc = "Protects the hostnames of routes of its namespace with Cloudflare Zero Trust Access.",
    printcolumn = r#"{"name":"Accepted","type":"string","jsonPath":".status.conditions[?(@.type==\"Accepted\")].status"}"#,
    printcolumn = r#"{"name":"Programmed","type":"string","jsonPath":".status.conditions[?(@.type==\"Programmed\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct AccessPolicySpec {
    /// The routes to protect (1 to 16), in the policy's namespace: TunnelBindings, HTTPRoutes,
    /// Ingresses and labelled Services (a GRPCRoute is refused: Access does not apply to gRPC).
    #[schemars(length(min = 1, max = 16))]
    pub target_refs: Vec<PolicyTargetRef>,
    /// Who gets in: anyone matching one of the entries.
    #[serde(default)]
    pub allow: AccessAllow,
    /// Names of reusable Access policies of the account, applied besides `allow`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 100), inner(length(max = 255)))]
    pub policies: Vec<String>,
    /// How long an Access session lasts, e.g. `30m` or `24h` (1m to 720h). Default: the
    /// application's default on Cloudflare (24h).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32))]
    pub session_duration: Option<String>,
}

/// One object the policy protects (GEP-713 `LocalPolicyTargetReference`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct PolicyTargetRef {
    /// API group of the target; `""` for a Service.
    #[schemars(
        length(max = 253),
        extend("enum" = ["", "networking.cfargotunnel.com", "gateway.networking.k8s.io", "networking.k8s.io"])
    )]
    pub group: String,
    /// Kind of the target.
    #[schemars(
        length(max = 63),
        extend("enum" = ["TunnelBinding", "HTTPRoute", "GRPCRoute", "Ingress", "Service"])
    )]
    pub kind: String,
    /// Name of the target, in the policy's namespace.
    #[schemars(length(max = 253))]
    pub name: String,
    /// Not part of GEP-713: accepted only so admission can refuse a namespace other than the
    /// policy's with a message, instead of the API server dropping the field unseen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 63))]
    pub namespace: Option<String>,
}

/// Who is let in. Empty lists add nobody; the policy needs at least one entry here or in
/// `policies`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AccessAllow {
    /// Email addresses, e.g. `alice@example.com`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 100), inner(length(max = 254)))]
    pub emails: Vec<String>,
    /// Email domains, e.g. `example.com` (without `@`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 100), inner(length(max = 253)))]
    pub email_domains: Vec<String>,
    /// Access group ids (UUIDs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 100), inner(length(max = 36)))]
    pub groups: Vec<String>,
    /// Service token ids (UUIDs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 100), inner(length(max = 36)))]
    pub service_tokens: Vec<String>,
    /// Let in any valid service token of the account.
    #[serde(default)]
    pub any_valid_service_token: bool,
}

impl AccessAllow {
    /// No entry lets anyone in.
    pub fn is_empty(&self) -> bool {
        self.emails.is_empty()
            && self.email_domains.is_empty()
            && self.groups.is_empty()
            && self.service_tokens.is_empty()
            && !self.any_valid_service_token
    }
}

/// Observed state of an AccessPolicy. Every field is optional.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AccessPolicyStatus {
    /// `Accepted` and `Programmed`, each with the generation it judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Option<Vec<Condition>>,
    /// One entry per target: the hostnames protected, or why the target is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 16))]
    pub targets: Option<Vec<TargetStatus>>,
    /// Applications cftunnel made for hostnames the policy no longer protects (a target
    /// removed, a hostname refused), until they are deleted: none opens a hostname.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 256))]
    pub retiring: Option<Vec<ProtectedHostname>>,
}

/// What became of one target.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct TargetStatus {
    #[schemars(length(max = 253))]
    pub group: String,
    #[schemars(length(max = 63))]
    pub kind: String,
    #[schemars(length(max = 253))]
    pub name: String,
    /// The hostnames protected, each by its Access application.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hostnames: Vec<ProtectedHostname>,
    /// Why the target is not (fully) protected, e.g. `UnsupportedKind` for a GRPCRoute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub message: Option<String>,
}

/// A hostname behind Access.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProtectedHostname {
    #[schemars(length(max = 253))]
    pub hostname: String,
    /// Id of the Access application on Cloudflare.
    #[schemars(length(max = 64))]
    pub application_id: String,
    /// The application's audience tag (AUD), which origins check in the Access JWT.
    #[schemars(length(max = 128))]
    pub aud: String,
    /// The Zero Trust team of the application's account (`<team>.cloudflareaccess.com`), which
    /// cloudflared checks the token's issuer against.
    #[serde(default)]
    #[schemars(length(max = 63))]
    pub team: String,
    /// The Cloudflare account holding the application.
    #[serde(default)]
    #[schemars(length(max = 32))]
    pub account_id: String,
}
