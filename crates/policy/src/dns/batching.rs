//! How the executor writes: Cloudflare's batch call (the default) or one request per record,
//! and what it remembers per zone between syncs (the plan's batch limit, or that the batch call
//! is unavailable there).
use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;
use std::sync::{Arc, Mutex};

/// `--dns-batch`: `auto` batches and falls back to single-record calls where the batch call is
/// unavailable; `always` never falls back; `never` writes one record per request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BatchMode {
    #[default]
    Auto,
    Always,
    Never,
}

impl FromStr for BatchMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "auto" => Ok(Self::Auto),
            "always" => Ok(Self::Always),
            "never" => Ok(Self::Never),
            other => Err(format!(
                "--dns-batch must be auto, always or never, got {other:?}"
            )),
        }
    }
}

impl fmt::Display for BatchMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Auto => "auto",
            Self::Always => "always",
            Self::Never => "never",
        })
    }
}

/// What is known of a zone's batch call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ZoneBatching {
    /// Records per batch on the zone's plan.
    Limit(usize),
    /// The batch call answered 403/404/405 here: single-record calls from now on.
    Unavailable,
}

/// Per zone id, shared by every sync that uses the same [`super::DnsOptions`] (its clones too).
/// Equality ignores it: two option sets that differ only in memory ask for the same records.
#[derive(Clone, Default)]
pub struct BatchMemory(Arc<Mutex<HashMap<String, ZoneBatching>>>);

impl BatchMemory {
    pub fn get(&self, zone_id: &str) -> Option<ZoneBatching> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(zone_id)
            .copied()
    }

    pub fn set(&self, zone_id: &str, value: ZoneBatching) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(zone_id.to_string(), value);
    }
}

impl PartialEq for BatchMemory {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for BatchMemory {}

impl fmt::Debug for BatchMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let zones = self.0.lock().map(|m| m.len()).unwrap_or_default();
        write!(f, "BatchMemory({zones} zones)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse_from_the_flag_and_refuse_anything_else() {
        assert_eq!("auto".parse::<BatchMode>(), Ok(BatchMode::Auto));
        assert_eq!("Always".parse::<BatchMode>(), Ok(BatchMode::Always));
        assert_eq!("never".parse::<BatchMode>(), Ok(BatchMode::Never));
        assert_eq!(
            "sometimes".parse::<BatchMode>(),
            Err("--dns-batch must be auto, always or never, got \"sometimes\"".into())
        );
    }

    #[test]
    fn clones_share_the_memory() {
        let memory = BatchMemory::default();
        memory.clone().set("z", ZoneBatching::Unavailable);
        assert_eq!(memory.get("z"), Some(ZoneBatching::Unavailable));
        assert_eq!(memory.get("y"), None);
    }
}
