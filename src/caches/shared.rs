//! One watch, one store, many readers: [`Shared`] keeps a reflector store of one kind and fans
//! every change out to subscribers (controllers, the route reconciler, the admission view).
//!
//! Readiness: wait with [`Shared::listed`], never with kube's `Store::wait_until_ready` from more
//! than one place. kube's store readiness is a single-waker oneshot: of several futures waiting
//! on it at once (on other tasks, or inside a `SelectAll` that polls only woken streams), only
//! the one polled last is woken when the first list completes; the others can stay pending for
//! good (seen as a controller whose first list was never replayed, so it never reconciled).
//! The only remaining `wait_until_ready` caller is the kube controller handed a store
//! ([`kube::runtime::Controller::for_shared_stream`]), one per store.
use std::fmt::Debug;
use std::hash::Hash;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::{Stream, StreamExt, TryStreamExt};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::runtime::{WatchStreamExt, watcher::Event};
use tokio::sync::{broadcast, watch};

use super::objects::{Keep, Objects};
use crate::metrics::Metrics;
use crate::scope::Scope;

/// Changes a subscriber may fall behind by before it is handed the whole store again.
const FANOUT_BUFFER: usize = 1024;

/// What the fan-out carries. An applied object is named, not held: the ring of the last
/// [`FANOUT_BUFFER`] changes would otherwise keep every version it saw alive after the store
/// replaced it (a first sync writes each Tunnel's status several times, and every version of a
/// kilobyte or more stayed until a thousand later changes pushed it out).
#[derive(Clone)]
pub(crate) enum Change<K>
where
    K: Resource,
    K::DynamicType: Clone,
{
    /// Read from the store when received (its latest version; none once deleted since).
    Stored(ObjectRef<K>),
    /// Gone from the store: the last version seen.
    Deleted(Arc<K>),
    /// A list replaced the store: every object, as after falling behind.
    Relisted,
}

/// A store of one kind, kept by one watch running in a [`Scope`], and its change fan-out. The
/// store is kube's where a kube controller reads it (`Shared<K, Store<K>>`), else [`Objects`]
/// (see `objects.rs`).
pub struct Shared<K, S = Objects<K>>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    store: S,
    changes: broadcast::Sender<Change<K>>,
    /// Becomes `true` once the first list is in the store; any number of waiters.
    listed: watch::Receiver<bool>,
}

impl<K, S: Clone> Clone for Shared<K, S>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    fn clone(&self) -> Self {
        Shared {
            store: self.store.clone(),
            changes: self.changes.clone(),
            listed: self.listed.clone(),
        }
    }
}

impl<K, S> Shared<K, S>
where
    K: Resource + Clone + Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + Hash + Clone + Send + Sync,
    S: Keep<K>,
{
    /// Drives the watch `events(store)` (already decoded; given the store it feeds) on a task
    /// of `scope`: every event's object is stripped ([`strip_meta`]) and passes through
    /// `modify`, is applied to the store, bumps `generation` and is fanned out.
    pub fn start<E>(
        scope: &Scope,
        metrics: &Arc<Metrics>,
        what: &'static str,
        events: impl FnOnce(S) -> E,
        modify: fn(&mut K),
        generation: Arc<watch::Sender<u64>>,
    ) -> Shared<K, S>
    where
        E: Stream<Item = watcher::Result<Event<K>>> + Send + 'static,
    {
        Self::start_reading(scope, metrics, what, events, modify, generation, |_, _| {
            false
        })
    }

    /// Like [`Shared::start`] for a kind part of whose status its readers read: a status
    /// write bumps `generation` too when `read_status(old, new)` says a part they read changed
    /// (an AccessPolicy's status records the applications that open its hostnames; a tunnel's,
    /// the tunnel id and zones its DNS records are written with).
    pub fn start_with_status<E>(
        scope: &Scope,
        metrics: &Arc<Metrics>,
        what: &'static str,
        events: impl FnOnce(S) -> E,
        modify: fn(&mut K),
        generation: Arc<watch::Sender<u64>>,
        read_status: fn(&K, &K) -> bool,
    ) -> Shared<K, S>
    where
        E: Stream<Item = watcher::Result<Event<K>>> + Send + 'static,
    {
        Self::start_reading(
            scope,
            metrics,
            what,
            events,
            modify,
            generation,
            read_status,
        )
    }

    fn start_reading<E>(
        scope: &Scope,
        metrics: &Arc<Metrics>,
        what: &'static str,
        events: impl FnOnce(S) -> E,
        modify: fn(&mut K),
        generation: Arc<watch::Sender<u64>>,
        read_status: fn(&K, &K) -> bool,
    ) -> Shared<K, S>
    where
        E: Stream<Item = watcher::Result<Event<K>>> + Send + 'static,
    {
        let (store, mut write) = S::start();
        let events = events(store.clone());
        let (changes, _) = broadcast::channel(FANOUT_BUFFER);
        let fanout = changes.clone();
        let (listed_tx, listed) = watch::channel(false);
        // Whether the event changed what the generation's readers read (set before the store
        // takes the event, read after): a status write does not.
        let relevant = Arc::new(AtomicBool::new(true));
        let before = store.clone();
        let seen = relevant.clone();
        let stream = events
            .modify(move |object| {
                strip_meta(object.meta_mut());
                modify(object);
            })
            .map_ok(move |event| {
                let changed = match &event {
                    Event::Apply(new) => before.get(&key_of(new)).is_none_or(|old| {
                        changes_more_than_status(old.meta(), new.meta()) || read_status(&old, new)
                    }),
                    _ => true,
                };
                seen.store(changed, Ordering::Relaxed);
                event
            })
            .inspect_ok(move |event| write(event))
            .inspect_ok(move |event| {
                match event {
                    // In the store by now (after `reflect`).
                    Event::Apply(object) => {
                        let _ = fanout.send(Change::Stored(key_of(object)));
                    }
                    Event::Delete(object) => {
                        let _ = fanout.send(Change::Deleted(Arc::new(object.clone())));
                    }
                    // Listed objects reach the store at `InitDone`, all at once.
                    Event::InitApply(_) | Event::Init => {}
                    Event::InitDone => {
                        let _ = fanout.send(Change::Relisted);
                        listed_tx.send_replace(true);
                    }
                }
                if relevant.load(Ordering::Relaxed) {
                    generation.send_modify(|n| *n = n.wrapping_add(1));
                }
            });
        let watching = scope.watch_guard();
        let metrics = metrics.clone();
        scope.spawn(what, async move {
            let _watching = watching;
            let mut stream = std::pin::pin!(stream);
            while let Some(event) = stream.next().await {
                if let Err(e) = event {
                    metrics.watch_restarted(what);
                    if is_expired(&e) {
                        // 410 Gone: the resourceVersion fell out of the API server's window
                        // (after a CRD update, say); the watcher relists, as the protocol wants.
                        tracing::debug!(watch = what, error = %e, "watch expired; relisting");
                        continue;
                    }
                    tracing::warn!(watch = what, error = %e, "watch error; retrying with backoff");
                }
            }
        });
        Shared {
            store,
            changes,
            listed,
        }
    }

    /// The store (empty until the first list completed: wait with [`Shared::listed`]).
    pub fn store(&self) -> S {
        self.store.clone()
    }

    /// Is the first list in the store yet?
    pub fn is_listed(&self) -> bool {
        *self.listed.borrow()
    }

    /// Resolves once the first list is in the store (`false`: the watch stopped before). Every
    /// waiter is woken, wherever it is polled from (see the module comment).
    pub async fn listed(&self) -> bool {
        wait_listed(self.listed.clone()).await
    }

    /// Every object once the store is ready, then each object as it changes; after falling
    /// behind, every object again. For a controller's own kind: a term started after the
    /// store listed still reconciles everything once.
    pub fn objects(&self) -> impl Stream<Item = Arc<K>> + Send + 'static {
        let receiver = self.changes.subscribe();
        let store = self.store.clone();
        let initial = {
            let store = store.clone();
            let listed = self.listed.clone();
            futures::stream::once(async move {
                wait_listed(listed).await;
                futures::stream::iter(store.state())
            })
            .flatten()
        };
        initial.chain(follow(receiver, store))
    }

    /// Each object as it changes from now on (after falling behind, every object again).
    pub fn changes(&self) -> impl Stream<Item = Arc<K>> + Send + 'static {
        follow(self.changes.subscribe(), self.store.clone())
    }
}

async fn wait_listed(mut listed: watch::Receiver<bool>) -> bool {
    listed.wait_for(|listed| *listed).await.is_ok()
}

/// The annotation `kubectl apply` (client-side) keeps the whole applied object in.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// What no reader of a cache reads and every object may carry, often the largest part of a small
/// object: `metadata.managedFields`, and the copy of the whole object `kubectl apply` leaves in
/// an annotation. Nothing writes a cached object back whole (every write is a patch or an
/// apply of cftunnel's own fields), so what is stripped here is never lost at the API server.
fn strip_meta(meta: &mut ObjectMeta) {
    meta.managed_fields = None;
    if let Some(annotations) = meta.annotations.as_mut() {
        annotations.remove(LAST_APPLIED);
    }
}

/// The name of `object` in its store, without the version and uid an [`ObjectRef::from_obj`]
/// would copy (the store compares names only).
fn key_of<K>(object: &K) -> ObjectRef<K>
where
    K: Resource,
    K::DynamicType: Default,
{
    let key = ObjectRef::new(object.meta().name.as_deref().unwrap_or_default());
    match object.meta().namespace.as_deref() {
        Some(namespace) => key.within(namespace),
        None => key,
    }
}

fn follow<K, S>(
    receiver: broadcast::Receiver<Change<K>>,
    store: S,
) -> impl Stream<Item = Arc<K>> + Send + 'static
where
    K: Resource + Clone + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Send + Sync,
    S: Keep<K>,
{
    futures::stream::unfold(receiver, move |mut receiver| {
        let store = store.clone();
        async move {
            match receiver.recv().await {
                Ok(Change::Stored(key)) => Some((store.get(&key).into_iter().collect(), receiver)),
                Ok(Change::Deleted(object)) => Some((vec![object], receiver)),
                Ok(Change::Relisted) | Err(broadcast::error::RecvError::Lagged(_)) => {
                    Some((store.state(), receiver))
                }
                Err(broadcast::error::RecvError::Closed) => None,
            }
        }
    })
    .flat_map(futures::stream::iter)
}

/// Does a new version of an object change more than its status, as far as metadata tells?
/// Only for kinds whose `metadata.generation` the API server bumps on every change outside
/// status and metadata (custom resources with a status subresource, Ingresses): the same uid,
/// generation, labels, annotations and deletion mean only the status (or fields nobody reads
/// from a cache, such as finalizers) changed. Kinds without a generation always change.
fn changes_more_than_status(
    old: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    new: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> bool {
    old.generation.is_none()
        || old.uid != new.uid
        || old.generation != new.generation
        || old.labels != new.labels
        || old.annotations != new.annotations
        || old.deletion_timestamp != new.deletion_timestamp
}

/// Keeps objects as they are (beyond the managed fields every store drops).
pub fn keep<K>(_: &mut K) {}

/// A typed watch stream with the default backoff (for built-in kinds, which the API server
/// always stores decodable).
pub fn typed<K>(
    api: kube::Api<K>,
    config: watcher::Config,
) -> impl Stream<Item = watcher::Result<Event<K>>> + Send + 'static
where
    K: Resource + Clone + Debug + serde::de::DeserializeOwned + Send + 'static,
{
    watcher(api, config).default_backoff()
}

/// A watch ended by the API server with 410 Gone (`Expired`): not a failure.
fn is_expired(error: &watcher::Error) -> bool {
    matches!(error, watcher::Error::WatchError(status) if status.code == 410)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use tokio::sync::mpsc;

    use super::*;

    fn config_map(name: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        }
    }

    #[test]
    fn a_status_write_changes_nothing_the_generation_readers_read() {
        let meta = |generation: Option<i64>, label: &str| ObjectMeta {
            uid: Some("u".into()),
            generation,
            labels: Some([("l".to_string(), label.to_string())].into()),
            ..ObjectMeta::default()
        };
        let stored = meta(Some(2), "a");
        // Same generation, labels and annotations: only the status (or a finalizer) moved.
        assert!(!changes_more_than_status(&stored, &meta(Some(2), "a")));
        assert!(changes_more_than_status(&stored, &meta(Some(3), "a")));
        assert!(changes_more_than_status(&stored, &meta(Some(2), "b")));
        let deleting = ObjectMeta {
            deletion_timestamp: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                jiff::Timestamp::UNIX_EPOCH,
            )),
            ..meta(Some(2), "a")
        };
        assert!(changes_more_than_status(&stored, &deleting));
        // Kinds without a generation (Services, Namespaces) always count.
        assert!(changes_more_than_status(&meta(None, "a"), &meta(None, "a")));
    }

    type Events = mpsc::UnboundedSender<watcher::Result<Event<ConfigMap>>>;

    /// A ConfigMap store running in `scope`, fed the events sent on the returned sender.
    fn config_maps(scope: &Scope) -> (Shared<ConfigMap>, Events) {
        let (events_tx, events_rx) = mpsc::unbounded_channel();
        let events = futures::stream::unfold(events_rx, |mut rx| async move {
            rx.recv().await.map(|event| (event, rx))
        });
        let generation = Arc::new(watch::channel(0u64).0);
        let shared = Shared::start(
            scope,
            &Metrics::process(),
            "configmaps",
            |_| events,
            keep,
            generation,
        );
        (shared, events_tx)
    }

    /// A version the store replaced is freed even while a subscriber has not read its change
    /// yet; the subscriber reads the latest version, and a deleted object as it was last seen.
    #[tokio::test]
    async fn the_fan_out_holds_no_version_the_store_replaced() {
        let scope = Scope::root("test");
        let (shared, events_tx) = config_maps(&scope);
        let changes = shared.changes();
        let version = |v: &str| {
            let mut object = config_map("a");
            object.metadata.resource_version = Some(v.into());
            object
        };
        let send = |event| events_tx.send(Ok(event)).expect("watch task alive");
        send(Event::Init);
        send(Event::InitDone);
        assert!(shared.listed().await);
        send(Event::Apply(version("1")));
        let stored = |v: &str| {
            let store = shared.store();
            let v = v.to_string();
            let key = ObjectRef::new("a").within("ns");
            async move {
                for _ in 0..1000 {
                    if let Some(o) = store.get(&key)
                        && o.metadata.resource_version.as_deref() == Some(v.as_str())
                    {
                        return o;
                    }
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                panic!("version {v} never stored");
            }
        };
        let first = Arc::downgrade(&stored("1").await);
        send(Event::Apply(version("2")));
        let _ = stored("2").await;
        assert!(
            first.upgrade().is_none(),
            "version 1 is still held after the store replaced it"
        );
        // What the store keeps of an object is stripped; the annotations cftunnel reads stay.
        let mut annotated = version("3");
        annotated.metadata.managed_fields = Some(vec![Default::default()]);
        annotated.metadata.annotations = Some(
            [
                (LAST_APPLIED, "{\"kind\":\"ConfigMap\"}"),
                ("cfargotunnel.com/a", "b"),
            ]
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .into(),
        );
        send(Event::Apply(annotated));
        let kept = stored("3").await;
        assert_eq!(kept.metadata.managed_fields, None);
        assert_eq!(
            kept.metadata.annotations,
            Some([("cfargotunnel.com/a".to_string(), "b".to_string())].into())
        );
        drop(kept);
        send(Event::Delete(version("3")));
        let versions = |o: Arc<ConfigMap>| o.metadata.resource_version.clone();
        let mut changes = std::pin::pin!(changes.map(versions));
        let wait = Duration::from_secs(10);
        // The relist replays the (then empty) store; both applies are read after the
        // deletion, when the store no longer has the object; the deletion carries it.
        let next = tokio::time::timeout(wait, changes.next()).await;
        assert_eq!(next.expect("a change"), Some(Some("3".to_string())));
        assert!(scope.shutdown(Duration::from_secs(5)).await);
    }

    /// Three readers on three tasks, all waiting before the list arrives, as the webhook's
    /// readiness, the route reconciler and a controller do: each one is woken.
    #[tokio::test]
    async fn every_reader_waiting_for_the_first_list_is_woken() {
        let scope = Scope::root("test");
        let (shared, events_tx) = config_maps(&scope);
        let first_listed = tokio::spawn({
            let shared = shared.clone();
            async move { shared.listed().await }
        });
        let second_listed = tokio::spawn({
            let shared = shared.clone();
            async move { shared.listed().await }
        });
        let replayed = tokio::spawn({
            let objects = shared.objects();
            async move {
                let mut objects = std::pin::pin!(objects);
                objects.next().await.and_then(|o| o.metadata.name.clone())
            }
        });
        // Let all three register as waiters before the list completes.
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        for event in [
            Event::Init,
            Event::InitApply(config_map("listed")),
            Event::InitDone,
        ] {
            events_tx.send(Ok(event)).expect("watch task alive");
        }
        let wait = Duration::from_secs(10);
        let listed = |task| tokio::time::timeout(wait, task);
        assert!(listed(first_listed).await.expect("woken").expect("joined"));
        assert!(listed(second_listed).await.expect("woken").expect("joined"));
        assert_eq!(
            tokio::time::timeout(wait, replayed)
                .await
                .expect("woken")
                .expect("joined"),
            Some("listed".to_string())
        );
        assert!(scope.shutdown(Duration::from_secs(5)).await);
    }

    /// A tunnel's status write that records its zone wakes the route reconciler (DNS is
    /// written with the zone); one that moves only what DNS does not read does not.
    #[tokio::test]
    async fn a_status_write_wakes_readers_only_when_a_part_they_read_changed() {
        use crate::caches::tunnel_status::dns_status_changed;
        use cftunnel_types::{Tunnel, TunnelStatus};
        let scope = Scope::root("test");
        let (events_tx, events_rx) = mpsc::unbounded_channel::<watcher::Result<Event<Tunnel>>>();
        let events = futures::stream::unfold(events_rx, |mut rx| async move {
            rx.recv().await.map(|event| (event, rx))
        });
        let generation = Arc::new(watch::channel(0u64).0);
        let mut woken = generation.subscribe();
        let shared: Shared<Tunnel> = Shared::start_with_status(
            &scope,
            &Metrics::process(),
            "tunnels",
            |_| events,
            keep,
            generation,
            |old: &Tunnel, new: &Tunnel| {
                dns_status_changed(old.status.as_ref(), new.status.as_ref())
            },
        );
        let tunnel = |status: TunnelStatus, version: &str| -> Tunnel {
            let mut t: Tunnel = serde_json::from_value(serde_json::json!({
                "apiVersion": "networking.cfargotunnel.com/v1alpha2", "kind": "Tunnel",
                "metadata": {"name": "edge", "namespace": "ns", "generation": 1, "resourceVersion": version},
                "spec": {"newTunnel": {"name": "edge"}, "cloudflare": {"secret": "cf", "domain": "example.com"}},
            }))
            .expect("tunnel");
            t.status = Some(status);
            t
        };
        let send = |event| events_tx.send(Ok(event)).expect("watch task alive");
        send(Event::Init);
        send(Event::InitApply(tunnel(TunnelStatus::default(), "1")));
        send(Event::InitDone);
        assert!(shared.listed().await);
        let wait = Duration::from_secs(10);
        woken.borrow_and_update();
        let zoned = TunnelStatus {
            tunnel_id: Some("id".into()),
            zone_id: Some("z".into()),
            ..TunnelStatus::default()
        };
        send(Event::Apply(tunnel(zoned.clone(), "2")));
        tokio::time::timeout(wait, woken.changed())
            .await
            .expect("the zone recorded in status wakes the readers")
            .expect("sender alive");
        let quiet = TunnelStatus {
            observed_generation: Some(1),
            ..zoned
        };
        send(Event::Apply(tunnel(quiet, "3")));
        let key = ObjectRef::new("edge").within("ns");
        for _ in 0..1000 {
            let stored = shared.store().get(&key);
            if stored.is_some_and(|t| t.metadata.resource_version.as_deref() == Some("3")) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(
            !woken.has_changed().expect("sender alive"),
            "a status write DNS does not read woke the readers"
        );
        assert!(scope.shutdown(Duration::from_secs(5)).await);
    }
}
