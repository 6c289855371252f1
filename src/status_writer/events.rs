//! The outcome of a labelled Service or an Ingress as Events: neither has a status condition of
//! ours, so each change of its outcome is one Event (Warning unless routed).
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType};

use super::facts::notes;
use super::ingress::ingress_reference;
use crate::dns_sync::DnsView;
use crate::edge_health::EdgeView;
use crate::term::Context;
use cftunnel_policy::plan::statuses::ready_of;
use cftunnel_policy::routes::{RouteTable, SourceKind, SourceRef};

/// What was last told of each Service and Ingress, so each change gives one Event.
#[derive(Default)]
pub(super) struct Outcomes {
    reported: HashMap<Arc<SourceRef>, (String, String)>,
}

impl Outcomes {
    /// Records an Event for each source whose outcome changed; returns how many could not be
    /// recorded (told again by the next pass).
    pub(super) async fn tell(
        &mut self,
        ctx: &Context,
        table: &RouteTable,
        dns: &DnsView,
        edge: &EdgeView,
    ) -> usize {
        let services = table
            .sources
            .iter()
            .filter(|(r, _)| matches!(r.kind, SourceKind::Service | SourceKind::Ingress));
        let mut seen = HashSet::new();
        let mut failed = 0;
        for (source_ref, source) in services {
            seen.insert(source_ref.clone());
            let problems = source
                .tunnel
                .as_ref()
                .map(|t| notes(dns, edge, t))
                .unwrap_or_default();
            let (reason, message, status) = ready_of(source, &problems);
            let outcome = (reason.clone(), message.clone());
            if self.reported.get(source_ref) == Some(&outcome) {
                continue;
            }
            let previous = self.reported.get(source_ref).cloned();
            if previous.is_none() && status == "True" {
                // A routed Service seen for the first time (e.g. after a restart): nothing new.
                self.reported.insert(source_ref.clone(), outcome);
                continue;
            }
            if status != "True" && previous.as_ref().is_some_and(|(r, _)| *r == reason) {
                // The same failure announced already, with another message (a retry's error
                // under a Cloudflare storm): one Warning per failure streak.
                self.reported.insert(source_ref.clone(), outcome);
                continue;
            }
            let event = Event {
                type_: if status == "True" {
                    EventType::Normal
                } else {
                    EventType::Warning
                },
                reason,
                note: Some(crate::term::events::bounded(message)),
                action: "Route".to_string(),
                secondary: None,
            };
            let reference = match source_ref.kind {
                SourceKind::Ingress => ingress_reference(source_ref),
                _ => ObjectReference {
                    api_version: Some("v1".to_string()),
                    kind: Some("Service".to_string()),
                    namespace: Some(source_ref.namespace.clone()),
                    name: Some(source_ref.name.clone()),
                    uid: Some(source_ref.uid.clone()).filter(|u| !u.is_empty()),
                    ..ObjectReference::default()
                },
            };
            match super::bounded(ctx, "Event", ctx.recorder.publish(&event, &reference)).await {
                Ok(()) => {
                    self.reported.insert(source_ref.clone(), outcome);
                }
                Err(error) => {
                    failed += 1;
                    tracing::warn!(%error, source = %source_ref, "route event not recorded");
                }
            }
        }
        self.reported.retain(|r, _| seen.contains(r));
        failed
    }
}
