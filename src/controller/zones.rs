//! Zone ids by name, shared by every reconcile of the process. A tunnel records its zone id in
//! status, but a first convergence of many tunnels on one domain would otherwise look the same
//! zone up once per tunnel: concurrent lookups of one (credential, account, domain) share a
//! single call, and later ones none. A failed lookup is not remembered.
use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};

use tokio::sync::OnceCell;

use crate::cloudflare::client::Credentials;

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
    pub async fn get_or_lookup<E, F, Fut>(
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
}
