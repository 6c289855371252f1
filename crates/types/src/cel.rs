//! CEL rules embedded in the CRDs (docs/design.md §2.1). The API server evaluates them before any
//! webhook, so each message is the exact text the admission rule of the same name gives.

/// One CEL rule and the message shown when it fails.
pub(crate) struct CelRule {
    pub rule: &'static str,
    pub message: &'static str,
}

/// "Set" for existingTunnel (docs/design.md §1.1): present with a non-empty id or name. `$` = the spec.
const EXISTING_SET: &str = "(has($.existingTunnel) && ((has($.existingTunnel.id) && $.existingTunnel.id != '') || (has($.existingTunnel.name) && $.existingTunnel.name != '')))";

pub const BOTH_TUNNEL_SOURCES: &str = "spec: newTunnel and existingTunnel are mutually exclusive; set exactly one (newTunnel creates a tunnel, existingTunnel adopts one)";
pub const NO_TUNNEL_SOURCE: &str = "spec: one of newTunnel or existingTunnel is required; set newTunnel.name to create a tunnel, or existingTunnel.id or existingTunnel.name to run one that exists";
pub const NAME_TOO_LONG: &str = "metadata.name: must be at most 63 characters, as it becomes a label value and the name of managed objects; choose a shorter name";
pub const NEW_TUNNEL_NAME_IMMUTABLE: &str = "spec.newTunnel.name: cannot change once the tunnel exists on Cloudflare (status.tunnelId is set); create a new Tunnel instead";
pub const EXISTING_TUNNEL_IMMUTABLE: &str =
    "spec.existingTunnel: id and name cannot change once set; create a new Tunnel instead";
pub const TUNNEL_SOURCE_SWITCH: &str =
    "spec: cannot switch between newTunnel and existingTunnel; create a new Tunnel instead";
pub const ACCOUNT_IMMUTABLE: &str = "spec.cloudflare: accountId and accountName cannot change once set; create a new Tunnel instead";

/// AccessTunnel rules: (field path, rule, messageExpression). The messages are the texts of
/// `admission::access_tunnel`, the offending value quoted. `target.svc.port` keeps the Go operator's
/// `minimum`/`maximum` and adds a rule whose message is a constant (the API server prints both):
/// kube-apiserver 1.37 estimates `string(self)` of an integer in a `messageExpression` at more
/// than 100x its budget and refuses the CRD.
pub(crate) const ACCESS_RULES: &[(&[&str], &str, &str)] = &[
    (
        &["target", "protocol"],
        "self in ['', 'tcp', 'rdp', 'smb', 'ssh']",
        r#"'target.protocol: "' + self + '" is not supported; use tcp, rdp, smb or ssh'"#,
    ),
    (
        &["target", "svc", "port"],
        "self >= 1 && self <= 65535",
        "'target.svc.port: the port is out of range; use 1 to 65535'",
    ),
];

/// Rules on the spec object.
pub(crate) fn spec_rules() -> Vec<(String, &'static str)> {
    let existing = EXISTING_SET.replace('$', "self");
    vec![
        (
            format!("!(has(self.newTunnel) && {existing})"),
            BOTH_TUNNEL_SOURCES,
        ),
        (
            format!("has(self.newTunnel) || {existing}"),
            NO_TUNNEL_SOURCE,
        ),
    ]
}

/// Rules on the whole object (metadata.name and transition rules comparing with oldSelf).
pub(crate) const ROOT_RULES: &[CelRule] = &[
    CelRule {
        rule: "size(self.metadata.name) <= 63",
        message: NAME_TOO_LONG,
    },
    CelRule {
        rule: "!has(oldSelf.spec.newTunnel) || !has(self.spec.newTunnel) || !has(oldSelf.status) || !has(oldSelf.status.tunnelId) || oldSelf.status.tunnelId == '' || self.spec.newTunnel.name == oldSelf.spec.newTunnel.name",
        message: NEW_TUNNEL_NAME_IMMUTABLE,
    },
    CelRule {
        rule: "!has(oldSelf.spec.existingTunnel) || !has(self.spec.existingTunnel) || ((!has(oldSelf.spec.existingTunnel.id) || oldSelf.spec.existingTunnel.id == '' || (has(self.spec.existingTunnel.id) && self.spec.existingTunnel.id == oldSelf.spec.existingTunnel.id)) && (!has(oldSelf.spec.existingTunnel.name) || oldSelf.spec.existingTunnel.name == '' || (has(self.spec.existingTunnel.name) && self.spec.existingTunnel.name == oldSelf.spec.existingTunnel.name)))",
        message: EXISTING_TUNNEL_IMMUTABLE,
    },
    CelRule {
        rule: "has(self.spec.newTunnel) == has(oldSelf.spec.newTunnel)",
        message: TUNNEL_SOURCE_SWITCH,
    },
    CelRule {
        rule: "(!has(oldSelf.spec.cloudflare.accountId) || oldSelf.spec.cloudflare.accountId == '' || (has(self.spec.cloudflare.accountId) && self.spec.cloudflare.accountId == oldSelf.spec.cloudflare.accountId)) && (!has(oldSelf.spec.cloudflare.accountName) || oldSelf.spec.cloudflare.accountName == '' || (has(self.spec.cloudflare.accountName) && self.spec.cloudflare.accountName == oldSelf.spec.cloudflare.accountName))",
        message: ACCOUNT_IMMUTABLE,
    },
];

/// AccessPolicy: a target's group and kind are one of `access_policy::TARGET_KINDS`. The
/// admission rule gives the same text after the target's field path.
pub const ACCESS_POLICY_TARGET_KIND: &str = "group and kind name no object an AccessPolicy protects; use TunnelBinding (group networking.cfargotunnel.com), HTTPRoute or GRPCRoute (group gateway.networking.k8s.io), Ingress (group networking.k8s.io) or Service (group \"\")";
pub const ACCESS_POLICY_NOBODY_ALLOWED: &str = "spec.allow and spec.policies are both empty: an AccessPolicy that lets nobody in would lock the routes; add spec.allow.emails, emailDomains, groups, serviceTokens or anyValidServiceToken: true, or name a reusable policy in spec.policies";

/// The CEL form of `ACCESS_POLICY_TARGET_KIND`, on one item of `spec.targetRefs`.
pub(crate) fn access_policy_target_rule() -> String {
    crate::access_policy::TARGET_KINDS
        .iter()
        .map(|(group, kind)| format!("(self.group == '{group}' && self.kind == '{kind}')"))
        .collect::<Vec<_>>()
        .join(" || ")
}

/// The CEL form of `ACCESS_POLICY_NOBODY_ALLOWED`, on the spec.
pub(crate) fn access_policy_spec_rule() -> String {
    let lists = ["emails", "emailDomains", "groups", "serviceTokens"]
        .iter()
        .map(|l| format!("(has(self.allow.{l}) && size(self.allow.{l}) > 0)"))
        .collect::<Vec<_>>()
        .join(" || ");
    format!(
        "(has(self.policies) && size(self.policies) > 0) || (has(self.allow) && ({lists} || (has(self.allow.anyValidServiceToken) && self.allow.anyValidServiceToken)))"
    )
}
