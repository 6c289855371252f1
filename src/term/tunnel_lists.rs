//! The live tunnels of an account as one list walk, shared by the drift checks of a credential
//! and the edge health task. A drift check asks whether the tunnel in its status still exists; a
//! thousand tunnels asked one GET each per drift interval would spend more than the half of the
//! budget drift checks may use. One walk (a page per 1,000 tunnels) answers every check of the
//! next quarter of the interval, and carries what the edge says of each tunnel (its `status`
//! and when connections were last seen), which the edge health task reads every
//! `--edge-interval` (its walks answer the drift checks in between, so health adds no walk of
//! its own while drift checks are due). The walk only ever says "present": a tunnel it does not
//! list (made after it, or deleted) is looked up on its own before anything is recreated.
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use tokio::sync::Mutex;
use tokio::time::Instant;

use cftunnel_cloudflare::{CloudflareClient, CloudflareError, TunnelFilter, TunnelStatus};

/// How long a walk of another account or credential is kept for readers that accept older
/// ones (a drift check accepts a quarter of its interval, 150 s at the default).
const KEPT: Duration = Duration::from_secs(600);

/// Walks kept per (credential fingerprint, account).
#[derive(Default)]
pub struct TunnelLists {
    walks: Mutex<HashMap<(String, String), Walk>>,
}

struct Walk {
    at: Instant,
    live: Arc<Listed>,
}

/// What one walk saw: each live tunnel by id, with the edge's word on it.
pub type Listed = HashMap<String, EdgeFacts>;

/// What a tunnel list says of a tunnel's connections.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EdgeFacts {
    /// `None` when Cloudflare sent no status.
    pub status: Option<TunnelStatus>,
    pub conns_active_at: Option<Timestamp>,
    pub conns_inactive_at: Option<Timestamp>,
}

impl TunnelLists {
    /// The live tunnels of `account` as seen with `cf` (whose credential has the fingerprint
    /// `credential`), from a walk at most `max_age` old; one walk at a time, so checks that
    /// come due together share it.
    pub async fn live(
        &self,
        cf: &CloudflareClient,
        credential: &str,
        account: &str,
        max_age: Duration,
    ) -> Result<Arc<Listed>, CloudflareError> {
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
        let live: Listed = cf
            .list_tunnels(account, &filter)
            .await?
            .into_iter()
            .filter(|t| !t.is_deleted())
            .map(|t| {
                let facts = EdgeFacts {
                    status: t.status,
                    conns_active_at: t.conns_active_at,
                    conns_inactive_at: t.conns_inactive_at,
                };
                (t.id, facts)
            })
            .collect();
        let live = Arc::new(live);
        walks.retain(|_, w| w.at.elapsed() <= max_age.max(KEPT));
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
