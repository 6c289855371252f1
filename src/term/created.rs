//! The tunnels this term created on Cloudflare. What is known of them without asking: nothing
//! on Cloudflare points at them but what cftunnel wrote (a new tunnel's id is Cloudflare's fresh
//! UUID), and a remotely-managed one's configuration is, until someone else writes it, what
//! cftunnel last pushed or read (the empty one of a new tunnel at first). The DNS task reuses
//! the records it knows of a zone for them, and their pushes merge onto the configuration last
//! seen instead of reading it first (docs/design.md §3.12).
//!
//! In memory only: after a restart, or on a new leader, each of them is read as every other
//! tunnel is (a tunnel created before cannot be told from one adopted).
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;

/// Tunnel ids this term created, each with its configuration as this term last saw it.
#[derive(Debug, Default)]
pub struct CreatedTunnels(Mutex<HashMap<String, Seen>>);

/// A configuration document as Cloudflare held it at this term's last look.
#[derive(Debug)]
struct Seen {
    config: Value,
    at: Instant,
}

impl CreatedTunnels {
    fn with<T>(&self, f: impl FnOnce(&mut HashMap<String, Seen>) -> T) -> T {
        f(&mut self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// `tunnel` was created now, by this term: its configuration is the empty one.
    pub fn created(&self, tunnel: &str) {
        let seen = Seen {
            config: Value::Null,
            at: Instant::now(),
        };
        self.with(|m| m.insert(tunnel.to_string(), seen));
    }

    /// Did this term create `tunnel`?
    pub fn contains(&self, tunnel: &str) -> bool {
        self.with(|m| m.contains_key(tunnel))
    }

    /// The configuration `tunnel` held at this term's last push or read of it, when this term
    /// created it and that look is younger than `max_age` (`options::copy_max_age`: a drift
    /// check reads at least that often). `None`: read it before a push.
    pub fn configuration(&self, tunnel: &str, max_age: Duration) -> Option<Value> {
        self.with(|m| {
            m.get(tunnel)
                .filter(|seen| seen.at.elapsed() < max_age)
                .map(|seen| seen.config.clone())
        })
    }

    /// Cloudflare holds `config` for `tunnel` now (pushed or read): kept when this term created
    /// it, ignored otherwise.
    pub fn seen(&self, tunnel: &str, config: &Value) {
        self.with(|m| {
            if let Some(seen) = m.get_mut(tunnel) {
                seen.config = config.clone();
                seen.at = Instant::now();
            }
        });
    }

    /// `tunnel` is deleted.
    pub fn forget(&self, tunnel: &str) {
        self.with(|m| m.remove(tunnel));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const HOUR: Duration = Duration::from_secs(3600);

    #[test]
    fn a_created_tunnel_holds_what_was_last_seen_until_forgotten() {
        let created = CreatedTunnels::default();
        assert!(!created.contains("t1") && created.configuration("t1", HOUR).is_none());
        created.seen("t1", &json!({"ingress": []}));
        assert!(
            !created.contains("t1"),
            "a tunnel this term did not create is never remembered"
        );
        created.created("t1");
        assert_eq!(created.configuration("t1", HOUR), Some(Value::Null));
        let pushed = json!({"ingress": [{"service": "http_status:404"}]});
        created.seen("t1", &pushed);
        assert_eq!(created.configuration("t1", HOUR), Some(pushed));
        assert!(
            created.configuration("t1", Duration::ZERO).is_none(),
            "a look older than the bound is read again"
        );
        created.forget("t1");
        assert!(!created.contains("t1") && created.configuration("t1", HOUR).is_none());
    }
}
