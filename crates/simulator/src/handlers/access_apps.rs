//! Access applications: list, add, get, update (a whole replacement), delete.
//!
//! Only `self_hosted` applications are served. `type` and `domain` are required, as in the
//! subset; every domain must sit on an active zone of the account (Cloudflare is reported to
//! answer `domain does not belong to zone` otherwise, pending zones included). `name`
//! defaults to the domain and `session_duration` to `24h`. `policies` link reusable policies:
//! an id, or `{id, precedence}`; precedences default to the list position and must be unique;
//! an unknown policy is refused. Application-scoped policies written inline are not simulated.
//! A PUT replaces the application: a field left out takes its default (no policies).
//! Other fields are accepted and not kept. Two applications may share a domain: no refusal
//! of that is published or reported, so the simulator accepts it.
use std::collections::HashSet;

use http::StatusCode;
use serde_json::{Map, Value};

use super::Ctx;
use super::access::{
    DEFAULT_PER_PAGE, MAX_PER_PAGE, app_json, deleted, enabled, invalid, not_found,
};
use super::access_rules::duration;
use crate::access_state::{SimAccessApp, SimAccessPolicyLink};
use crate::envelope::{ApiError, Reply};
use crate::state::{State, now, uuid_id};

/// What a request body says about an application.
struct AppFields {
    name: String,
    domain: String,
    self_hosted_domains: Vec<String>,
    session_duration: String,
    policies: Vec<SimAccessPolicyLink>,
}

pub(super) fn list(state: &State, ctx: &Ctx) -> Result<Reply, ApiError> {
    enabled(state, ctx)?;
    let paging = ctx.query.paging(DEFAULT_PER_PAGE, 1, MAX_PER_PAGE)?;
    let items = state
        .access
        .apps
        .iter()
        .map(|app| app_json(state, app))
        .collect();
    let (page, info) = paging.apply(items);
    Ok(Reply::list(page, info))
}

pub(super) fn create(state: &mut State, ctx: &Ctx) -> Result<Reply, ApiError> {
    enabled(state, ctx)?;
    let app = insert(state, ctx.object()?)?;
    Ok(Reply::new(app_json(state, &app)).with_status(StatusCode::CREATED))
}

/// Checks and stores a new application, organization or not (the create, and seeding).
pub(crate) fn insert(
    state: &mut State,
    body: &Map<String, Value>,
) -> Result<SimAccessApp, ApiError> {
    let fields = app_fields(state, body)?;
    let created_at = now();
    let app = SimAccessApp {
        id: uuid_id(),
        aud: state.access.new_aud(),
        app_type: "self_hosted".into(),
        name: fields.name,
        domain: fields.domain,
        self_hosted_domains: fields.self_hosted_domains,
        session_duration: fields.session_duration,
        policies: fields.policies,
        created_at: created_at.clone(),
        updated_at: created_at,
    };
    state.access.apps.push(app.clone());
    Ok(app)
}

pub(super) fn get(state: &State, ctx: &Ctx) -> Result<Reply, ApiError> {
    enabled(state, ctx)?;
    let app = state
        .access
        .app(ctx.param("app_id"))
        .ok_or_else(not_found)?;
    Ok(Reply::new(app_json(state, app)))
}

pub(super) fn update(state: &mut State, ctx: &Ctx) -> Result<Reply, ApiError> {
    enabled(state, ctx)?;
    let id = state
        .access
        .app(ctx.param("app_id"))
        .ok_or_else(not_found)?
        .id
        .clone();
    let fields = app_fields(state, ctx.object()?)?;
    let app = state
        .access
        .apps
        .iter_mut()
        .find(|a| a.id == id)
        .ok_or_else(not_found)?;
    app.name = fields.name;
    app.domain = fields.domain;
    app.self_hosted_domains = fields.self_hosted_domains;
    app.session_duration = fields.session_duration;
    app.policies = fields.policies;
    app.updated_at = now();
    let app = app.clone();
    Ok(Reply::new(app_json(state, &app)))
}

pub(super) fn delete(state: &mut State, ctx: &Ctx) -> Result<Reply, ApiError> {
    enabled(state, ctx)?;
    let id = state
        .access
        .app(ctx.param("app_id"))
        .ok_or_else(not_found)?
        .id
        .clone();
    state.access.apps.retain(|a| a.id != id);
    Ok(deleted(&id))
}

fn app_fields(state: &State, body: &Map<String, Value>) -> Result<AppFields, ApiError> {
    match body.get("type") {
        Some(Value::String(kind)) if kind == "self_hosted" => {}
        Some(Value::String(kind)) if !kind.is_empty() => {
            return Err(invalid(format!(
                "app type `{kind}` is not simulated (only self_hosted is)"
            )));
        }
        _ => return Err(invalid("app type is missing or invalid")),
    }
    let domain = match body.get("domain") {
        Some(Value::String(domain)) if !domain.trim().is_empty() => domain.trim().to_string(),
        _ => return Err(invalid("`domain` is required")),
    };
    let self_hosted_domains = match body.get("self_hosted_domains") {
        None | Some(Value::Null) => vec![domain.clone()],
        Some(Value::Array(list)) => list
            .iter()
            .map(|d| match d {
                Value::String(d) if !d.trim().is_empty() => Ok(d.trim().to_string()),
                _ => Err(invalid("`self_hosted_domains` must be a list of domains")),
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(invalid("`self_hosted_domains` must be a list of domains")),
    };
    for d in std::iter::once(&domain).chain(&self_hosted_domains) {
        if !on_active_zone(state, d) {
            return Err(invalid("domain does not belong to zone"));
        }
    }
    let name = match body.get("name") {
        None | Some(Value::Null) => domain.clone(),
        Some(Value::String(name)) if !name.trim().is_empty() => name.clone(),
        Some(_) => return Err(invalid("`name` must be a non-empty string")),
    };
    Ok(AppFields {
        name,
        self_hosted_domains,
        session_duration: duration(body, "session_duration", "24h")?,
        policies: policy_links(state, body.get("policies"))?,
        domain,
    })
}

/// Whether the domain's host is an active zone of the account or a name under one (a
/// leading `*.` wildcard included).
fn on_active_zone(state: &State, domain: &str) -> bool {
    let host = domain
        .split('/')
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    let host = host.strip_prefix("*.").unwrap_or(&host);
    state.zones.iter().any(|zone| {
        zone.status == "active" && (host == zone.name || host.ends_with(&format!(".{}", zone.name)))
    })
}

/// `policies`: ids or `{id, precedence}` links to reusable policies, ordered by precedence.
fn policy_links(
    state: &State,
    value: Option<&Value>,
) -> Result<Vec<SimAccessPolicyLink>, ApiError> {
    let list = match value {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(list)) => list,
        Some(_) => return Err(invalid("`policies` must be a list")),
    };
    let mut links = Vec::with_capacity(list.len());
    for (index, item) in list.iter().enumerate() {
        let position = i64::try_from(index).unwrap_or(i64::MAX).saturating_add(1);
        let (id, precedence) = match item {
            Value::String(id) => (id.as_str(), position),
            Value::Object(link)
                if link.contains_key("decision") || link.contains_key("include") =>
            {
                return Err(invalid(format!(
                    "policies[{index}]: application-scoped policies are not simulated; link a reusable policy"
                )));
            }
            Value::Object(link) => {
                let Some(Value::String(id)) = link.get("id") else {
                    return Err(invalid(format!("policies[{index}].id is required")));
                };
                let precedence = match link.get("precedence") {
                    None | Some(Value::Null) => position,
                    Some(value) => value.as_i64().filter(|p| *p >= 1).ok_or_else(|| {
                        invalid(format!(
                            "policies[{index}].precedence must be a whole number of at least 1"
                        ))
                    })?,
                };
                (id.as_str(), precedence)
            }
            _ => {
                return Err(invalid(format!(
                    "policies[{index}] must be an id or a link"
                )));
            }
        };
        let policy = state
            .access
            .policy(id)
            .ok_or_else(|| invalid(format!("policies[{index}]: policy {id} does not exist")))?;
        links.push(SimAccessPolicyLink {
            id: policy.id.clone(),
            precedence,
        });
    }
    let mut ids = HashSet::new();
    let mut precedences = HashSet::new();
    for link in &links {
        if !ids.insert(link.id.as_str()) {
            return Err(invalid(format!("policy {} is linked twice", link.id)));
        }
        if !precedences.insert(link.precedence) {
            return Err(invalid(format!(
                "precedence {} must be unique for each policy within an app",
                link.precedence
            )));
        }
    }
    links.sort_by_key(|link| link.precedence);
    Ok(links)
}
