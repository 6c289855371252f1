//! What one sync knows and finds of its zone's record quota while it writes; `quota.rs` reads
//! and updates it.
use cftunnel_policy::dns::{Refusal, ZoneRoom};
use cftunnel_types::TunnelIdentity;

/// What one sync knows and finds of its zone's record quota.
#[derive(Default)]
pub(super) struct QuotaRun {
    /// The room the writes were fitted into (`None`: unknown, every hostname sent).
    pub room: Option<ZoneRoom>,
    /// Hostnames beyond a reported figure are being tried.
    pub probing: bool,
    /// Cloudflare refused a write adding this many records: hostnames needing as many are not
    /// sent for the rest of the sync.
    pub(super) full_at: Option<usize>,
    /// Hostnames left without records: tunnel, hostname, records needed.
    pub(super) over: Vec<(TunnelIdentity, String, usize)>,
    /// Records created less records deleted so far in this sync.
    pub(super) added: isize,
    /// The zone's count after the first refusal, and `added` then.
    pub(super) counted: Option<(usize, isize)>,
    /// The tightest refusal of the sync: the most the zone can hold is `held + cost - 1`.
    pub(super) refusal: Option<Refusal>,
}

impl QuotaRun {
    /// One more record created (`+1`) or deleted (`-1`).
    pub fn written(&mut self, delta: isize) {
        self.added += delta;
    }

    /// Records the zone holds now, as far as counted.
    pub(super) fn held_now(&self) -> Option<usize> {
        let (held, then) = match (self.counted, &self.room) {
            (Some(counted), _) => counted,
            (None, Some(room)) => (room.held, 0),
            (None, None) => return None,
        };
        let now = held as isize + self.added - then;
        Some(now.max(0) as usize)
    }
}
