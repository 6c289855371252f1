//! Zero Trust Access as stored: the account's organization (when it has one), its
//! applications and its reusable policies.
use rand::RngCore;
use serde_json::Value;

/// Length of an application's audience tag: 32 random bytes as lowercase hex.
pub(crate) const AUD_HEX_LEN: usize = 64;

/// The account's Zero Trust organization, named after its team.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimAccessOrganization {
    /// The team name, as configured.
    pub name: String,
    /// `<team>.cloudflareaccess.com`.
    pub auth_domain: String,
    pub created_at: String,
    pub updated_at: String,
}

impl SimAccessOrganization {
    /// The organization of `team`, created `at` (RFC 3339).
    pub(crate) fn for_team(team: &str, at: String) -> Self {
        let created_at = at;
        SimAccessOrganization {
            name: team.to_string(),
            auth_domain: format!("{}.cloudflareaccess.com", team.to_ascii_lowercase()),
            created_at: created_at.clone(),
            updated_at: created_at,
        }
    }
}

/// A reusable policy attached to an application, with its precedence there (1 runs first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimAccessPolicyLink {
    pub id: String,
    pub precedence: i64,
}

/// A self-hosted Access application.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimAccessApp {
    /// A UUID.
    pub id: String,
    /// The audience tag the application's tokens carry: 64 lowercase hex, generated per app.
    pub aud: String,
    /// Always `self_hosted`: the only type the simulator serves.
    pub app_type: String,
    pub name: String,
    /// The primary hostname and optional path, e.g. `app.example.com/admin`.
    pub domain: String,
    /// Every domain the application secures; `[domain]` unless sent.
    pub self_hosted_domains: Vec<String>,
    /// Go duration text, `24h` unless sent.
    pub session_duration: String,
    /// Ordered by precedence.
    pub policies: Vec<SimAccessPolicyLink>,
    pub created_at: String,
    pub updated_at: String,
}

/// A reusable Access policy.
#[derive(Debug, Clone, PartialEq)]
pub struct SimAccessPolicy {
    /// A UUID.
    pub id: String,
    pub name: String,
    /// `allow`, `deny`, `non_identity` or `bypass`.
    pub decision: String,
    /// Rules as sent, each an object with one selector (`{"email": {"email": …}}`, …).
    pub include: Vec<Value>,
    pub exclude: Vec<Value>,
    pub require: Vec<Value>,
    /// Go duration text, `24h` unless sent.
    pub session_duration: String,
    pub created_at: String,
    pub updated_at: String,
}

/// Everything Access holds for the account. Applications and policies stay when the
/// organization is taken away, unreachable through the API until it is back.
#[derive(Debug, Default)]
pub(crate) struct AccessState {
    pub organization: Option<SimAccessOrganization>,
    /// Creation order, which is also the list order.
    pub apps: Vec<SimAccessApp>,
    /// Creation order, which is also the list order.
    pub policies: Vec<SimAccessPolicy>,
}

impl AccessState {
    pub fn app(&self, id: &str) -> Option<&SimAccessApp> {
        self.apps.iter().find(|a| a.id.eq_ignore_ascii_case(id))
    }

    pub fn policy(&self, id: &str) -> Option<&SimAccessPolicy> {
        self.policies.iter().find(|p| p.id.eq_ignore_ascii_case(id))
    }

    /// Applications that link the policy.
    pub fn app_count(&self, policy_id: &str) -> usize {
        self.apps
            .iter()
            .filter(|a| a.policies.iter().any(|l| l.id == policy_id))
            .count()
    }

    /// A fresh audience tag no application holds yet.
    pub fn new_aud(&self) -> String {
        loop {
            let mut bytes = [0u8; AUD_HEX_LEN / 2];
            rand::rng().fill_bytes(&mut bytes);
            let aud: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            if !self.apps.iter().any(|a| a.aud == aud) {
                return aud;
            }
        }
    }
}
