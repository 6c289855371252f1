//! Tunnel operations: create, list, get, delete, token, connections.
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use http::Method;

use super::engine::{Call, CloudflareClient};
use super::error::CloudflareError;
use super::models::{ConfigSrc, ConnectionClient, NewTunnelBody, SecretString, Tunnel};

/// cloudflared refuses shorter secrets.
pub const MIN_TUNNEL_SECRET_BYTES: usize = 32;
/// Largest page the tunnel list accepts.
pub const MAX_TUNNELS_PER_PAGE: u32 = 1000;

/// Filters of the tunnel list; unset fields are not sent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TunnelFilter {
    /// Exact tunnel name.
    pub name: Option<String>,
    /// `Some(false)` excludes soft-deleted tunnels, `Some(true)` returns only them.
    pub is_deleted: Option<bool>,
    /// Tunnel id.
    pub uuid: Option<String>,
    /// Page size, 1..=1000 (default 1000).
    pub per_page: Option<u32>,
}

impl TunnelFilter {
    /// Live tunnels called `name`: how a tunnel is looked up by name.
    pub fn live_named(name: impl Into<String>) -> Self {
        Self {
            name: Some(name.into()),
            is_deleted: Some(false),
            ..Self::default()
        }
    }
}

impl CloudflareClient {
    /// Creates a tunnel holding `secret` (at least 32 bytes; sent base64-encoded).
    ///
    /// Retried after timeouts and 5xx like every call, so a lost answer can leave a tunnel
    /// behind; the retry then fails with 409/1013 and the caller adopts it by name.
    pub async fn create_tunnel(
        &self,
        account_id: &str,
        name: &str,
        secret: &[u8],
        config_src: ConfigSrc,
    ) -> Result<Tunnel, CloudflareError> {
        if name.trim().is_empty() {
            return Err(CloudflareError::InvalidInput("tunnel name is empty".into()));
        }
        if uuid::Uuid::try_parse(name).is_ok() {
            return Err(CloudflareError::InvalidInput(format!(
                "tunnel name {name:?} looks like a tunnel id; cloudflared would confuse the two"
            )));
        }
        if secret.len() < MIN_TUNNEL_SECRET_BYTES {
            return Err(CloudflareError::InvalidInput(format!(
                "tunnel secret must have at least {MIN_TUNNEL_SECRET_BYTES} bytes, got {}",
                secret.len()
            )));
        }
        if config_src == ConfigSrc::Unknown {
            return Err(CloudflareError::InvalidInput(
                "tunnel config_src must be local or cloudflare".into(),
            ));
        }
        let body = NewTunnelBody {
            name: name.to_owned(),
            tunnel_secret: STANDARD.encode(secret),
            config_src,
        };
        let path = ["accounts", account_id, "cfd_tunnel"];
        self.fetch(Call::with_json(
            "tunnel.create",
            Method::POST,
            &path,
            &body,
        )?)
        .await
    }

    /// Every tunnel matching `filter`, all pages.
    pub async fn list_tunnels(
        &self,
        account_id: &str,
        filter: &TunnelFilter,
    ) -> Result<Vec<Tunnel>, CloudflareError> {
        let mut query = Vec::new();
        if let Some(name) = &filter.name {
            query.push(("name", name.clone()));
        }
        if let Some(deleted) = filter.is_deleted {
            query.push(("is_deleted", deleted.to_string()));
        }
        if let Some(uuid) = &filter.uuid {
            query.push(("uuid", uuid.clone()));
        }
        let per_page = filter
            .per_page
            .unwrap_or(MAX_TUNNELS_PER_PAGE)
            .clamp(1, MAX_TUNNELS_PER_PAGE);
        let path = ["accounts", account_id, "cfd_tunnel"];
        self.fetch_all("tunnel.list", &path, query, per_page).await
    }

    /// The live (not deleted) tunnel called exactly `name`, if any.
    pub async fn find_live_tunnel(
        &self,
        account_id: &str,
        name: &str,
    ) -> Result<Option<Tunnel>, CloudflareError> {
        let tunnels = self
            .list_tunnels(account_id, &TunnelFilter::live_named(name))
            .await?;
        Ok(tunnels
            .into_iter()
            .find(|t| t.name == name && !t.is_deleted()))
    }

    /// One tunnel; a deleted tunnel still answers, with `deleted_at` set.
    pub async fn get_tunnel(
        &self,
        account_id: &str,
        tunnel_id: &str,
    ) -> Result<Tunnel, CloudflareError> {
        let path = ["accounts", account_id, "cfd_tunnel", tunnel_id];
        self.fetch(Call::get("tunnel.get", &path)).await
    }

    /// Deletes a tunnel (no body). `cascade` also drops its connections; without it, a tunnel
    /// with live connectors is refused with code 1022.
    pub async fn delete_tunnel(
        &self,
        account_id: &str,
        tunnel_id: &str,
        cascade: bool,
    ) -> Result<Tunnel, CloudflareError> {
        let path = ["accounts", account_id, "cfd_tunnel", tunnel_id];
        let mut call = Call::delete("tunnel.delete", &path);
        if cascade {
            call = call.query("cascade", "true");
        }
        self.fetch(call).await
    }

    /// The connector token of a tunnel (a credential).
    pub async fn tunnel_token(
        &self,
        account_id: &str,
        tunnel_id: &str,
    ) -> Result<SecretString, CloudflareError> {
        let path = ["accounts", account_id, "cfd_tunnel", tunnel_id, "token"];
        self.fetch(Call::get("tunnel.token", &path)).await
    }

    /// Connectors currently attached to a tunnel.
    pub async fn list_tunnel_connections(
        &self,
        account_id: &str,
        tunnel_id: &str,
    ) -> Result<Vec<ConnectionClient>, CloudflareError> {
        let path = connections_path(account_id, tunnel_id);
        let page = self
            .fetch_page(Call::get("tunnel.connections.list", &path))
            .await?;
        Ok(page.items)
    }

    /// Removes stale connections (no body): of one connector, or of all when `client_id` is None.
    pub async fn clean_up_tunnel_connections(
        &self,
        account_id: &str,
        tunnel_id: &str,
        client_id: Option<&str>,
    ) -> Result<(), CloudflareError> {
        let path = connections_path(account_id, tunnel_id);
        let mut call = Call::delete("tunnel.connections.clean", &path);
        if let Some(client) = client_id {
            call = call.query("client_id", client);
        }
        self.execute::<serde::de::IgnoredAny>(call).await?;
        Ok(())
    }
}

/// `accounts/{account}/cfd_tunnel/{tunnel}/connections`.
fn connections_path<'a>(account_id: &'a str, tunnel_id: &'a str) -> [&'a str; 5] {
    [
        "accounts",
        account_id,
        "cfd_tunnel",
        tunnel_id,
        "connections",
    ]
}

/// A tunnel's configuration on Cloudflare (remotely-managed tunnels).
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
pub struct TunnelConfiguration {
    /// Grows with each PUT; cloudflared applies only a version newer than the one it runs.
    #[serde(default)]
    pub version: i64,
    /// `{"ingress": [...], "originRequest": {...}}`; `null` before the first PUT.
    #[serde(default)]
    pub config: Option<serde_json::Value>,
}

impl CloudflareClient {
    /// The configuration Cloudflare holds for the tunnel.
    pub async fn tunnel_configuration(
        &self,
        account_id: &str,
        tunnel_id: &str,
    ) -> Result<TunnelConfiguration, CloudflareError> {
        let path = [
            "accounts",
            account_id,
            "cfd_tunnel",
            tunnel_id,
            "configurations",
        ];
        self.fetch(Call::get("tunnel.config.get", &path)).await
    }

    /// Replaces the whole configuration (there is no per-rule or conditional update: whoever
    /// writes last wins). Answers the new version.
    pub async fn put_tunnel_configuration(
        &self,
        account_id: &str,
        tunnel_id: &str,
        config: &serde_json::Value,
    ) -> Result<TunnelConfiguration, CloudflareError> {
        let path = [
            "accounts",
            account_id,
            "cfd_tunnel",
            tunnel_id,
            "configurations",
        ];
        let body = serde_json::json!({ "config": config });
        self.fetch(Call::with_json(
            "tunnel.config.put",
            Method::PUT,
            &path,
            &body,
        )?)
        .await
    }
}
