//! The Go-era Tunnels and ClusterTunnels of the migration test: each kind in each version with
//! each way of naming its tunnel.
use serde_json::{Value, json};

use crate::go_era::cloudflare;
use crate::harness::Harness;

pub const API_SECRET: &str = "cloudflare-api";
pub const CLUSTER_API_SECRET: &str = "cloudflare-api-cluster";

/// How a Go-era tunnel object names its tunnel.
pub enum Source {
    New,
    /// `existingTunnel.id`, the credentials file under this key of the API Secret.
    ById(&'static str),
    /// `existingTunnel.name`, the credentials file under this key of the API Secret.
    ByName(&'static str),
    /// `existingTunnel.id: my-tunnel` (not a UUID) next to the valid `name`.
    OddIdWithName(&'static str),
}

/// One Tunnel or ClusterTunnel of the Go era: how it was stored, the tunnel on Cloudflare and
/// the ingress (hostname, service) the Go operator rendered for it.
pub struct Case {
    pub name: String,
    pub cluster: bool,
    pub version: &'static str,
    pub source: Source,
    pub tunnel_name: &'static str,
    pub secret: [u8; 32],
    pub extra: Value,
    pub ingress: Vec<(&'static str, String)>,
}

impl Case {
    pub fn kind(&self) -> &'static str {
        if self.cluster {
            "ClusterTunnel"
        } else {
            "Tunnel"
        }
    }

    pub fn api_secret(&self) -> &'static str {
        if self.cluster {
            CLUSTER_API_SECRET
        } else {
            API_SECRET
        }
    }

    /// The object as stored, once its tunnel has `id`.
    pub fn body(&self, h: &Harness, id: &str) -> Value {
        let mut spec = self.extra.clone();
        spec["cloudflare"] = cloudflare(h, self.api_secret());
        let (existing, key) = match self.source {
            Source::New => {
                spec["newTunnel"] = json!({"name": self.tunnel_name});
                return json!({"metadata": {"name": self.name}, "spec": spec});
            }
            Source::ById(key) => (json!({"id": id}), key),
            Source::ByName(key) => (json!({"name": self.tunnel_name}), key),
            Source::OddIdWithName(key) => {
                (json!({"id": "my-tunnel", "name": self.tunnel_name}), key)
            }
        };
        spec["existingTunnel"] = existing;
        spec["cloudflare"]["CLOUDFLARE_TUNNEL_CREDENTIAL_FILE"] = json!(key);
        json!({"metadata": {"name": self.name}, "spec": spec})
    }

    pub fn credential_key(&self) -> Option<&'static str> {
        match self.source {
            Source::New => None,
            Source::ById(k) | Source::ByName(k) | Source::OddIdWithName(k) => Some(k),
        }
    }
}
