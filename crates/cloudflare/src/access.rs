//! Zero Trust Access operations: the organization, self-hosted applications and reusable
//! policies of an account.
use http::Method;

use super::access_models::{
    AccessApp, AccessOrganization, AccessPolicy, NewAccessApp, NewAccessPolicy, SelfHostedBody,
};
use super::engine::{Call, CloudflareClient};
use super::error::CloudflareError;

/// Page size of the Access list walks. The 2024 schema declares no paging for these lists;
/// the current API and its SDKs page them with `page` and `per_page`.
pub const ACCESS_PER_PAGE: u32 = 50;

impl CloudflareClient {
    /// The account's Zero Trust organization; `None` when the account has none (Cloudflare
    /// answers `access.api.error.not_enabled`, or 404).
    pub async fn access_organization(
        &self,
        account_id: &str,
    ) -> Result<Option<AccessOrganization>, CloudflareError> {
        let path = ["accounts", account_id, "access", "organizations"];
        match self
            .fetch(Call::get("access.organization.get", &path))
            .await
        {
            Ok(org) => Ok(Some(org)),
            Err(err) if err.is_access_not_enabled() || err.is_not_found() => Ok(None),
            Err(err) => Err(err),
        }
    }

    /// Every Access application of the account, all pages; with `domain`, only those that
    /// secure it (filtered here: the 2024 schema has no domain filter).
    pub async fn list_access_apps(
        &self,
        account_id: &str,
        domain: Option<&str>,
    ) -> Result<Vec<AccessApp>, CloudflareError> {
        let path = ["accounts", account_id, "access", "apps"];
        let apps: Vec<AccessApp> = self
            .fetch_all("access.app.list", &path, Vec::new(), ACCESS_PER_PAGE)
            .await?;
        Ok(match domain {
            Some(domain) => apps.into_iter().filter(|a| a.covers(domain)).collect(),
            None => apps,
        })
    }

    /// Adds a self-hosted application; Cloudflare generates its id and audience tag.
    ///
    /// Retried after timeouts and 5xx like every call, and Cloudflare does not refuse a second
    /// application on one domain, so a lost answer can leave a duplicate: callers look for
    /// theirs with [`CloudflareClient::list_access_apps`] before creating.
    pub async fn create_access_app(
        &self,
        account_id: &str,
        app: &NewAccessApp,
    ) -> Result<AccessApp, CloudflareError> {
        app.validate()?;
        let path = ["accounts", account_id, "access", "apps"];
        self.fetch(Call::with_json(
            "access.app.create",
            Method::POST,
            &path,
            &self_hosted(app),
        )?)
        .await
    }

    /// One application.
    pub async fn get_access_app(
        &self,
        account_id: &str,
        app_id: &str,
    ) -> Result<AccessApp, CloudflareError> {
        let path = ["accounts", account_id, "access", "apps", app_id];
        self.fetch(Call::get("access.app.get", &path)).await
    }

    /// Replaces an application (PUT): its id and audience tag stay, every other field is the
    /// one sent or its default.
    pub async fn update_access_app(
        &self,
        account_id: &str,
        app_id: &str,
        app: &NewAccessApp,
    ) -> Result<AccessApp, CloudflareError> {
        app.validate()?;
        let path = ["accounts", account_id, "access", "apps", app_id];
        self.fetch(Call::with_json(
            "access.app.update",
            Method::PUT,
            &path,
            &self_hosted(app),
        )?)
        .await
    }

    /// Deletes an application (no body); a 404 means it is already gone.
    pub async fn delete_access_app(
        &self,
        account_id: &str,
        app_id: &str,
    ) -> Result<(), CloudflareError> {
        let path = ["accounts", account_id, "access", "apps", app_id];
        self.execute::<serde::de::IgnoredAny>(Call::delete("access.app.delete", &path))
            .await?;
        Ok(())
    }

    /// Every reusable policy of the account, all pages.
    pub async fn list_access_policies(
        &self,
        account_id: &str,
    ) -> Result<Vec<AccessPolicy>, CloudflareError> {
        let path = ["accounts", account_id, "access", "policies"];
        self.fetch_all("access.policy.list", &path, Vec::new(), ACCESS_PER_PAGE)
            .await
    }

    /// Creates a reusable policy.
    pub async fn create_access_policy(
        &self,
        account_id: &str,
        policy: &NewAccessPolicy,
    ) -> Result<AccessPolicy, CloudflareError> {
        policy.validate()?;
        let path = ["accounts", account_id, "access", "policies"];
        self.fetch(Call::with_json(
            "access.policy.create",
            Method::POST,
            &path,
            policy,
        )?)
        .await
    }

    /// One reusable policy.
    pub async fn get_access_policy(
        &self,
        account_id: &str,
        policy_id: &str,
    ) -> Result<AccessPolicy, CloudflareError> {
        let path = ["accounts", account_id, "access", "policies", policy_id];
        self.fetch(Call::get("access.policy.get", &path)).await
    }

    /// Replaces a reusable policy (PUT); every application linking it follows.
    pub async fn update_access_policy(
        &self,
        account_id: &str,
        policy_id: &str,
        policy: &NewAccessPolicy,
    ) -> Result<AccessPolicy, CloudflareError> {
        policy.validate()?;
        let path = ["accounts", account_id, "access", "policies", policy_id];
        self.fetch(Call::with_json(
            "access.policy.update",
            Method::PUT,
            &path,
            policy,
        )?)
        .await
    }

    /// Deletes a reusable policy (no body); a 404 means it is already gone. Detach it from
    /// its applications first.
    pub async fn delete_access_policy(
        &self,
        account_id: &str,
        policy_id: &str,
    ) -> Result<(), CloudflareError> {
        let path = ["accounts", account_id, "access", "policies", policy_id];
        self.execute::<serde::de::IgnoredAny>(Call::delete("access.policy.delete", &path))
            .await?;
        Ok(())
    }
}

fn self_hosted(app: &NewAccessApp) -> SelfHostedBody<'_> {
    SelfHostedBody {
        app_type: "self_hosted",
        app,
    }
}
