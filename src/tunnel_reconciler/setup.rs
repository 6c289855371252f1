//! Which tunnel an object runs and with which credentials: a new tunnel (created crash-safely),
//! an adopted one, or an existing one; plus its account and zone (docs/design.md §3.1 steps 3–4).
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use k8s_openapi::api::core::v1::Secret;
use kube::{Api, ResourceExt};
use rand::RngCore;

use super::context::TunnelContext;
use super::render_input::is_remote;
use super::resolved::Resolved;
use super::{apply, legacy, status};
use crate::term::ReconcileError;
use crate::term::adapters::TunnelKindAdapter;
use crate::term::conditions::ReadyReason;
use crate::term::context::Context;
use crate::term::credentials::{self, ApiSecret, Stored};
use crate::term::{claims, events};
use cftunnel_cloudflare::{
    CloudflareClient, ConfigSrc, MIN_TUNNEL_SECRET_BYTES, Tunnel, TunnelToken, ZoneFilter,
};
use cftunnel_policy::render::TunnelCredentials;
use cftunnel_policy::render::config::ORIGIN_CA_KEY;
use cftunnel_types::names::ANNOTATION_ADOPT_TUNNEL_ID;
use cftunnel_types::{TunnelSpec, TunnelStatus};

fn non_empty(value: Option<&String>) -> Option<&str> {
    value.map(String::as_str).filter(|v| !v.is_empty())
}

fn is_account_id(id: &str) -> bool {
    id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit())
}

pub(crate) async fn resolve<K: TunnelKindAdapter>(
    obj: &K,
    ctx: &TunnelContext,
    cf: &CloudflareClient,
    spec: &TunnelSpec,
    api_secret: &ApiSecret,
    managed_secret: Option<&Secret>,
) -> Result<Resolved, ReconcileError> {
    let status = obj.tunnel_status().cloned().unwrap_or_default();
    let account_id = account_id(cf, spec, &status).await?;
    let stored = credentials::stored(managed_secret);
    let (tunnel_id, tunnel_name, creds) = if let Some(new) = &spec.new_tunnel {
        let source = if is_remote(spec) {
            ConfigSrc::Cloudflare
        } else {
            ConfigSrc::Local
        };
        new_tunnel(
            obj,
            ctx,
            cf,
            &account_id,
            (&new.name, source),
            &status,
            stored,
        )
        .await?
    } else {
        existing_tunnel(cf, &account_id, spec, api_secret, &status, stored).await?
    };
    // Created now (not named by an earlier reconcile): see `CreatedTunnels`. A same-named
    // tunnel adopted after a lost create answer is this object's own too; one named by the
    // adopt annotation is someone else's.
    let created_now = spec.new_tunnel.is_some()
        && non_empty(status.tunnel_id.as_ref()).is_none()
        && obj.annotations().get(ANNOTATION_ADOPT_TUNNEL_ID) != Some(&tunnel_id);
    if created_now {
        ctx.cloudflare.created.created(&tunnel_id);
    }
    // Before the id is recorded: an object that does not run this tunnel never names it in
    // status, so nothing (DNS included) acts on it for this object.
    if let Some(winner) = ctx.claims.get().and_then(|c| c.ahead_of(obj, &tunnel_id)) {
        return Err(ReconcileError::blocked(
            ReadyReason::TunnelIdConflict,
            claims::conflict_message(&tunnel_id, &winner),
        ));
    }
    if status.tunnel_id.as_deref() != Some(tunnel_id.as_str()) {
        status::record_ids(obj, ctx, &account_id, &tunnel_id, &tunnel_name).await?;
    }
    let domain = spec.cloudflare.domain.clone();
    let zone_id = match non_empty(status.zone_id.as_ref()) {
        Some(id) if status.zone_domain.as_deref() == Some(domain.as_str()) => id.to_string(),
        _ => {
            ctx.cloudflare
                .zone_ids
                .get_or_lookup(&api_secret.credentials, &account_id, &domain, || {
                    zone_id(cf, &account_id, &domain)
                })
                .await?
        }
    };
    Ok(Resolved {
        account_id,
        tunnel_id,
        tunnel_name,
        zone_id,
        zone_domain: domain,
        credentials: creds,
        notes: legacy::notes(spec),
    })
}

/// `accountId` wins when valid; otherwise the account is looked up by name.
pub(super) async fn account_id(
    cf: &CloudflareClient,
    spec: &TunnelSpec,
    status: &TunnelStatus,
) -> Result<String, ReconcileError> {
    if let Some(id) = non_empty(status.account_id.as_ref()) {
        return Ok(id.to_string());
    }
    let details = &spec.cloudflare;
    if let Some(id) = non_empty(details.account_id.as_ref()).filter(|id| is_account_id(id)) {
        return Ok(id.to_ascii_lowercase());
    }
    let Some(name) = non_empty(details.account_name.as_ref()) else {
        return Err(ReconcileError::blocked(
            ReadyReason::InvalidSpec,
            "spec.cloudflare.accountId is not a 32-character hex id and no accountName is given"
                .to_string(),
        ));
    };
    let accounts = cf
        .list_accounts(Some(name))
        .await
        .map_err(|e| ReconcileError::cloudflare("listing accounts", e))?;
    accounts
        .into_iter()
        .find(|a| a.name == name)
        .map(|a| a.id)
        .ok_or_else(|| {
            ReconcileError::blocked(
                ReadyReason::AccountNotFound,
                format!(
                    "no account named {name:?} is visible to this credential (account-owned API tokens cannot list accounts: set spec.cloudflare.accountId)"
                ),
            )
        })
}

pub(super) async fn zone_id(
    cf: &CloudflareClient,
    account_id: &str,
    domain: &str,
) -> Result<String, ReconcileError> {
    let filter = ZoneFilter {
        name: Some(domain.to_string()),
        account_id: Some(account_id.to_string()),
        ..ZoneFilter::default()
    };
    let zones = cf
        .list_zones(&filter)
        .await
        .map_err(|e| ReconcileError::cloudflare("listing zones", e))?;
    zones
        .into_iter()
        .find(|z| z.name.eq_ignore_ascii_case(domain))
        .map(|z| z.id)
        .ok_or_else(|| {
            ReconcileError::blocked(
                ReadyReason::ZoneNotFound,
                format!(
                    "zone {domain:?} (spec.cloudflare.domain) not found in account {account_id}"
                ),
            )
        })
}

type TunnelFacts = (String, String, TunnelCredentials);

/// newTunnel: the id in status, an explicit adoption, or a crash-safe create.
async fn new_tunnel<K: TunnelKindAdapter>(
    obj: &K,
    ctx: &Context,
    cf: &CloudflareClient,
    account_id: &str,
    (name, config_src): (&str, ConfigSrc),
    status: &TunnelStatus,
    stored: Stored,
) -> Result<TunnelFacts, ReconcileError> {
    if let Some(id) = non_empty(status.tunnel_id.as_ref()) {
        let tunnel_name = non_empty(status.tunnel_name.as_ref()).unwrap_or(name);
        let creds = match stored {
            Stored::Credentials(c) if c.tunnel_id == id => c,
            _ => token_credentials(cf, account_id, id).await?,
        };
        return Ok((id.to_string(), tunnel_name.to_string(), creds));
    }
    // An adopted tunnel that was later deleted on Cloudflare is not adopted again.
    let previous = status.previous_tunnel_ids.as_deref().unwrap_or_default();
    if let Some(id) = obj
        .annotations()
        .get(ANNOTATION_ADOPT_TUNNEL_ID)
        .filter(|v| !v.is_empty() && !previous.contains(v))
    {
        let tunnel = live_tunnel_by_id(cf, account_id, id).await?;
        let creds = token_credentials(cf, account_id, &tunnel.id).await?;
        announce(ctx, obj, "TunnelAdopted", "adopted", &tunnel).await;
        return Ok((tunnel.id, tunnel.name, creds));
    }
    // Credentials of a tunnel deleted on Cloudflare are never reused: a recreate gets a new secret.
    let stored = match stored {
        Stored::Credentials(c) if previous.contains(&c.tunnel_id) => Stored::Nothing,
        other => other,
    };
    let (secret, maybe_created) = match stored {
        Stored::Credentials(c) => match credentials::decode_secret(&c.secret_b64) {
            Some(bytes) => (bytes, true),
            None => (store_new_secret(obj, ctx).await?, false),
        },
        Stored::Pending(bytes) => (bytes, true),
        Stored::Nothing => (store_new_secret(obj, ctx).await?, false),
    };
    if maybe_created {
        // A previous attempt may have created the tunnel and lost the answer.
        if let Some(tunnel) = live_tunnel_by_name(cf, account_id, name).await? {
            return adopt_if_ours(obj, ctx, cf, account_id, tunnel, &secret).await;
        }
    }
    match cf
        .create_tunnel(account_id, name, &secret, config_src)
        .await
    {
        Ok(tunnel) => Ok(created(ctx, obj, account_id, tunnel, &secret).await),
        Err(e) if e.is_conflict_tunnel_name() => {
            match live_tunnel_by_name(cf, account_id, name).await? {
                Some(tunnel) => adopt_if_ours(obj, ctx, cf, account_id, tunnel, &secret).await,
                None => Err(ReconcileError::cloudflare("creating the tunnel", e)),
            }
        }
        Err(e) => Err(ReconcileError::cloudflare("creating the tunnel", e)),
    }
}

/// Generates the tunnel secret and stores it in the managed Secret before any create.
async fn store_new_secret<K: TunnelKindAdapter>(
    obj: &K,
    ctx: &Context,
) -> Result<Vec<u8>, ReconcileError> {
    let mut bytes = vec![0u8; MIN_TUNNEL_SECRET_BYTES];
    rand::rng().fill_bytes(&mut bytes);
    apply::apply_pending_secret(ctx, &obj.identity(&ctx.options), &STANDARD.encode(&bytes)).await?;
    Ok(bytes)
}

/// A same-named live tunnel is ours only if its decoded secret equals the stored one.
async fn adopt_if_ours<K: TunnelKindAdapter>(
    obj: &K,
    ctx: &Context,
    cf: &CloudflareClient,
    account_id: &str,
    tunnel: Tunnel,
    secret: &[u8],
) -> Result<TunnelFacts, ReconcileError> {
    let token = cf
        .tunnel_token(account_id, &tunnel.id)
        .await
        .map_err(|e| ReconcileError::cloudflare("fetching the tunnel token", e))?;
    let decoded = TunnelToken::decode(token.expose())
        .map_err(|e| ReconcileError::cloudflare("decoding the tunnel token", e))?;
    if !decoded.secret_matches(secret) {
        return Err(ReconcileError::blocked(
            ReadyReason::TunnelNameConflict,
            format!(
                "a tunnel named {:?} (id {}) already exists on Cloudflare and was not created by this object; set annotation {ANNOTATION_ADOPT_TUNNEL_ID}: {} to adopt it, or pick another spec.newTunnel.name",
                tunnel.name, tunnel.id, tunnel.id
            ),
        ));
    }
    Ok(created(ctx, obj, account_id, tunnel, secret).await)
}

/// The facts of a tunnel this object created with `secret`, announced with an Event.
async fn created<K: TunnelKindAdapter>(
    ctx: &Context,
    obj: &K,
    account_id: &str,
    tunnel: Tunnel,
    secret: &[u8],
) -> TunnelFacts {
    announce(ctx, obj, "TunnelCreated", "created", &tunnel).await;
    let creds = TunnelCredentials {
        account_tag: account_id.to_string(),
        secret_b64: STANDARD.encode(secret),
        tunnel_id: tunnel.id.clone(),
    };
    (tunnel.id, tunnel.name, creds)
}

/// A Normal Event `reason` on `obj`: "<verb> tunnel NAME (ID)".
async fn announce<K: TunnelKindAdapter>(
    ctx: &Context,
    obj: &K,
    reason: &str,
    verb: &str,
    tunnel: &Tunnel,
) {
    let message = format!("{verb} tunnel {} ({})", tunnel.name, tunnel.id);
    events::normal(ctx, obj, reason, message).await;
}

/// The live (not deleted) tunnel named `name`, if any.
async fn live_tunnel_by_name(
    cf: &CloudflareClient,
    account_id: &str,
    name: &str,
) -> Result<Option<Tunnel>, ReconcileError> {
    cf.find_live_tunnel(account_id, name)
        .await
        .map_err(|e| ReconcileError::cloudflare("looking up the tunnel by name", e))
}

async fn live_tunnel_by_id(
    cf: &CloudflareClient,
    account_id: &str,
    id: &str,
) -> Result<Tunnel, ReconcileError> {
    let not_found = || {
        ReconcileError::blocked(
            ReadyReason::TunnelNotFound,
            format!("tunnel {id} does not exist on Cloudflare or is deleted"),
        )
    };
    match cf.get_tunnel(account_id, id).await {
        Ok(t) if t.is_deleted() => Err(not_found()),
        Ok(t) => Ok(t),
        Err(e) if e.is_not_found() => Err(not_found()),
        Err(e) => Err(ReconcileError::cloudflare("fetching the tunnel", e)),
    }
}

async fn token_credentials(
    cf: &CloudflareClient,
    account_id: &str,
    id: &str,
) -> Result<TunnelCredentials, ReconcileError> {
    let token = cf
        .tunnel_token(account_id, id)
        .await
        .map_err(|e| ReconcileError::cloudflare("fetching the tunnel token", e))?;
    credentials::from_token(token.expose())
}

/// existingTunnel: by id or name; credentials from the API Secret or the token endpoint.
async fn existing_tunnel(
    cf: &CloudflareClient,
    account_id: &str,
    spec: &TunnelSpec,
    api_secret: &ApiSecret,
    status: &TunnelStatus,
    stored: Stored,
) -> Result<TunnelFacts, ReconcileError> {
    let (wanted_id, wanted_name) = legacy::existing_target(spec);
    let status_id = non_empty(status.tunnel_id.as_ref());
    let same_target = match wanted_id {
        Some(id) => status_id == Some(id),
        None => status_id.is_some() && non_empty(status.tunnel_name.as_ref()) == wanted_name,
    };
    if let (true, Some(id)) = (same_target, status_id) {
        let name = non_empty(status.tunnel_name.as_ref()).unwrap_or_default();
        // Credentials in the API Secret win over the stored ones, so a corrected key takes effect.
        if let Some(c) = secret_credentials(spec, api_secret, account_id, id)? {
            return Ok((id.to_string(), name.to_string(), c));
        }
        if let Stored::Credentials(c) = &stored
            && c.tunnel_id == id
        {
            return Ok((id.to_string(), name.to_string(), c.clone()));
        }
    }
    let tunnel = match (wanted_id, wanted_name) {
        (Some(id), _) => live_tunnel_by_id(cf, account_id, id).await?,
        (None, Some(name)) => cf
            .find_live_tunnel(account_id, name)
            .await
            .map_err(|e| ReconcileError::cloudflare("looking up the tunnel by name", e))?
            .ok_or_else(|| {
                ReconcileError::blocked(
                    ReadyReason::TunnelNotFound,
                    format!("no live tunnel named {name:?} in account {account_id}"),
                )
            })?,
        (None, None) => {
            return Err(ReconcileError::blocked(
                ReadyReason::InvalidSpec,
                "spec.existingTunnel needs an id or a name".to_string(),
            ));
        }
    };
    if tunnel.is_remotely_managed() && !is_remote(spec) {
        return Err(ReconcileError::blocked(
            ReadyReason::RemotelyManagedTunnel,
            format!(
                "tunnel {} ({}) is managed in the Cloudflare dashboard (config_src: cloudflare), which would silently ignore the routes cftunnel renders; set spec.configSource: Cloudflare to let cftunnel push its routes there (it then owns the tunnel's configuration), or use a locally managed tunnel",
                tunnel.name, tunnel.id
            ),
        ));
    }
    let creds = match secret_credentials(spec, api_secret, account_id, &tunnel.id)? {
        Some(creds) => creds,
        None => token_credentials(cf, account_id, &tunnel.id).await?,
    };
    Ok((tunnel.id, tunnel.name, creds))
}

/// Credentials of tunnel `tunnel_id` given by the API Secret (a credentials.json or only the
/// tunnel secret); `None` when it gives none.
fn secret_credentials(
    spec: &TunnelSpec,
    api_secret: &ApiSecret,
    account_id: &str,
    tunnel_id: &str,
) -> Result<Option<TunnelCredentials>, ReconcileError> {
    let key = &spec.cloudflare;
    if let Some(file) = &api_secret.credential_file {
        let creds = credentials::parse_credentials_file(file).ok_or_else(|| {
            ReconcileError::blocked(
                ReadyReason::CredentialsInvalid,
                format!(
                    "key {} of the API Secret is not a valid credentials.json",
                    key.credential_file_key
                ),
            )
        })?;
        if creds.tunnel_id != tunnel_id {
            return Err(ReconcileError::blocked(
                ReadyReason::CredentialsInvalid,
                format!(
                    "key {} of the API Secret holds credentials of tunnel {}, not of tunnel {tunnel_id}",
                    key.credential_file_key, creds.tunnel_id
                ),
            ));
        }
        return Ok(Some(creds));
    }
    let Some(secret) = &api_secret.credential_secret else {
        return Ok(None);
    };
    credentials::decode_secret(secret).ok_or_else(|| {
        ReconcileError::blocked(
            ReadyReason::CredentialsInvalid,
            format!(
                "key {} of the API Secret is not a base64 tunnel secret of at least {MIN_TUNNEL_SECRET_BYTES} bytes",
                key.credential_secret_key
            ),
        )
    })?;
    Ok(Some(TunnelCredentials {
        account_tag: account_id.to_string(),
        secret_b64: secret.trim().to_string(),
        tunnel_id: tunnel_id.to_string(),
    }))
}

/// `tls.crt` of the `originCaPool` Secret, when the spec names one.
pub async fn origin_ca(
    ctx: &Context,
    namespace: &str,
    pool: Option<&str>,
) -> Result<Option<String>, ReconcileError> {
    let Some(name) = pool.filter(|p| !p.is_empty()) else {
        return Ok(None);
    };
    let secret = Api::<Secret>::namespaced(ctx.client.clone(), namespace)
        .get_opt(name)
        .await
        .map_err(|e| ReconcileError::kube("reading the originCaPool Secret", e))?
        .ok_or_else(|| {
            ReconcileError::blocked(
                ReadyReason::SecretNotFound,
                format!("Secret {namespace}/{name} named by spec.originCaPool does not exist"),
            )
        })?;
    let pem = secret
        .data
        .as_ref()
        .and_then(|d| d.get(ORIGIN_CA_KEY))
        .map(|b| String::from_utf8_lossy(&b.0).into_owned())
        .ok_or_else(|| {
            ReconcileError::blocked(
                ReadyReason::SecretKeyMissing,
                format!("Secret {namespace}/{name} named by spec.originCaPool has no key {ORIGIN_CA_KEY}"),
            )
        })?;
    Ok(Some(pem))
}
