//! One watch, one store, many readers: [`Shared`] keeps a reflector store of one kind and fans
//! every change out to subscribers (controllers, the route reconciler, the admission view).
use std::fmt::Debug;
use std::hash::Hash;
use std::sync::Arc;

use futures::{Stream, StreamExt, TryStreamExt};
use kube::Resource;
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher;
use kube::runtime::{WatchStreamExt, watcher::Event};
use tokio::sync::{broadcast, watch};

use crate::lifecycle::Scope;

/// Changes a subscriber may fall behind by before it is handed the whole store again.
const FANOUT_BUFFER: usize = 1024;

/// A store of one kind, kept by one watch running in a [`Scope`], and its change fan-out.
pub struct Shared<K>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    store: Store<K>,
    changes: broadcast::Sender<Arc<K>>,
}

impl<K> Clone for Shared<K>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    fn clone(&self) -> Self {
        Shared {
            store: self.store.clone(),
            changes: self.changes.clone(),
        }
    }
}

impl<K> Shared<K>
where
    K: Resource + Clone + Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + Hash + Clone + Send + Sync,
{
    /// Drives the watch `events(store)` (already decoded; given the store it feeds) on a task
    /// of `scope`: every event passes through `modify`, is applied to the store, bumps
    /// `generation` and is fanned out.
    pub fn start<S>(
        scope: &Scope,
        what: &'static str,
        events: impl FnOnce(Store<K>) -> S,
        modify: fn(&mut K),
        generation: Arc<watch::Sender<u64>>,
    ) -> Shared<K>
    where
        S: Stream<Item = watcher::Result<Event<K>>> + Send + 'static,
    {
        let (store, writer) = reflector::store();
        let events = events(store.clone());
        let (changes, _) = broadcast::channel(FANOUT_BUFFER);
        let fanout = changes.clone();
        let stream = events
            .modify(modify)
            .reflect(writer)
            .inspect_ok(move |event| {
                match event {
                    Event::Apply(object) | Event::Delete(object) | Event::InitApply(object) => {
                        let _ = fanout.send(Arc::new(object.clone()));
                    }
                    Event::Init | Event::InitDone => {}
                }
                generation.send_modify(|n| *n = n.wrapping_add(1));
            });
        let watching = scope.watch_guard();
        scope.spawn(what, async move {
            let _watching = watching;
            let mut stream = std::pin::pin!(stream);
            while let Some(event) = stream.next().await {
                if let Err(e) = event {
                    tracing::warn!(watch = what, error = %e, "watch error; retrying with backoff");
                }
            }
        });
        Shared { store, changes }
    }

    /// The store (empty until the first list completed: see [`Store::wait_until_ready`]).
    pub fn store(&self) -> Store<K> {
        self.store.clone()
    }

    /// Every object once the store is ready, then each object as it changes; after falling
    /// behind, every object again. For a controller's own kind: a term started after the
    /// store listed still reconciles everything once.
    pub fn objects(&self) -> impl Stream<Item = Arc<K>> + Send + 'static {
        let receiver = self.changes.subscribe();
        let store = self.store.clone();
        let initial = {
            let store = store.clone();
            futures::stream::once(async move {
                let _ = store.wait_until_ready().await;
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

fn follow<K>(
    receiver: broadcast::Receiver<Arc<K>>,
    store: Store<K>,
) -> impl Stream<Item = Arc<K>> + Send + 'static
where
    K: Resource + Clone + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Send + Sync,
{
    futures::stream::unfold(receiver, move |mut receiver| {
        let store = store.clone();
        async move {
            match receiver.recv().await {
                Ok(object) => Some((vec![object], receiver)),
                Err(broadcast::error::RecvError::Lagged(_)) => Some((store.state(), receiver)),
                Err(broadcast::error::RecvError::Closed) => None,
            }
        }
    })
    .flat_map(futures::stream::iter)
}

/// Keeps objects as they are.
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
