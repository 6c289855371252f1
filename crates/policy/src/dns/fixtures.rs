//! Builders shared by the planner tests, and a pure stand-in for Cloudflare applying a plan.
use std::collections::HashMap;

use super::*;
use cftunnel_cloudflare::{DnsRecord, NewDnsRecord};
use cftunnel_types::{TunnelIdentity, TunnelKind};

pub(super) const ID_A: &str = "aaaaaaaa-0000-4000-8000-000000000001";
pub(super) const ID_B: &str = "bbbbbbbb-0000-4000-8000-000000000002";
pub(super) const ID_OLD: &str = "0dd0dd00-0000-4000-8000-000000000003";
pub(super) const ZONE: &str = "example.com";

pub(super) fn identity(name: &str) -> TunnelIdentity {
    TunnelIdentity {
        kind: TunnelKind::Tunnel,
        namespace: "shop".into(),
        name: name.into(),
    }
}

pub(super) fn tunnel(name: &str, id: &str, hostnames: &[&str]) -> TunnelDns {
    TunnelDns {
        identity: identity(name),
        tunnel_id: id.into(),
        previous_tunnel_ids: Vec::new(),
        tunnel_name: format!("{name}-cf"),
        hostnames: hostnames.iter().map(|h| h.to_string()).collect(),
        txt_records: true,
        sweep: false,
    }
}

pub(super) fn zone(tunnels: Vec<TunnelDns>) -> ZoneDns {
    ZoneDns {
        zone_name: ZONE.into(),
        tunnels,
        ..ZoneDns::default()
    }
}

pub(super) fn record(
    id: &str,
    record_type: &str,
    name: &str,
    content: &str,
    comment: Option<&str>,
) -> DnsRecord {
    DnsRecord {
        id: id.into(),
        record_type: record_type.into(),
        name: name.into(),
        content: content.into(),
        ttl: Some(1),
        proxied: Some(record_type == "CNAME"),
        comment: comment.map(str::to_string),
    }
}

/// A CNAME `name` → `<tunnel_id>.cfargotunnel.com` with `comment`.
pub(super) fn cname(id: &str, name: &str, tunnel_id: &str, comment: Option<&str>) -> DnsRecord {
    cname_record(id, name, &format!("{tunnel_id}.cfargotunnel.com"), comment)
}

/// A CNAME of ours: `name` → `<tunnel_id>.cfargotunnel.com`, marked for tunnel `tunnel_name`.
pub(super) fn ours(id: &str, name: &str, tunnel_id: &str, tunnel_name: &str) -> DnsRecord {
    cname(id, name, tunnel_id, Some(&marker(tunnel_name)))
}

/// A CNAME `name` → `content` with `comment`.
pub(super) fn cname_record(
    id: &str,
    name: &str,
    content: &str,
    comment: Option<&str>,
) -> DnsRecord {
    record(id, "CNAME", name, content, comment)
}

/// What the Go operator wrote for `name`: the CNAME `c1` (no comment) and its `_managed` TXT
/// `t1` naming the tunnel.
pub(super) fn go_records(name: &str, tunnel_name: &str, tunnel_id: &str) -> [DnsRecord; 2] {
    [
        cname("c1", name, tunnel_id, None),
        record(
            "t1",
            "TXT",
            &format!("_managed.{name}"),
            &go_txt("c1", tunnel_name, tunnel_id),
            None,
        ),
    ]
}

pub(super) fn marker(name: &str) -> String {
    ownership_marker(&identity(name), None)
}

pub(super) fn go_txt(dns_id: &str, tunnel_name: &str, tunnel_id: &str) -> String {
    format!(r#"{{"DnsId":"{dns_id}","TunnelName":"{tunnel_name}","TunnelId":"{tunnel_id}"}}"#)
}

fn from_body(id: String, body: &NewDnsRecord) -> DnsRecord {
    DnsRecord {
        ttl: Some(body.ttl),
        proxied: body.proxied(),
        comment: body.comment.clone(),
        ..record(
            &id,
            body.record_type.as_str(),
            &body.name,
            &body.content,
            None,
        )
    }
}

/// Applies a plan the way Cloudflare would (new ids `new0`, `new1`, …).
pub(super) fn apply(records: &[DnsRecord], plan: &DnsPlan) -> Vec<DnsRecord> {
    let mut out = records.to_vec();
    let mut created: HashMap<String, String> = HashMap::new();
    for (n, change) in plan.changes.iter().enumerate() {
        let cname = created.get(&change.hostname).cloned();
        match &change.action {
            DnsAction::Create(desired) => {
                let id = format!("new{n}");
                let body = desired.body(cname.as_deref()).expect("body");
                if matches!(desired, DesiredRecord::Cname { .. }) {
                    created.insert(change.hostname.clone(), id.clone());
                }
                out.push(from_body(id, &body));
            }
            DnsAction::Update {
                current, desired, ..
            } => {
                let id = current.id.clone().expect("id");
                let body = desired.body(cname.as_deref()).expect("body");
                out.retain(|r| r.id != id);
                out.push(from_body(id, &body));
            }
            DnsAction::Delete { current, .. } => out.retain(|r| Some(&r.id) != current.id.as_ref()),
        }
    }
    out
}

pub(super) fn plan(zone: &ZoneDns, actual: &[DnsRecord]) -> DnsPlan {
    plan_zone(zone, actual, &DnsOptions::default())
}

pub(super) fn overwrite() -> DnsOptions {
    DnsOptions {
        overwrite_unmanaged: true,
        ..DnsOptions::default()
    }
}

/// `(kind, type, name)` of every change, for compact assertions.
pub(super) fn summary(plan: &DnsPlan) -> Vec<(String, String, String)> {
    plan.changes
        .iter()
        .map(|c| {
            let (kind, r) = match &c.action {
                DnsAction::Create(d) => ("create", d.to_ref()),
                DnsAction::Update {
                    current,
                    take_over: true,
                    ..
                } => ("take over", current.clone()),
                DnsAction::Update { current, .. } => ("update", current.clone()),
                DnsAction::Delete { current, .. } => ("delete", current.clone()),
            };
            (kind.to_string(), r.record_type, r.name)
        })
        .collect()
}

pub(super) fn s(kind: &str, t: &str, name: &str) -> (String, String, String) {
    (kind.into(), t.into(), name.into())
}
