//! The write permit every Cloudflare write checks right before it is sent. The operator's
//! leadership term holds one and moves its expiry forward on each renewal of the lease, so a
//! deposed or paused leader sends no write even before its own timers have run.
use std::sync::{Arc, Mutex};

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Whether a Cloudflare write may be sent now: the scope is not cancelled and its permit (set
/// by the elector on each renewal) has not expired. A scope without an expiry (no election, or
/// the process root) always permits.
#[derive(Clone, Debug)]
pub struct WriteGate {
    token: CancellationToken,
    valid_until: Arc<Mutex<Option<Instant>>>,
    parent: Option<Arc<WriteGate>>,
}

impl Default for WriteGate {
    fn default() -> Self {
        WriteGate::open()
    }
}

impl WriteGate {
    /// A permit that holds until cancelled (no expiry).
    pub fn open() -> WriteGate {
        WriteGate::cancelled_with(CancellationToken::new(), None)
    }

    /// A permit that ends when `token` is cancelled, and that holds only while `parent` does.
    pub fn cancelled_with(token: CancellationToken, parent: Option<&WriteGate>) -> WriteGate {
        WriteGate {
            token,
            valid_until: Arc::new(Mutex::new(None)),
            parent: parent.map(|p| Arc::new(p.clone())),
        }
    }

    /// Sets when the permit expires unless renewed again.
    pub fn renew_until(&self, until: Instant) {
        *self
            .valid_until
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(until);
    }

    /// True while writes are permitted.
    pub fn may_write(&self) -> bool {
        if self.token.is_cancelled() {
            return false;
        }
        let until = *self
            .valid_until
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if until.is_some_and(|until| Instant::now() >= until) {
            return false;
        }
        self.parent.as_ref().is_none_or(|parent| parent.may_write())
    }
}
