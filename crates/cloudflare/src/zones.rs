//! Token verification, accounts and zones.
use super::engine::{Call, CloudflareClient};
use super::error::{CODE_INVALID_TOKEN, CloudflareError};
use super::models::{Account, TokenVerification, Zone};

/// Largest page of `/accounts` and `/zones`.
pub const MAX_ZONES_PER_PAGE: u32 = 50;

/// Filters of the zone list; unset fields are not sent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ZoneFilter {
    /// Zone name (exact unless prefixed with an operator such as `ends_with:`).
    pub name: Option<String>,
    /// Owning account.
    pub account_id: Option<String>,
    /// `initializing`, `pending`, `active` or `moved`.
    pub status: Option<String>,
}

impl CloudflareClient {
    /// Verifies the credential. User tokens answer on `/user/tokens/verify`; account-owned tokens
    /// get code 1000 there, so with `account_id` the account endpoint is tried next.
    pub async fn verify_token(
        &self,
        account_id: Option<&str>,
    ) -> Result<TokenVerification, CloudflareError> {
        let user = self
            .fetch(Call::get("token.verify", &["user", "tokens", "verify"]))
            .await;
        match (user, account_id) {
            (Err(err), Some(account)) if err.has_code(CODE_INVALID_TOKEN) => {
                let path = ["accounts", account, "tokens", "verify"];
                self.fetch(Call::get("token.verify_account", &path)).await
            }
            (result, _) => result,
        }
    }

    /// Accounts visible to the credential, optionally only those called `name`.
    pub async fn list_accounts(&self, name: Option<&str>) -> Result<Vec<Account>, CloudflareError> {
        let query = name.map(|n| ("name", n.to_owned())).into_iter().collect();
        self.fetch_all("account.list", &["accounts"], query, MAX_ZONES_PER_PAGE)
            .await
    }

    /// Zones matching `filter`, all pages.
    pub async fn list_zones(&self, filter: &ZoneFilter) -> Result<Vec<Zone>, CloudflareError> {
        let mut query = Vec::new();
        if let Some(name) = &filter.name {
            query.push(("name", name.clone()));
        }
        if let Some(account) = &filter.account_id {
            query.push(("account.id", account.clone()));
        }
        if let Some(status) = &filter.status {
            query.push(("status", status.clone()));
        }
        self.fetch_all("zone.list", &["zones"], query, MAX_ZONES_PER_PAGE)
            .await
    }

    /// One zone.
    pub async fn get_zone(&self, zone_id: &str) -> Result<Zone, CloudflareError> {
        self.fetch(Call::get("zone.get", &["zones", zone_id])).await
    }
}
