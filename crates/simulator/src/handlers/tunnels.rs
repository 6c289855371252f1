//! Cloudflare Tunnels: create, list, get, soft delete, token, connectors and remote config.
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use http::StatusCode;
use rand::RngCore;
use serde_json::{Map, Value, json};

use super::Ctx;
use crate::envelope::{ApiError, Reply};
use crate::state::{SimTunnel, State, now, uuid_id};

/// Smallest decoded secret cloudflared accepts.
const MIN_SECRET_BYTES: usize = 32;

pub(super) fn create(state: &mut State, ctx: &Ctx) -> Result<Reply, ApiError> {
    ctx.check_account(state)?;
    let body = ctx.object()?;
    let name = match body.get("name") {
        Some(Value::String(name)) if !name.trim().is_empty() => name.clone(),
        Some(Value::String(_)) | None | Some(Value::Null) => {
            return Err(ApiError::invalid_request("missing required field `name`"));
        }
        Some(_) => return Err(ApiError::invalid_request("`name` must be a string")),
    };
    if uuid::Uuid::try_parse(&name).is_ok() {
        return Err(ApiError::invalid_request("tunnel name must not be a UUID"));
    }
    let tunnel_secret = match body.get("tunnel_secret") {
        None | Some(Value::Null) => STANDARD.encode(random_secret()),
        Some(Value::String(secret)) => validate_secret(secret)?,
        Some(_) => {
            return Err(ApiError::invalid_request(
                "`tunnel_secret` must be a base64 string",
            ));
        }
    };
    let config_src = match body.get("config_src") {
        None | Some(Value::Null) => "local".to_string(),
        Some(Value::String(src)) if src == "local" || src == "cloudflare" => src.clone(),
        Some(_) => {
            return Err(ApiError::invalid_request(
                "`config_src` must be \"local\" or \"cloudflare\"",
            ));
        }
    };
    if state
        .tunnels
        .iter()
        .any(|t| t.deleted_at.is_none() && t.name == name)
    {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            1013,
            "You already have a tunnel with this name. Delete the existing tunnel, or choose a different name for your new tunnel",
        ));
    }
    let created_at = now();
    let tunnel = SimTunnel {
        id: uuid_id(),
        name,
        created_at: created_at.clone(),
        deleted_at: None,
        config_src,
        tunnel_secret,
        connector_ids: Vec::new(),
        conns_active_at: None,
        conns_inactive_at: None,
        status_override: None,
        config: None,
        config_version: 0,
        config_updated_at: created_at,
    };
    let mut result = tunnel_json(state, &tunnel);
    if let Some(map) = result.as_object_mut() {
        map.insert(
            "credentials_file".into(),
            json!({
                "AccountTag": state.account_id,
                "TunnelID": tunnel.id,
                "TunnelName": tunnel.name,
                "TunnelSecret": tunnel.tunnel_secret,
            }),
        );
        map.insert(
            "token".into(),
            Value::String(token_for(&state.account_id, &tunnel)),
        );
    }
    state.tunnels.push(tunnel);
    Ok(Reply::new(result))
}

fn random_secret() -> [u8; MIN_SECRET_BYTES] {
    let mut secret = [0u8; MIN_SECRET_BYTES];
    rand::rng().fill_bytes(&mut secret);
    secret
}

fn validate_secret(secret: &str) -> Result<String, ApiError> {
    let decoded = STANDARD
        .decode(secret)
        .map_err(|_| ApiError::invalid_request("`tunnel_secret` must be standard base64"))?;
    if decoded.len() < MIN_SECRET_BYTES {
        return Err(ApiError::invalid_request(format!(
            "`tunnel_secret` must decode to at least {MIN_SECRET_BYTES} bytes"
        )));
    }
    Ok(secret.to_string())
}

/// The connector token: standard padded base64 of `{"a":…,"s":…,"t":…}`, `s` as sent.
pub(crate) fn token_for(account_id: &str, tunnel: &SimTunnel) -> String {
    let json = json!({ "a": account_id, "s": tunnel.tunnel_secret, "t": tunnel.id });
    STANDARD.encode(json.to_string())
}

pub(super) fn list(state: &State, ctx: &Ctx) -> Result<Reply, ApiError> {
    ctx.check_account(state)?;
    let q = &ctx.query;
    let paging = q.paging(20, 1, 1000)?;
    let is_deleted = q.bool("is_deleted")?;
    let items: Vec<Value> = state
        .tunnels
        .iter()
        .filter(|t| q.get("name").is_none_or(|n| t.name == n))
        .filter(|t| q.get("uuid").is_none_or(|id| t.id.eq_ignore_ascii_case(id)))
        .filter(|t| is_deleted.is_none_or(|d| d == t.deleted_at.is_some()))
        .filter(|t| {
            q.get("include_prefix")
                .is_none_or(|p| t.name.starts_with(p))
        })
        .filter(|t| {
            q.get("exclude_prefix")
                .is_none_or(|p| !t.name.starts_with(p))
        })
        .filter(|t| q.get("status").is_none_or(|s| status(t) == s))
        .map(|t| tunnel_json(state, t))
        .collect();
    let (page, info) = paging.apply(items);
    Ok(Reply::list(page, info))
}

pub(super) fn get(state: &State, ctx: &Ctx) -> Result<Reply, ApiError> {
    let tunnel = find(state, ctx)?;
    Ok(Reply::new(tunnel_json(state, tunnel)))
}

pub(super) fn delete(state: &mut State, ctx: &Ctx) -> Result<Reply, ApiError> {
    let tunnel = live(state, ctx)?;
    let id = tunnel.id.clone();
    let cascade = ctx.query.bool("cascade")?.unwrap_or(false);
    if !tunnel.connector_ids.is_empty() && !cascade {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            1022,
            "Cannot delete tunnel because it has active connections",
        ));
    }
    // Reported of Cloudflare (not documented): without cascade a tunnel that private routes
    // point at is refused with 1023; with cascade its routes go with it.
    if state.networks.routes_through(&id) > 0 {
        if !cascade {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                1023,
                "Cannot delete tunnel because it has Warp routing configured. You can delete the route with `cloudflared tunnel route ip delete`.",
            ));
        }
        state.networks.delete_routes_through(&id, &now());
    }
    state.soft_delete(&id);
    let tunnel = find(state, ctx)?;
    Ok(Reply::new(tunnel_json(state, tunnel)))
}

pub(super) fn token(state: &State, ctx: &Ctx) -> Result<Reply, ApiError> {
    let tunnel = live(state, ctx)?;
    Ok(Reply::new(Value::String(token_for(
        &state.account_id,
        tunnel,
    ))))
}

pub(super) fn connections(state: &State, ctx: &Ctx) -> Result<Reply, ApiError> {
    let tunnel = find(state, ctx)?;
    let clients: Vec<Value> = state
        .connectors
        .get(&tunnel.id)
        .into_iter()
        .flatten()
        .map(|c| {
            json!({
                "id": c.id,
                "arch": "linux_amd64",
                "version": CLOUDFLARED_VERSION,
                "run_at": c.run_at,
                "config_version": tunnel.config_version,
                "features": ["ha-origin"],
                "conns": [connection_json(c)],
            })
        })
        .collect();
    Ok(Reply::new(Value::Array(clients)))
}

pub(super) fn cleanup(state: &mut State, ctx: &Ctx) -> Result<Reply, ApiError> {
    let id = live(state, ctx)?.id.clone();
    state.disconnect(&id, ctx.query.get("client_id"));
    Ok(Reply::new(json!({})))
}

pub(super) fn get_config(state: &State, ctx: &Ctx) -> Result<Reply, ApiError> {
    let tunnel = find(state, ctx)?;
    Ok(Reply::new(config_json(state, tunnel)))
}

pub(super) fn put_config(state: &mut State, ctx: &Ctx) -> Result<Reply, ApiError> {
    live(state, ctx)?;
    let body = ctx.object()?;
    let config = match body.get("config") {
        Some(Value::Object(config)) => config,
        None | Some(Value::Null) => {
            return Err(ApiError::invalid_request("missing required field `config`"));
        }
        Some(_) => return Err(ApiError::invalid_request("`config` must be an object")),
    };
    validate_ingress(config)?;
    let config = Value::Object(config.clone());
    let id = find(state, ctx)?.id.clone();
    let tunnel = state
        .tunnel_mut(&id)
        .ok_or_else(|| tunnel_not_found("Tunnel not found"))?;
    tunnel.config = Some(config);
    tunnel.config_version += 1;
    tunnel.config_updated_at = now();
    // A tunnel whose configuration is on Cloudflare is remotely managed from then on.
    tunnel.config_src = "cloudflare".into();
    let tunnel = find(state, ctx)?;
    Ok(Reply::new(config_json(state, tunnel)))
}

/// Durations of `originRequest` in the configurations API: whole seconds, not Go duration text.
const SECONDS_FIELDS: [&str; 4] = [
    "connectTimeout",
    "tlsTimeout",
    "keepAliveTimeout",
    "tcpKeepAlive",
];

fn validate_origin_request(at: &str, value: Option<&Value>) -> Result<(), ApiError> {
    let Some(value) = value else { return Ok(()) };
    let Some(fields) = value.as_object() else {
        return Err(ApiError::invalid_request(format!(
            "{at}.originRequest must be an object"
        )));
    };
    for name in SECONDS_FIELDS {
        if let Some(v) = fields.get(name)
            && !v.is_u64()
        {
            return Err(ApiError::invalid_request(format!(
                "{at}.originRequest.{name} must be a whole number of seconds, not {v}"
            )));
        }
    }
    Ok(())
}

/// cloudflared's rule: every rule names a service and only the last one catches all.
fn validate_ingress(config: &Map<String, Value>) -> Result<(), ApiError> {
    validate_origin_request("config", config.get("originRequest"))?;
    let Some(ingress) = config.get("ingress") else {
        return Ok(());
    };
    let rules = ingress
        .as_array()
        .ok_or_else(|| ApiError::invalid_request("`config.ingress` must be an array"))?;
    for (index, rule) in rules.iter().enumerate() {
        validate_origin_request(
            &format!("ingress rule #{}", index + 1),
            rule.get("originRequest"),
        )?;
        if !rule.get("service").is_some_and(Value::is_string) {
            return Err(ApiError::invalid_request(format!(
                "ingress rule #{} has no `service`",
                index + 1
            )));
        }
        let hostname = rule.get("hostname").and_then(Value::as_str).unwrap_or("");
        let catch_all =
            (hostname.is_empty() || hostname == "*") && rule.get("path").is_none_or(Value::is_null);
        let last = index + 1 == rules.len();
        if catch_all != last {
            return Err(ApiError::invalid_request(
                "the last ingress rule, and only it, must match all URLs (no hostname, no path)",
            ));
        }
    }
    Ok(())
}

const CLOUDFLARED_VERSION: &str = "2026.1.0";

fn connection_json(c: &crate::state::Connector) -> Value {
    json!({
        "id": c.connection_id,
        "uuid": c.connection_id,
        "colo_name": "SIM",
        "is_pending_reconnect": false,
        "origin_ip": "127.0.0.1",
        "opened_at": c.run_at,
        "client_id": c.id,
        "client_version": CLOUDFLARED_VERSION,
    })
}

fn status(tunnel: &SimTunnel) -> &str {
    if let Some(status) = &tunnel.status_override {
        status
    } else if !tunnel.connector_ids.is_empty() {
        "healthy"
    } else if tunnel.conns_active_at.is_some() {
        "down"
    } else {
        "inactive"
    }
}

/// The `tunnel_cfd_tunnel` object (plus `config_src`, as the current API sends). Without the
/// `connections` array: Cloudflare stopped sending it on 2026-10-05 (connectors are listed by
/// `…/connections`).
fn tunnel_json(state: &State, tunnel: &SimTunnel) -> Value {
    json!({
        "id": tunnel.id,
        "account_tag": state.account_id,
        "name": tunnel.name,
        "created_at": tunnel.created_at,
        "deleted_at": tunnel.deleted_at,
        "conns_active_at": tunnel.conns_active_at,
        "conns_inactive_at": tunnel.conns_inactive_at,
        "status": status(tunnel),
        "tun_type": "cfd_tunnel",
        "metadata": {},
        "remote_config": tunnel.config_src == "cloudflare",
        "config_src": tunnel.config_src,
    })
}

fn config_json(state: &State, tunnel: &SimTunnel) -> Value {
    json!({
        "account_id": state.account_id,
        "tunnel_id": tunnel.id,
        "version": tunnel.config_version,
        "config": tunnel.config.as_ref().map(as_answered),
        "source": tunnel.config_src,
        "created_at": tunnel.config_updated_at,
    })
}

/// A stored configuration as Cloudflare is reported to answer it: with fields nobody sent,
/// `warp-routing: {enabled: false}` when absent and an empty `originRequest` on every rule
/// without one. What is stored (and what `Simulator::tunnels` shows) stays as it was sent.
fn as_answered(config: &Value) -> Value {
    let mut answered = config.clone();
    if let Value::Object(fields) = &mut answered {
        fields
            .entry("warp-routing")
            .or_insert_with(|| json!({ "enabled": false }));
        if let Some(Value::Array(rules)) = fields.get_mut("ingress") {
            for rule in rules.iter_mut().filter_map(Value::as_object_mut) {
                rule.entry("originRequest").or_insert_with(|| json!({}));
            }
        }
    }
    answered
}

fn tunnel_not_found(message: &str) -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, 1003, message)
}

/// The tunnel named by the path, deleted or not.
fn find<'s>(state: &'s State, ctx: &Ctx) -> Result<&'s SimTunnel, ApiError> {
    ctx.check_account(state)?;
    state
        .tunnel(ctx.param("tunnel_id"))
        .ok_or_else(|| tunnel_not_found("Tunnel not found"))
}

/// The tunnel named by the path, refused with 404 when soft-deleted.
fn live<'s>(state: &'s State, ctx: &Ctx) -> Result<&'s SimTunnel, ApiError> {
    let tunnel = find(state, ctx)?;
    if tunnel.deleted_at.is_some() {
        return Err(tunnel_not_found("Tunnel has been deleted"));
    }
    Ok(tunnel)
}
