//! Zero Trust Access models: the organization, self-hosted applications, reusable policies
//! and their rules, as Cloudflare answers them and as the client sends them.
//!
//! None of them holds a credential: the fields that can (an application's `scim_config`) are
//! not modelled, so they are dropped when an answer is read and never sent.
use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use super::error::CloudflareError;
use super::models::null_as_default;

/// The account's Zero Trust organization.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct AccessOrganization {
    #[serde(default)]
    pub name: String,
    /// `<team>.cloudflareaccess.com`: where users sign in, and the issuer of Access tokens.
    #[serde(default)]
    pub auth_domain: String,
    /// The global session duration (Go duration text).
    #[serde(default)]
    pub session_duration: Option<String>,
    #[serde(default)]
    pub created_at: Option<Timestamp>,
    #[serde(default)]
    pub updated_at: Option<Timestamp>,
}

impl AccessOrganization {
    /// The team name: the first label of a `*.cloudflareaccess.com` auth domain.
    pub fn team(&self) -> Option<&str> {
        self.auth_domain
            .strip_suffix(".cloudflareaccess.com")
            .filter(|team| !team.is_empty() && !team.contains('.'))
    }
}

/// What Access does with a request a policy matches.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AccessDecision {
    Allow,
    Deny,
    /// Service tokens and other non-identity rules only, no sign-in.
    NonIdentity,
    /// No Access check at all.
    Bypass,
    /// A decision this client does not know; never sent.
    #[default]
    #[serde(other)]
    Unknown,
}

/// One rule of a policy's `include` (any matches), `exclude` (none may match) or `require`
/// (all must match). Rules of other kinds are kept as they came in [`AccessRule::Other`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AccessRule {
    /// One email address.
    Email { email: String },
    /// Every address of an email domain (`example.com`).
    EmailDomain { domain: String },
    /// An Access group, by id.
    Group { id: String },
    /// One Access service token, by id.
    ServiceToken { token_id: String },
    /// Any valid service token of the account.
    AnyValidServiceToken {},
    /// Everyone.
    Everyone {},
    /// A rule of another kind, as Cloudflare sent it.
    #[serde(untagged)]
    Other(serde_json::Value),
}

impl AccessRule {
    pub fn email(email: impl Into<String>) -> Self {
        Self::Email {
            email: email.into(),
        }
    }

    pub fn email_domain(domain: impl Into<String>) -> Self {
        Self::EmailDomain {
            domain: domain.into(),
        }
    }

    pub fn group(id: impl Into<String>) -> Self {
        Self::Group { id: id.into() }
    }

    pub fn service_token(token_id: impl Into<String>) -> Self {
        Self::ServiceToken {
            token_id: token_id.into(),
        }
    }

    pub fn any_valid_service_token() -> Self {
        Self::AnyValidServiceToken {}
    }

    pub fn everyone() -> Self {
        Self::Everyone {}
    }
}

/// A reusable Access policy as Cloudflare answers it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct AccessPolicy {
    pub id: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub decision: AccessDecision,
    #[serde(default, deserialize_with = "null_as_default")]
    pub include: Vec<AccessRule>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub exclude: Vec<AccessRule>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub require: Vec<AccessRule>,
    #[serde(default)]
    pub session_duration: Option<String>,
    /// True for reusable policies (the only kind the policies endpoints answer).
    #[serde(default)]
    pub reusable: Option<bool>,
    /// Applications using the policy.
    #[serde(default)]
    pub app_count: Option<u32>,
    #[serde(default)]
    pub created_at: Option<Timestamp>,
    #[serde(default)]
    pub updated_at: Option<Timestamp>,
}

/// A reusable policy as sent to create or replace one; a PUT replaces every field, so every
/// rule list is always sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NewAccessPolicy {
    pub name: String,
    pub decision: AccessDecision,
    pub include: Vec<AccessRule>,
    pub exclude: Vec<AccessRule>,
    pub require: Vec<AccessRule>,
    /// Go duration text (`24h`, `2h45m`); Cloudflare's default (24h) when `None`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_duration: Option<String>,
}

impl NewAccessPolicy {
    /// A policy with these include rules and no exclude or require rules.
    pub fn new(
        name: impl Into<String>,
        decision: AccessDecision,
        include: Vec<AccessRule>,
    ) -> Self {
        Self {
            name: name.into(),
            decision,
            include,
            exclude: Vec::new(),
            require: Vec::new(),
            session_duration: None,
        }
    }

    pub(crate) fn validate(&self) -> Result<(), CloudflareError> {
        if self.name.trim().is_empty() {
            return Err(CloudflareError::InvalidInput(
                "Access policy name is empty".into(),
            ));
        }
        if self.decision == AccessDecision::Unknown {
            return Err(CloudflareError::InvalidInput(format!(
                "Access policy {:?} has no known decision",
                self.name
            )));
        }
        if self.include.is_empty() {
            return Err(CloudflareError::InvalidInput(format!(
                "Access policy {:?} has no include rule, so it would match nobody",
                self.name
            )));
        }
        Ok(())
    }
}

/// A reusable policy linked to an application; the lowest precedence is evaluated first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccessPolicyLink {
    pub id: String,
    pub precedence: i64,
}

/// A policy of an application: the policy itself and its precedence there.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct AccessAppPolicy {
    #[serde(flatten)]
    pub policy: AccessPolicy,
    #[serde(default)]
    pub precedence: Option<i64>,
}

/// An Access application as Cloudflare answers it (every type parses; the client creates
/// only self-hosted ones).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct AccessApp {
    pub id: String,
    /// The audience tag: the `aud` claim of the tokens Access issues for this application.
    #[serde(default)]
    pub aud: String,
    #[serde(default, rename = "type")]
    pub app_type: String,
    #[serde(default)]
    pub name: String,
    /// The primary hostname and optional path, e.g. `app.example.com/admin`.
    #[serde(default)]
    pub domain: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub self_hosted_domains: Vec<String>,
    #[serde(default)]
    pub session_duration: Option<String>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub policies: Vec<AccessAppPolicy>,
    #[serde(default)]
    pub created_at: Option<Timestamp>,
    #[serde(default)]
    pub updated_at: Option<Timestamp>,
}

impl AccessApp {
    /// Whether the application secures `domain` (as its primary domain or one of its
    /// self-hosted domains): hostnames compared without case, paths exactly.
    pub fn covers(&self, domain: &str) -> bool {
        std::iter::once(&self.domain)
            .chain(&self.self_hosted_domains)
            .any(|own| same_domain(own, domain))
    }
}

fn same_domain(a: &str, b: &str) -> bool {
    let split = |d: &str| {
        let d = d.trim().trim_end_matches('/');
        match d.split_once('/') {
            Some((host, path)) => (
                host.trim_end_matches('.').to_ascii_lowercase(),
                path.to_string(),
            ),
            None => (d.trim_end_matches('.').to_ascii_lowercase(), String::new()),
        }
    };
    split(a) == split(b)
}

/// A self-hosted application as sent to create or replace one. A PUT replaces every field,
/// so the policies are always sent (none detaches them all).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NewAccessApp {
    pub name: String,
    /// The primary hostname and optional path; it must sit on an active zone of the account.
    pub domain: String,
    /// Go duration text (`24h`, `2h45m`); Cloudflare's default (24h) when `None`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_duration: Option<String>,
    pub policies: Vec<AccessPolicyLink>,
}

impl NewAccessApp {
    /// A self-hosted application for `domain` with no policy yet.
    pub fn self_hosted(name: impl Into<String>, domain: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            domain: domain.into(),
            session_duration: None,
            policies: Vec::new(),
        }
    }

    /// Links these reusable policies, evaluated in the order given (precedence 1, 2, …).
    pub fn with_policies<I, S>(mut self, policy_ids: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.policies = policy_ids
            .into_iter()
            .zip(1..)
            .map(|(id, precedence)| AccessPolicyLink {
                id: id.into(),
                precedence,
            })
            .collect();
        self
    }

    pub fn with_session_duration(mut self, duration: impl Into<String>) -> Self {
        self.session_duration = Some(duration.into());
        self
    }

    pub(crate) fn validate(&self) -> Result<(), CloudflareError> {
        if self.domain.trim().is_empty() {
            return Err(CloudflareError::InvalidInput(
                "Access application domain is empty".into(),
            ));
        }
        if self.name.trim().is_empty() {
            return Err(CloudflareError::InvalidInput(format!(
                "Access application for {} has an empty name",
                self.domain
            )));
        }
        let mut precedences = std::collections::HashSet::new();
        for link in &self.policies {
            if link.id.trim().is_empty()
                || link.precedence < 1
                || !precedences.insert(link.precedence)
            {
                return Err(CloudflareError::InvalidInput(format!(
                    "Access application {}: every policy needs an id and its own precedence of at least 1",
                    self.domain
                )));
            }
        }
        Ok(())
    }
}

/// The create and update body: the application and its type.
#[derive(Serialize)]
pub(crate) struct SelfHostedBody<'a> {
    #[serde(rename = "type")]
    pub app_type: &'static str,
    #[serde(flatten)]
    pub app: &'a NewAccessApp,
}
