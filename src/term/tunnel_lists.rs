//! The live tunnels of an account as one list walk, shared by the drift checks of a credential.
//! A drift check asks whether the tunnel in its status still exists; a thousand tunnels asked
//! one GET each per drift interval would spend more than the half of the budget drift checks
//! may use. One walk (a page per 1,000 tunnels) answers every check of the next quarter of the
//! interval. The walk only ever says "present": a tunnel it does not list (made after it, or
//! deleted) is looked up on its own before anything is recreated.
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Mutex;
use tokio::time::Instant;

use cftunnel_cloudflare::{CloudflareClient, CloudflareError, TunnelFilter};

/// Walks kept per (credential fingerprint, account).
#[derive(Default)]
pub struct TunnelLists {
    walks: Mutex<HashMap<(String, String), Walk>>,
}

struct Walk {
    at: Instant,
    live: Arc<HashSet<String>>,
}

impl TunnelLists {
    /// The ids of the live tunnels of `account` as seen with `cf` (whose credential has the
    /// fingerprint `credential`), from a walk at most `max_age` old; one walk at a time, so
    /// checks that come due together share it.
    pub async fn live(
        &self,
        cf: &CloudflareClient,
        credential: &str,
        account: &str,
        max_age: Duration,
    ) -> Result<Arc<HashSet<String>>, CloudflareError> {
        let mut walks = self.walks.lock().await;
        let key = (credential.to_string(), account.to_string());
        if let Some(walk) = walks.get(&key)
            && walk.at.elapsed() <= max_age
        {
            return Ok(walk.live.clone());
        }
        let filter = TunnelFilter {
            is_deleted: Some(false),
            ..TunnelFilter::default()
        };
        let at = Instant::now();
        let live: HashSet<String> = cf
            .list_tunnels(account, &filter)
            .await?
            .into_iter()
            .filter(|t| !t.is_deleted())
            .map(|t| t.id)
            .collect();
        let live = Arc::new(live);
        walks.retain(|_, w| w.at.elapsed() <= max_age);
        walks.insert(
            key,
            Walk {
                at,
                live: live.clone(),
            },
        );
        Ok(live)
    }
}
