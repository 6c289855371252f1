//! The stores behind [`super::Shared`]: kube's reflector [`Store`] where a kube controller
//! reads it, and [`Objects`] for every other kind.
//!
//! kube's store keys each object by an [`ObjectRef`]: 96 bytes inline, with its own copies of
//! the name, namespace, resourceVersion and uid, in a table sized to the next power of two
//! (ten thousand HTTPRoutes: 16,384 slots of 104 bytes, and four strings per object). An
//! [`Objects`] table holds only the `Arc` of each object and finds it by hashing the name and
//! namespace the object itself carries: 8 bytes a slot and nothing copied.
use std::hash::{BuildHasher, RandomState};
use std::sync::{Arc, PoisonError, RwLock};

use hashbrown::HashTable;
use kube::Resource;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher::Event;

/// What applies a watch's events to its store, in order, from one task.
pub type Writer<K> = Box<dyn FnMut(&Event<K>) + Send>;

/// A store one watch keeps and any number of readers read.
pub trait Keep<K>: Clone + Send + Sync + 'static
where
    K: Resource,
{
    /// An empty store, and its writer.
    fn start() -> (Self, Writer<K>);
    /// The object named `key` (its name and namespace; its version and uid are not compared).
    fn get(&self, key: &ObjectRef<K>) -> Option<Arc<K>>;
    /// Every object (empty before the first list completed).
    fn state(&self) -> Vec<Arc<K>>;
}

impl<K> Keep<K> for Store<K>
where
    K: Resource + Clone + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone + Send + Sync,
{
    fn start() -> (Self, Writer<K>) {
        let (store, mut writer) = reflector::store();
        (
            store,
            Box::new(move |event| writer.apply_watcher_event(event)),
        )
    }

    fn get(&self, key: &ObjectRef<K>) -> Option<Arc<K>> {
        Store::get(self, key)
    }

    fn state(&self) -> Vec<Arc<K>> {
        Store::state(self)
    }
}

/// Objects of one kind by namespace and name, each held once (see the module comment).
pub struct Objects<K> {
    inner: Arc<Inner<K>>,
}

impl<K> Clone for Objects<K> {
    fn clone(&self) -> Self {
        Objects {
            inner: self.inner.clone(),
        }
    }
}

struct Inner<K> {
    table: RwLock<Table<K>>,
    hasher: RandomState,
}

struct Table<K> {
    objects: HashTable<Arc<K>>,
    /// A list in progress (`Init` to `InitDone`): it replaces `objects` when complete, as the
    /// watch protocol wants (an object missing from a relist was deleted meanwhile).
    relist: Option<HashTable<Arc<K>>>,
}

fn name_of<K: Resource>(object: &K) -> (Option<&str>, &str) {
    let meta = object.meta();
    (
        meta.namespace.as_deref(),
        meta.name.as_deref().unwrap_or_default(),
    )
}

impl<K> Objects<K>
where
    K: Resource + Clone,
{
    fn hash(&self, (namespace, name): (Option<&str>, &str)) -> u64 {
        self.inner.hasher.hash_one((namespace, name))
    }

    /// Puts `object` in `table`, replacing the object of the same name.
    fn insert(&self, table: &mut HashTable<Arc<K>>, object: &K) {
        let key = name_of(object);
        let hash = self.hash(key);
        let stored = Arc::new(object.clone());
        match table.find_mut(hash, |o| name_of(o.as_ref()) == key) {
            Some(slot) => *slot = stored,
            None => {
                table.insert_unique(hash, stored, |o| self.hash(name_of(o.as_ref())));
            }
        }
    }

    /// The object named `key` (its name and namespace).
    pub fn get(&self, key: &ObjectRef<K>) -> Option<Arc<K>> {
        let key = (key.namespace.as_deref(), key.name.as_str());
        let table = self
            .inner
            .table
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        table
            .objects
            .find(self.hash(key), |o| name_of(o.as_ref()) == key)
            .cloned()
    }

    /// Every object (empty before the first list completed).
    pub fn state(&self) -> Vec<Arc<K>> {
        let table = self
            .inner
            .table
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        table.objects.iter().cloned().collect()
    }

    fn apply(&self, event: &Event<K>) {
        let mut table = self
            .inner
            .table
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        let table = &mut *table;
        match event {
            Event::Apply(object) => self.insert(&mut table.objects, object),
            Event::Delete(object) => {
                let key = name_of(object);
                if let Ok(slot) = table
                    .objects
                    .find_entry(self.hash(key), |o| name_of(o.as_ref()) == key)
                {
                    slot.remove();
                }
            }
            Event::Init => table.relist = Some(HashTable::new()),
            Event::InitApply(object) => {
                self.insert(table.relist.get_or_insert_with(HashTable::new), object);
            }
            Event::InitDone => {
                if let Some(mut listed) = table.relist.take() {
                    listed.shrink_to_fit(|o| self.hash(name_of(o.as_ref())));
                    table.objects = listed;
                }
            }
        }
    }
}

impl<K> Keep<K> for Objects<K>
where
    K: Resource + Clone + Send + Sync + 'static,
{
    fn start() -> (Self, Writer<K>) {
        let objects = Objects {
            inner: Arc::new(Inner {
                table: RwLock::new(Table {
                    objects: HashTable::new(),
                    relist: None,
                }),
                hasher: RandomState::new(),
            }),
        };
        let writer = objects.clone();
        (objects, Box::new(move |event| writer.apply(event)))
    }

    fn get(&self, key: &ObjectRef<K>) -> Option<Arc<K>> {
        Objects::get(self, key)
    }

    fn state(&self) -> Vec<Arc<K>> {
        Objects::state(self)
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn config_map(namespace: Option<&str>, name: &str, version: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: namespace.map(Into::into),
                resource_version: Some(version.into()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        }
    }

    fn version(store: &impl Keep<ConfigMap>, key: &ObjectRef<ConfigMap>) -> Option<String> {
        store
            .get(key)
            .and_then(|o| o.metadata.resource_version.clone())
    }

    fn names(store: &impl Keep<ConfigMap>) -> Vec<(Option<String>, String, String)> {
        let mut all: Vec<_> = store
            .state()
            .iter()
            .map(|o| {
                let meta = &o.metadata;
                (
                    meta.namespace.clone(),
                    meta.name.clone().unwrap_or_default(),
                    meta.resource_version.clone().unwrap_or_default(),
                )
            })
            .collect();
        all.sort();
        all
    }

    /// The same events give the same contents in both stores: applies replace by name (in
    /// their namespace), deletes remove, and a relist replaces everything once it completes.
    #[test]
    fn objects_keep_what_kubes_store_keeps() {
        let (objects, mut apply_objects) = <Objects<ConfigMap> as Keep<ConfigMap>>::start();
        let (store, mut apply_store) = <Store<ConfigMap> as Keep<ConfigMap>>::start();
        let a = ObjectRef::new("a").within("one");
        let a_elsewhere = ObjectRef::new("a").within("two");
        let cluster_wide = ObjectRef::new("a");
        let events = [
            Event::Init,
            Event::InitApply(config_map(Some("one"), "a", "1")),
            Event::InitApply(config_map(Some("one"), "gone", "1")),
            Event::InitDone,
            Event::Apply(config_map(Some("two"), "a", "2")),
            Event::Apply(config_map(Some("one"), "a", "3")),
            Event::Apply(config_map(None, "a", "4")),
            Event::Delete(config_map(Some("one"), "gone", "1")),
        ];
        for (i, event) in events.iter().enumerate() {
            apply_objects(event);
            apply_store(event);
            assert_eq!(names(&objects), names(&store), "after event {i}");
        }
        for (key, expected) in [(&a, "3"), (&a_elsewhere, "2"), (&cluster_wide, "4")] {
            assert_eq!(version(&objects, key).as_deref(), Some(expected));
            assert_eq!(version(&store, key).as_deref(), Some(expected));
        }
        // A relist in progress changes nothing until it completes; then only what it listed is.
        for event in [
            Event::Init,
            Event::InitApply(config_map(Some("one"), "b", "5")),
        ] {
            apply_objects(&event);
            apply_store(&event);
        }
        assert_eq!(names(&objects).len(), 3);
        assert_eq!(names(&objects), names(&store));
        apply_objects(&Event::InitDone);
        apply_store(&Event::InitDone);
        assert_eq!(
            names(&objects),
            vec![(Some("one".into()), "b".into(), "5".into())]
        );
        assert_eq!(names(&objects), names(&store));
        assert_eq!(version(&objects, &a), None);
    }
}
