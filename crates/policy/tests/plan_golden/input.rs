//! A case's input: Kubernetes manifests as `cftunnel render` reads them, and at most one
//! document of `kind: PlanFacts` (read by this test only) with what cftunnel learned
//! elsewhere. Tunnel ids come from each tunnel's `status` (`tunnelId`, `tunnelName`,
//! `previousTunnelIds`). Every field of `PlanFacts` is optional:
//!
//! ```yaml
//! kind: PlanFacts
//! now: "2026-01-01T00:00:00Z"      # the time a changing condition records (this default)
//! clusterId: golden                # DNS markers and Access names (this default)
//! txtRecords: true                 # `_managed` TXT records (this default)
//! zones:                           # the account's zones (a tunnel's own domain counts anyway)
//!   - {id: zone-example, name: example.com}
//!   - {id: zone-dev, name: dev.example.com, inactive: true}
//! dnsNotes:                        # what the DNS sync found, per tunnel
//!   - tunnel: {kind: Tunnel, namespace: shop, name: edge}   # ClusterTunnel: no namespace
//!     hostname: app.example.com    # absent: every hostname of the tunnel
//!     reason: DNSConflict
//!     message: "..."
//! ```
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde::Deserialize;

use cftunnel_policy::dns::{AccountZone, ClusterId};
use cftunnel_policy::plan::{PlanInput, PlanTunnel};
use cftunnel_policy::routes::gateway::status::DnsNote;
use cftunnel_policy::rules::facts::referenced;
use cftunnel_policy::validate::DEFAULT_NAMESPACE;
use cftunnel_policy::validate::decode::{Decoded, Outcome, decode, plain_service};
use cftunnel_policy::validate::input::read_sources;
use cftunnel_policy::validate::world::WorldBuilder;
use cftunnel_types::access_policy::AccessPolicy;
use cftunnel_types::{TunnelIdentity, TunnelKind};

const FACTS_KIND: &str = "PlanFacts";

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Facts {
    #[serde(default, rename = "apiVersion")]
    _api_version: String,
    #[serde(default, rename = "kind")]
    _kind: String,
    now: Option<String>,
    cluster_id: Option<String>,
    txt_records: Option<bool>,
    #[serde(default)]
    zones: Vec<Zone>,
    #[serde(default)]
    dns_notes: Vec<Note>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Zone {
    id: String,
    name: String,
    #[serde(default)]
    inactive: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Note {
    tunnel: TunnelName,
    hostname: Option<String>,
    reason: String,
    message: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TunnelName {
    kind: String,
    #[serde(default)]
    namespace: String,
    name: String,
}

impl TunnelName {
    fn identity(&self) -> Result<TunnelIdentity, String> {
        let kind = TunnelKind::parse(&self.kind).ok_or_else(|| {
            format!(
                "PlanFacts: tunnel kind {:?} is not Tunnel or ClusterTunnel",
                self.kind
            )
        })?;
        Ok(referenced(kind, &self.namespace, &self.name))
    }
}

/// The input of the case at `path`.
pub fn read(path: &Path) -> Result<PlanInput, String> {
    let documents = read_sources(&[path.display().to_string()], &mut std::io::empty())
        .map_err(|e| e.to_string())?;
    let mut facts = None;
    let mut builder = WorldBuilder::default();
    let mut tunnels = Vec::new();
    let mut policies = Vec::new();
    for document in &documents {
        if document.value.get("kind").and_then(|k| k.as_str()) == Some(FACTS_KIND) {
            let read: Facts = serde_json::from_value(document.value.clone())
                .map_err(|e| format!("{}: {FACTS_KIND}: {e}", document.origin))?;
            if facts.replace(read).is_some() {
                return Err(format!("{}: a second {FACTS_KIND}", document.origin));
            }
            continue;
        }
        match decode(document, DEFAULT_NAMESPACE) {
            Outcome::Decoded(_, decoded) => {
                builder.add(&decoded);
                match *decoded {
                    Decoded::Tunnel(t) => {
                        let status = t.status.clone().unwrap_or_default();
                        tunnels.push(PlanTunnel {
                            identity: referenced(t.kind, &t.namespace, &t.name),
                            spec: t.spec,
                            tunnel_id: status.tunnel_id,
                            tunnel_name: status.tunnel_name.unwrap_or_default(),
                            previous_tunnel_ids: status.previous_tunnel_ids.unwrap_or_default(),
                        });
                    }
                    Decoded::AccessPolicy { namespace, .. } => {
                        let mut policy: AccessPolicy =
                            serde_json::from_value(document.value.clone())
                                .map_err(|e| format!("{}: AccessPolicy: {e}", document.origin))?;
                        policy.metadata.namespace = Some(namespace);
                        policies.push(Arc::new(policy));
                    }
                    _ => {}
                }
            }
            Outcome::Unreadable(object, violation) => {
                return Err(format!("{}: {object}: {violation}", document.origin));
            }
            Outcome::Ignored => match plain_service(document, DEFAULT_NAMESPACE) {
                Some(Ok(service)) => {
                    let namespace = service.metadata.namespace.clone().unwrap_or_default();
                    builder.add_service(service, &namespace);
                }
                Some(Err(violation)) => {
                    return Err(format!("{}: Service: {violation}", document.origin));
                }
                None => {}
            },
        }
    }
    let facts = facts.unwrap_or(Facts {
        _api_version: String::new(),
        _kind: FACTS_KIND.into(),
        now: None,
        cluster_id: None,
        txt_records: None,
        zones: Vec::new(),
        dns_notes: Vec::new(),
    });
    let now = facts.now.as_deref().unwrap_or("2026-01-01T00:00:00Z");
    let now: jiff::Timestamp = now
        .parse()
        .map_err(|e| format!("PlanFacts: now {now:?}: {e}"))?;
    let cluster_id = ClusterId::new(facts.cluster_id.as_deref().unwrap_or("golden"))?;
    let mut dns_notes: BTreeMap<TunnelIdentity, Vec<DnsNote>> = BTreeMap::new();
    for note in facts.dns_notes {
        dns_notes
            .entry(note.tunnel.identity()?)
            .or_default()
            .push(DnsNote {
                hostname: note.hostname,
                reason: note.reason,
                message: note.message,
            });
    }
    Ok(PlanInput {
        world: builder.finish(),
        access_policies: policies,
        tunnels,
        zones: facts
            .zones
            .into_iter()
            .map(|z| AccountZone {
                id: z.id,
                name: z.name,
                inactive: z.inactive,
            })
            .collect(),
        dns_notes,
        cluster_id,
        txt_records: facts.txt_records.unwrap_or(true),
        now: Time(now),
    })
}
