//! Watches of cftunnel's own kinds that survive an object they cannot decode.
//!
//! A typed kube watcher fails a whole list when one object does not deserialize, and retries
//! it forever: one Tunnel stored while an older, looser CRD schema was installed (or written
//! around the webhook) would stop every cache, the reconcilers and `/readyz`. These watches read
//! objects untyped and decode each one on its own: an object that does not decode is skipped
//! (its last decodable version, if any, stays in the store until the object is fixed or
//! deleted), counted in [`undecodable_objects`] and logged once per resourceVersion with the
//! field the decoder named.
use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::{Stream, StreamExt};
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher::{self, Event};
use kube::runtime::{WatchStreamExt, watcher as watch};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;

use super::objects::Keep;

/// Objects skipped because they did not decode, since the process started.
static UNDECODABLE: AtomicU64 = AtomicU64::new(0);

/// How many stored objects the watches have skipped because they did not decode.
pub fn undecodable_objects() -> u64 {
    UNDECODABLE.load(Ordering::Relaxed)
}

/// A watch of `K` in `namespace` (`None`: all namespaces, or a cluster-scoped kind) whose
/// events carry only the objects that decode. `store` is the store these events feed: a
/// deleted object that no longer decodes is deleted by its stored version.
pub(crate) fn tolerant<K, S>(
    client: &Client,
    namespace: Option<&str>,
    config: watcher::Config,
    store: S,
) -> impl Stream<Item = watcher::Result<Event<K>>> + Send + 'static
where
    K: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
    S: Keep<K>,
{
    tolerant_reporting(client, namespace, config, store, |_| {})
}

/// Like [`tolerant`]; `undecodable` is told, after every event, how many watched objects do not
/// decode now (a kind whose every object must be known counts them as unknown).
pub(crate) fn tolerant_reporting<K, S>(
    client: &Client,
    namespace: Option<&str>,
    config: watcher::Config,
    store: S,
    mut undecodable: impl FnMut(usize) + Send + 'static,
) -> impl Stream<Item = watcher::Result<Event<K>>> + Send + 'static
where
    K: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
    S: Keep<K>,
{
    let resource = ApiResource::erase::<K>(&());
    let api: Api<DynamicObject> = match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    let mut reported = Reported::new();
    watch(api, config)
        .default_backoff()
        .filter_map(move |event| {
            let decoded = match event {
                Err(e) => Some(Err(e)),
                Ok(event) => decode_event(event, &store, &mut reported).map(Ok),
            };
            undecodable(reported.len());
            futures::future::ready(decoded)
        })
}

/// The typed event, or `None` when its object does not decode and nothing replaces it.
fn decode_event<K, S>(
    event: Event<DynamicObject>,
    store: &S,
    reported: &mut Reported,
) -> Option<Event<K>>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + 'static,
    S: Keep<K>,
{
    match event {
        Event::Init => Some(Event::Init),
        Event::InitDone => Some(Event::InitDone),
        Event::Apply(object) => decode(object, reported).map(Event::Apply),
        Event::InitApply(object) => decode(object, reported).map(Event::InitApply),
        Event::Delete(object) => {
            let mut reference = ObjectRef::<K>::new(object.metadata.name.as_deref().unwrap_or(""));
            if let Some(namespace) = object.metadata.namespace.as_deref() {
                reference = reference.within(namespace);
            }
            let key = object_key(&object);
            let event = match decode(object, reported) {
                Some(decoded) => Some(Event::Delete(decoded)),
                None => store
                    .get(&reference)
                    .map(|stored| Event::Delete((*stored).clone())),
            };
            // A deleted object is never reported again: its entry goes with it.
            reported.remove(&key);
            event
        }
    }
}

/// Objects reported as undecodable: `namespace/name` → the resourceVersion last reported. One
/// entry per object that does not decode now; it goes once the object decodes or is deleted.
pub type Reported = HashMap<String, String>;

fn object_key(object: &DynamicObject) -> String {
    format!(
        "{}/{}",
        object.metadata.namespace.as_deref().unwrap_or(""),
        object.metadata.name.as_deref().unwrap_or("")
    )
}

/// Decodes one object; reports (once per object and resourceVersion) one that does not.
pub fn decode<K>(object: DynamicObject, reported: &mut Reported) -> Option<K>
where
    K: Resource<DynamicType = ()> + DeserializeOwned,
{
    let key = object_key(&object);
    let version = object.metadata.resource_version.clone().unwrap_or_default();
    let decoded = serde_json::to_value(&object).and_then(serde_json::from_value::<K>);
    match decoded {
        Ok(typed) => {
            reported.remove(&key);
            Some(typed)
        }
        Err(error) => {
            UNDECODABLE.fetch_add(1, Ordering::Relaxed);
            if reported.insert(key.clone(), version.clone()).as_ref() != Some(&version) {
                tracing::warn!(
                    kind = %K::kind(&()),
                    object = %key.trim_start_matches('/'),
                    resource_version = %version,
                    %error,
                    "skipping a stored object that does not decode; fix or delete it"
                );
            }
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cftunnel_types::Tunnel;
    use kube::runtime::reflector;

    fn object(value: serde_json::Value) -> DynamicObject {
        serde_json::from_value(value).expect("a DynamicObject")
    }

    fn tunnel(name: &str, spec: serde_json::Value) -> DynamicObject {
        object(serde_json::json!({
            "apiVersion": "networking.cfargotunnel.com/v1alpha2",
            "kind": "Tunnel",
            "metadata": {"name": name, "namespace": "ns", "resourceVersion": "7"},
            "spec": spec,
        }))
    }

    /// The tests that decode broken objects take turns: the counter they move is process-wide.
    static COUNTER: std::sync::Mutex<()> = std::sync::Mutex::new(());

    fn counting() -> std::sync::MutexGuard<'static, ()> {
        COUNTER
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn good_spec() -> serde_json::Value {
        serde_json::json!({"cloudflare": {"secret": "api", "accountId": "a", "domain": "example.com"}})
    }

    #[test]
    fn an_object_that_does_not_decode_is_skipped_and_counted() {
        let _turn = counting();
        let (store, _writer) = reflector::store::<Tunnel>();
        let mut reported = Reported::new();
        let before = undecodable_objects();
        let bad = tunnel("bad", serde_json::json!({"cloudflare": "not an object"}));
        assert!(decode_event(Event::InitApply(bad.clone()), &store, &mut reported).is_none());
        assert!(decode_event(Event::Apply(bad), &store, &mut reported).is_none());
        assert_eq!(undecodable_objects() - before, 2);
        assert_eq!(reported.len(), 1, "reported once per resourceVersion");
        let good = decode_event(
            Event::InitApply(tunnel("good", good_spec())),
            &store,
            &mut reported,
        );
        assert!(
            matches!(good, Some(Event::InitApply(t)) if t.metadata.name.as_deref() == Some("good"))
        );
        assert!(matches!(
            decode_event::<Tunnel, _>(Event::InitDone, &store, &mut reported),
            Some(Event::InitDone)
        ));
    }

    #[test]
    fn a_deleted_object_that_no_longer_decodes_is_deleted_by_its_stored_version() {
        let _turn = counting();
        let (store, mut writer) = reflector::store::<Tunnel>();
        let mut reported = Reported::new();
        let stored: Tunnel =
            decode(tunnel("t", good_spec()), &mut reported).expect("a decodable tunnel");
        writer.apply_watcher_event(&Event::Apply(stored));
        let bad = tunnel("t", serde_json::json!({"cloudflare": 3}));
        let event = decode_event(Event::Delete(bad), &store, &mut reported);
        assert!(matches!(event, Some(Event::Delete(t)) if t.metadata.name.as_deref() == Some("t")));
    }

    #[test]
    fn the_reported_set_holds_only_objects_that_do_not_decode_now() {
        let _turn = counting();
        let (store, _writer) = reflector::store::<Tunnel>();
        let mut reported = Reported::new();
        let bad = |name: &str| tunnel(name, serde_json::json!({"cloudflare": 3}));
        for name in ["a", "b", "c"] {
            decode_event(Event::Apply(bad(name)), &store, &mut reported);
        }
        assert_eq!(reported.len(), 3);
        // Fixed: its entry goes.
        decode_event(
            Event::Apply(tunnel("a", good_spec())),
            &store,
            &mut reported,
        );
        // Deleted while broken: its entry goes too.
        decode_event(Event::Delete(bad("b")), &store, &mut reported);
        assert_eq!(reported.keys().collect::<Vec<_>>(), ["ns/c"]);
        // A new version of a broken object is reported again, still one entry.
        let mut newer = bad("c");
        newer.metadata.resource_version = Some("8".into());
        decode_event(Event::Apply(newer), &store, &mut reported);
        assert_eq!(reported.get("ns/c").map(String::as_str), Some("8"));
    }
}
