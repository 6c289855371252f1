//! The tunnels this term created on Cloudflare. What is known of them without asking: nothing
//! on Cloudflare points at them but what cftunnel wrote (a new tunnel's id is Cloudflare's fresh
//! UUID), and a remotely-managed one's configuration is the empty one of a new tunnel until
//! cftunnel pushes to it. The DNS task reuses the records it knows of a zone for them, and their
//! first push reads nothing before it (docs/design.md §3.12).
//!
//! In memory only: after a restart, or on a new leader, each of them is read as every other
//! tunnel is (a tunnel created before cannot be told from one adopted).
use std::collections::HashMap;
use std::sync::Mutex;

/// Tunnel ids this term created, each with whether cftunnel has pushed a configuration to it.
#[derive(Debug, Default)]
pub struct CreatedTunnels(Mutex<HashMap<String, bool>>);

impl CreatedTunnels {
    fn with<T>(&self, f: impl FnOnce(&mut HashMap<String, bool>) -> T) -> T {
        f(&mut self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// `tunnel` was created now, by this term.
    pub fn created(&self, tunnel: &str) {
        self.with(|m| m.insert(tunnel.to_string(), false));
    }

    /// Did this term create `tunnel`?
    pub fn contains(&self, tunnel: &str) -> bool {
        self.with(|m| m.contains_key(tunnel))
    }

    /// Did this term create `tunnel` and has it pushed nothing to it yet?
    pub fn unpushed(&self, tunnel: &str) -> bool {
        self.with(|m| m.get(tunnel) == Some(&false))
    }

    /// A configuration was pushed to `tunnel`: others may have written since.
    pub fn pushed(&self, tunnel: &str) {
        self.with(|m| {
            if let Some(pushed) = m.get_mut(tunnel) {
                *pushed = true;
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

    #[test]
    fn a_created_tunnel_is_unpushed_until_pushed_and_known_until_forgotten() {
        let created = CreatedTunnels::default();
        assert!(!created.contains("t1") && !created.unpushed("t1"));
        created.pushed("t1");
        assert!(
            !created.contains("t1"),
            "pushing an unknown tunnel records nothing"
        );
        created.created("t1");
        assert!(created.contains("t1") && created.unpushed("t1"));
        created.pushed("t1");
        assert!(created.contains("t1") && !created.unpushed("t1"));
        created.forget("t1");
        assert!(!created.contains("t1"));
    }
}
