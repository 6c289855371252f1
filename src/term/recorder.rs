//! Publishes `events.k8s.io/v1` Events, folding a repeat of the same event within
//! [`SERIES_WINDOW`] into a series on the first one (its `series.count` counted up), as
//! kube's own recorder does, but remembering each recent event as a hash and the Event's
//! name: kube's recorder keeps every Event it published in the last six minutes whole, which is
//! a kilobyte or two per tunnel while a first sync of a thousand tunnels reports each one.
//!
//! An event repeats another when its type, action, reason, regarding object (kind, namespace,
//! name and uid; not its resourceVersion, which every status write moves) and related object
//! are the same; its note is not compared, and the series keeps the first note.
use std::collections::HashMap;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::Mutex;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event as K8sEvent;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::events::{Event, EventType, Reporter};
use kube::{Api, Client};
use serde_json::json;

/// How long an event stays one a repeat is folded into.
pub const SERIES_WINDOW: SignedDuration = SignedDuration::from_mins(6);

/// What is remembered of a recent event.
struct Recent {
    name: String,
    count: i32,
    last: Timestamp,
}

/// The event recorder of a leadership term.
pub struct Recorder {
    client: Client,
    reporter: Reporter,
    recent: Mutex<HashMap<u64, Recent>>,
}

impl Recorder {
    pub fn new(client: Client, reporter: Reporter) -> Recorder {
        Recorder {
            client,
            reporter,
            recent: Mutex::new(HashMap::new()),
        }
    }

    /// Publishes `event` about `regarding`: a new Event, or a repeat counted on the recent one.
    pub async fn publish(
        &self,
        event: &Event,
        regarding: &ObjectReference,
    ) -> Result<(), kube::Error> {
        let now = Timestamp::now();
        let key = event_key(event, regarding);
        let namespace = regarding.namespace.as_deref().unwrap_or("default");
        let api: Api<K8sEvent> = Api::namespaced(self.client.clone(), namespace);
        let repeat = {
            let mut recent = self.lock();
            recent.retain(|_, r| r.last + SERIES_WINDOW > now);
            recent.get_mut(&key).map(|r| {
                r.count += 1;
                r.last = now;
                (r.name.clone(), r.count)
            })
        };
        if let Some((name, count)) = repeat {
            let series = json!({"series": {"count": count, "lastObservedTime": MicroTime(now)}});
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&series))
                .await?;
            return Ok(());
        }
        let created = new_event(&self.reporter, event, regarding, now);
        let name = created.metadata.name.clone().unwrap_or_default();
        api.create(&PostParams::default(), &created).await?;
        self.lock().insert(
            key,
            Recent {
                name,
                count: 1,
                last: now,
            },
        );
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Recent>> {
        // A panic while holding the lock leaves only counts behind: still usable.
        self.recent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// What makes an event a repeat of another (see the module comment).
fn event_key(event: &Event, regarding: &ObjectReference) -> u64 {
    let mut hasher = DefaultHasher::new();
    matches!(event.type_, EventType::Warning).hash(&mut hasher);
    event.action.hash(&mut hasher);
    event.reason.hash(&mut hasher);
    let identity = |r: &ObjectReference| {
        (
            r.api_version.clone(),
            r.kind.clone(),
            r.namespace.clone(),
            r.name.clone(),
            r.uid.clone(),
        )
    };
    identity(regarding).hash(&mut hasher);
    event.secondary.as_ref().map(identity).hash(&mut hasher);
    hasher.finish()
}

fn new_event(
    reporter: &Reporter,
    event: &Event,
    regarding: &ObjectReference,
    now: Timestamp,
) -> K8sEvent {
    let subject = regarding.name.as_deref().unwrap_or(&reporter.controller);
    K8sEvent {
        metadata: ObjectMeta {
            namespace: regarding.namespace.clone(),
            name: Some(format!("{subject}.{:x}", now.as_nanosecond())),
            ..ObjectMeta::default()
        },
        action: Some(event.action.clone()),
        reason: Some(event.reason.clone()),
        note: event.note.clone(),
        type_: Some(
            match event.type_ {
                EventType::Normal => "Normal",
                EventType::Warning => "Warning",
            }
            .to_string(),
        ),
        event_time: Some(MicroTime(now)),
        regarding: Some(regarding.clone()),
        related: event.secondary.clone(),
        reporting_controller: Some(reporter.controller.clone()),
        reporting_instance: Some(
            (reporter.instance.clone()).unwrap_or_else(|| reporter.controller.clone()),
        ),
        ..K8sEvent::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(uid: &str, resource_version: &str) -> ObjectReference {
        ObjectReference {
            api_version: Some("networking.cfargotunnel.com/v1alpha2".into()),
            kind: Some("Tunnel".into()),
            namespace: Some("shop".into()),
            name: Some("edge".into()),
            uid: Some(uid.into()),
            resource_version: Some(resource_version.into()),
            ..ObjectReference::default()
        }
    }

    fn event(reason: &str, note: &str) -> Event {
        Event {
            type_: EventType::Normal,
            reason: reason.into(),
            note: Some(note.into()),
            action: "Reconcile".into(),
            secondary: None,
        }
    }

    #[test]
    fn a_repeat_is_the_same_event_on_the_same_object_whatever_its_version_or_note() {
        let first = event_key(&event("Ready", "a"), &reference("u1", "1"));
        assert_eq!(
            first,
            event_key(&event("Ready", "b"), &reference("u1", "7"))
        );
        assert_ne!(
            first,
            event_key(&event("Created", "a"), &reference("u1", "1"))
        );
        assert_ne!(
            first,
            event_key(&event("Ready", "a"), &reference("u2", "1"))
        );
        let mut warning = event("Ready", "a");
        warning.type_ = EventType::Warning;
        assert_ne!(first, event_key(&warning, &reference("u1", "1")));
    }

    #[test]
    fn a_new_event_names_its_object_reporter_and_time() {
        let reporter = Reporter {
            controller: "cftunnel".into(),
            instance: None,
        };
        let at = Timestamp::from_second(1_700_000_000).unwrap_or(Timestamp::UNIX_EPOCH);
        let made = new_event(&reporter, &event("Ready", "up"), &reference("u1", "1"), at);
        assert_eq!(
            made.metadata.name.as_deref(),
            Some(format!("edge.{:x}", at.as_nanosecond()).as_str())
        );
        assert_eq!(made.metadata.namespace.as_deref(), Some("shop"));
        assert_eq!(made.type_.as_deref(), Some("Normal"));
        assert_eq!(made.reporting_instance.as_deref(), Some("cftunnel"));
        assert_eq!(made.regarding, Some(reference("u1", "1")));
        assert_eq!(made.note.as_deref(), Some("up"));
    }
}
