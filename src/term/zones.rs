//! Zone ids by name, shared by every reconcile of the process. A tunnel records its zone id in
//! status, but a first convergence of many tunnels on one domain would otherwise look the same
//! zone up once per tunnel: concurrent lookups of one (credential, account, domain) share a
//! single call, and later ones none. A failed lookup is not remembered.
//!
//! Also every zone of an account per credential ([`ZoneLists`]), which places hostnames outside
//! the tunnel's own zone.
use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::OnceCell;
use tokio::time::Instant;

use cftunnel_cloudflare::{CloudflareClient, Credentials, ZoneFilter};
use cftunnel_policy::dns::AccountZone;

/// Distinct lookups kept before the map is cleared (a zone id rarely changes; a clear only costs
/// one call per domain again).
const MAX_ENTRIES: usize = 1024;

/// (credential fingerprint, account id, lower-case domain).
type Key = (String, String, String);

#[derive(Default)]
pub struct ZoneIds {
    cells: Mutex<HashMap<Key, Arc<OnceCell<String>>>>,
}

impl ZoneIds {
    /// The zone id of `domain`, from memory or from `lookup` (run once for concurrent callers).
    pub(crate) async fn get_or_lookup<E, F, Fut>(
        &self,
        credentials: &Credentials,
        account_id: &str,
        domain: &str,
        lookup: F,
    ) -> Result<String, E>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<String, E>>,
    {
        let key = (
            credentials.fingerprint(),
            account_id.to_string(),
            domain.to_ascii_lowercase(),
        );
        let cell = {
            let mut cells = self.cells.lock().unwrap_or_else(|p| p.into_inner());
            if cells.len() >= MAX_ENTRIES && !cells.contains_key(&key) {
                cells.clear();
            }
            cells.entry(key).or_default().clone()
        };
        cell.get_or_try_init(lookup).await.cloned()
    }
}

/// (credential fingerprint, lower-case account id).
type AccountKey = (String, String);
/// An account's zones and when they were listed.
type Listed = (Arc<Vec<AccountZone>>, Instant);

/// A listed zone set is trusted this long; then the next sync lists again.
pub(crate) const ZONE_LIST_MAX_AGE: Duration = Duration::from_secs(3600);
/// A hostname in no listed zone lists the account again, at most this often per credential (a
/// zone just added to the account is found within this delay, a typo costs one list a while).
pub(crate) const ZONE_LIST_MIN_REFRESH: Duration = Duration::from_secs(60);

/// Every zone of an account as one credential sees it, listed once and kept (the DNS placement
/// of hostnames reads it; see `cftunnel_policy::dns::place`). Refreshed after [`ZONE_LIST_MAX_AGE`], or on
/// a miss no sooner than [`ZONE_LIST_MIN_REFRESH`] after the last list. A failed list keeps the
/// previous one when there is one.
#[derive(Default)]
pub struct ZoneLists {
    lists: Mutex<HashMap<AccountKey, Listed>>,
}

impl ZoneLists {
    /// The zones of `account_id` seen by `credentials`; `missed`: a hostname was in none of the
    /// zones last returned, so list again unless that list is younger than the refresh bound.
    pub async fn get<F, Fut>(
        &self,
        credentials: &Credentials,
        account_id: &str,
        missed: bool,
        list: F,
    ) -> Result<Arc<Vec<AccountZone>>, String>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Vec<AccountZone>, String>>,
    {
        let key = (credentials.fingerprint(), account_id.to_ascii_lowercase());
        let cached = {
            let lists = self.lists.lock().unwrap_or_else(|p| p.into_inner());
            lists.get(&key).cloned()
        };
        if let Some((zones, at)) = &cached {
            let age = at.elapsed();
            let fresh = age < ZONE_LIST_MAX_AGE && (!missed || age < ZONE_LIST_MIN_REFRESH);
            if fresh {
                return Ok(zones.clone());
            }
        }
        match list().await {
            Ok(zones) => {
                let zones = Arc::new(zones);
                let mut lists = self.lists.lock().unwrap_or_else(|p| p.into_inner());
                if lists.len() >= MAX_ENTRIES && !lists.contains_key(&key) {
                    lists.clear();
                }
                lists.insert(key, (zones.clone(), Instant::now()));
                Ok(zones)
            }
            Err(error) => match cached {
                Some((zones, _)) => {
                    tracing::warn!(%error, "listing the account's zones failed; the previous list is kept");
                    Ok(zones)
                }
                None => Err(error),
            },
        }
    }
}

/// Every zone of `account_id` the client's credential sees (all pages), names in lower case;
/// a zone whose status is not `active` (a child zone added but not delegated yet) is marked
/// inactive and takes no hostname.
pub(crate) async fn list_account_zones(
    cf: &CloudflareClient,
    account_id: &str,
) -> Result<Vec<AccountZone>, String> {
    let filter = ZoneFilter {
        account_id: Some(account_id.to_string()),
        ..ZoneFilter::default()
    };
    let zones = cf.list_zones(&filter).await.map_err(|e| e.to_string())?;
    Ok(zones
        .into_iter()
        .map(|z| AccountZone {
            inactive: z.status.as_deref().is_some_and(|s| s != "active"),
            ..AccountZone::active(z.id, z.name.to_ascii_lowercase())
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    fn token(t: &str) -> Credentials {
        Credentials::ApiToken(t.into())
    }

    #[tokio::test]
    async fn concurrent_lookups_of_one_zone_make_one_call() {
        let zones = ZoneIds::default();
        let calls = AtomicUsize::new(0);
        let lookup = || async {
            calls.fetch_add(1, Ordering::SeqCst);
            tokio::task::yield_now().await;
            Ok::<_, ()>("zone-1".to_string())
        };
        let t = token("t");
        let (a, b, c) = tokio::join!(
            zones.get_or_lookup(&t, "acc", "example.com", lookup),
            zones.get_or_lookup(&t, "acc", "Example.COM", lookup),
            zones.get_or_lookup(&t, "acc", "example.com", lookup),
        );
        assert_eq!(
            (a, b, c),
            (
                Ok("zone-1".into()),
                Ok("zone-1".into()),
                Ok("zone-1".into())
            )
        );
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn another_credential_or_account_looks_up_again_and_failures_are_not_kept() {
        let zones = ZoneIds::default();
        let calls = AtomicUsize::new(0);
        let ok = || async {
            calls.fetch_add(1, Ordering::SeqCst);
            Ok::<_, &str>("zone-1".to_string())
        };
        let failing = || async {
            calls.fetch_add(1, Ordering::SeqCst);
            Err::<String, _>("not found")
        };
        assert_eq!(
            zones
                .get_or_lookup(&token("t"), "acc", "example.com", failing)
                .await,
            Err("not found")
        );
        assert_eq!(
            zones
                .get_or_lookup(&token("t"), "acc", "example.com", ok)
                .await,
            Ok("zone-1".into())
        );
        assert_eq!(
            zones
                .get_or_lookup(&token("u"), "acc", "example.com", ok)
                .await,
            Ok("zone-1".into())
        );
        assert_eq!(
            zones
                .get_or_lookup(&token("t"), "acc2", "example.com", ok)
                .await,
            Ok("zone-1".into())
        );
        assert_eq!(
            zones
                .get_or_lookup(&token("t"), "acc", "example.com", ok)
                .await,
            Ok("zone-1".into())
        );
        assert_eq!(calls.load(Ordering::SeqCst), 4);
    }

    fn zone(name: &str) -> AccountZone {
        AccountZone::active(format!("id-{name}"), name.to_string())
    }

    #[tokio::test]
    async fn a_zone_list_is_kept_per_credential_and_a_miss_lists_again_only_after_the_bound() {
        let lists = ZoneLists::default();
        let calls = AtomicUsize::new(0);
        let list = || async {
            calls.fetch_add(1, Ordering::SeqCst);
            Ok::<_, String>(vec![zone("example.com")])
        };
        let t = token("t");
        let first = lists.get(&t, "acc", false, list).await;
        assert_eq!(first.map(|z| z.len()), Ok(1));
        // Kept: neither a second read nor a miss within the refresh bound lists again.
        assert!(lists.get(&t, "ACC", false, list).await.is_ok());
        assert!(lists.get(&t, "acc", true, list).await.is_ok());
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        // Another credential is listed on its own.
        assert!(lists.get(&token("u"), "acc", false, list).await.is_ok());
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_miss_after_the_bound_lists_again_and_a_failed_list_keeps_the_old_one() {
        let lists = ZoneLists::default();
        let t = token("t");
        let old = lists
            .get(&t, "acc", false, || async { Ok(vec![zone("example.com")]) })
            .await;
        assert_eq!(old.map(|z| z[0].name.clone()), Ok("example.com".into()));
        tokio::time::advance(ZONE_LIST_MIN_REFRESH + Duration::from_secs(1)).await;
        let failed = lists
            .get(&t, "acc", true, || async { Err("403".to_string()) })
            .await;
        assert_eq!(failed.map(|z| z[0].name.clone()), Ok("example.com".into()));
        let refreshed = lists
            .get(&t, "acc", true, || async {
                Ok(vec![zone("example.com"), zone("example.net")])
            })
            .await;
        assert_eq!(refreshed.map(|z| z.len()), Ok(2));
        let never_listed = lists
            .get(&t, "other", false, || async { Err("403".to_string()) })
            .await;
        assert_eq!(never_listed, Err("403".to_string()));
    }
}
