//! One DNS writer per zone at a time, between the DNS task's syncs and deletions, and the zones
//! a tunnel's records were placed in ([`DnsWriters`] holds both for a term).
//!
//! A deletion removes its tunnel's records with a sync of its zone that wants nothing for it,
//! while the route reconciler may be in the middle of a sync that still wants them (it read its
//! input before the deletion began). Were both to run at once, a create planned by the route
//! sync could land after the deletion's removal and outlive the tunnel. So both take the zone's
//! lock for a sync, and a deletion first marks its tunnel id retired: a route sync that gets the
//! lock afterwards leaves that tunnel out; one that held it before finishes first, and the
//! deletion's sync then removes what it wrote.
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::OwnedMutexGuard;

use cftunnel_policy::dns::AccountZone;

/// How long a retired tunnel id is remembered (its object is long gone by then; a tunnel id is
/// never reused).
const RETIRED_FOR: Duration = Duration::from_secs(3600);

/// What the two writers of DNS, the DNS task (`dns_sync`) and tunnel deletions
/// (`tunnel_reconciler::deletion`), share: made once per term in `wiring.rs`; a clone shares
/// both.
#[derive(Clone, Default)]
pub struct DnsWriters {
    /// One sync per zone at a time: both lock a zone for a sync; a deletion retires its tunnel
    /// id, which the DNS task's syncs then leave out.
    pub guard: Arc<DnsGuard>,
    /// Zones other than its own that hold records of a tunnel: the DNS task adds and drops
    /// them as it places records; a deletion reads them, cleans each and drops it.
    pub zones: Arc<TunnelZones>,
}

#[derive(Default)]
pub struct DnsGuard {
    zones: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// Tunnel id → the uid of the object being deleted, and since when.
    retired: Mutex<HashMap<String, (String, Instant)>>,
}

impl DnsGuard {
    /// Waits for the sync lock of `zone_id`.
    pub async fn lock(&self, zone_id: &str) -> OwnedMutexGuard<()> {
        let lock = {
            let mut zones = self.zones.lock().unwrap_or_else(|p| p.into_inner());
            zones.entry(zone_id.to_string()).or_default().clone()
        };
        lock.lock_owned().await
    }

    /// Marks `tunnel_id` as being deleted with the object `uid`: route syncs leave it out from
    /// now on.
    pub(crate) fn retire(&self, tunnel_id: &str, uid: &str) {
        let now = Instant::now();
        let mut retired = self.retired.lock().unwrap_or_else(|p| p.into_inner());
        retired.retain(|_, (_, at)| now.saturating_duration_since(*at) <= RETIRED_FOR);
        retired.insert(tunnel_id.to_string(), (uid.to_string(), now));
    }

    /// Another object (`uid`) runs `tunnel_id` now (an existing tunnel named again after its
    /// object was deleted): its routes get records again.
    pub(crate) fn readmit(&self, tunnel_id: &str, uid: &str) {
        let mut retired = self.retired.lock().unwrap_or_else(|p| p.into_inner());
        if retired.get(tunnel_id).is_some_and(|(by, _)| by != uid) {
            retired.remove(tunnel_id);
        }
    }

    pub(crate) fn is_retired(&self, tunnel_id: &str) -> bool {
        let retired = self.retired.lock().unwrap_or_else(|p| p.into_inner());
        retired.contains_key(tunnel_id)
    }
}

/// Zones other than its own that hold (or held) records of a tunnel, by tunnel id: the route
/// reconciler's DNS sync adds a zone when it places a hostname there and drops it once a sync
/// of that zone left nothing of the tunnel; a deletion cleans each of them. In memory: after a
/// restart the first sync of each group adds them again.
#[derive(Default)]
pub struct TunnelZones {
    zones: Mutex<HashMap<String, BTreeSet<AccountZone>>>,
}

impl TunnelZones {
    pub fn add(&self, tunnel_id: &str, zone: &AccountZone) {
        let mut zones = self.zones.lock().unwrap_or_else(|p| p.into_inner());
        zones
            .entry(tunnel_id.to_string())
            .or_default()
            .insert(zone.clone());
    }

    pub fn remove(&self, tunnel_id: &str, zone_id: &str) {
        let mut zones = self.zones.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(set) = zones.get_mut(tunnel_id) {
            set.retain(|z| z.id != zone_id);
            if set.is_empty() {
                zones.remove(tunnel_id);
            }
        }
    }

    pub fn of(&self, tunnel_id: &str) -> Vec<AccountZone> {
        let zones = self.zones.lock().unwrap_or_else(|p| p.into_inner());
        zones
            .get(tunnel_id)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn one_sync_per_zone_at_a_time_and_retired_ids_are_remembered() {
        let guard = Arc::new(DnsGuard::default());
        let held = guard.lock("z1").await;
        let other_zone = guard.lock("z2").await;
        let waiting = {
            let guard = guard.clone();
            tokio::spawn(async move {
                let _second = guard.lock("z1").await;
            })
        };
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "a second sync of z1 waits");
        drop(held);
        waiting.await.unwrap_or_else(|e| panic!("{e}"));
        drop(other_zone);
        assert!(!guard.is_retired("t1"));
        guard.retire("t1", "uid-1");
        assert!(guard.is_retired("t1"));
        guard.readmit("t1", "uid-1");
        assert!(
            guard.is_retired("t1"),
            "the deleting object itself is not readmitted"
        );
        guard.readmit("t1", "uid-2");
        assert!(!guard.is_retired("t1"), "a new object running the id is");
    }
}
