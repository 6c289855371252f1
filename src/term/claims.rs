//! One Cloudflare tunnel, one object (docs/design.md §3.1). Two Tunnel/ClusterTunnel objects
//! claiming one tunnel id (two existingTunnels naming it, an existingTunnel naming another
//! object's new tunnel, an adoption annotation) would run two cloudflared configs for one tunnel,
//! and Cloudflare would spread requests over both. The rule is deterministic, so every replica
//! and every reconcile picks the same object: a newTunnel (the tunnel's owner) comes first, then
//! the oldest object (creation time, then kind, namespace and name). The others get
//! `Ready=False`/`TunnelIdConflict` naming it, run no cloudflared and write no DNS record for
//! the id; once it is deleted the next in line takes over.
//!
//! An object claims the id in its `status.tunnelId` and the `spec.existingTunnel.id` it names.
//! Objects being deleted claim nothing.
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::runtime::reflector::{ObjectRef, Store};

use super::adapters::TunnelKindAdapter;
use cftunnel_types::{ClusterTunnel, Tunnel};
use cftunnel_types::{TunnelIdentity, TunnelKind};

/// Where a claim ranks: lower runs the tunnel.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Rank {
    existing: bool,
    created: Option<jiff::Timestamp>,
    kind: &'static str,
    namespace: String,
    name: String,
}

impl Rank {
    pub fn of<K: TunnelKindAdapter>(obj: &K) -> Rank {
        Rank {
            existing: !obj.is_new_tunnel(),
            created: obj.meta().creation_timestamp.as_ref().map(|Time(t)| *t),
            kind: K::KIND.as_str(),
            namespace: obj.namespace().unwrap_or_default(),
            name: obj.name_any(),
        }
    }
}

/// The tunnel ids `obj` claims (lower-case): none while it is being deleted.
pub(crate) fn claimed_ids<K: TunnelKindAdapter>(obj: &K) -> Vec<String> {
    if obj.meta().deletion_timestamp.is_some() {
        return Vec::new();
    }
    named_ids(obj)
}

/// The tunnel ids `obj` names in status and spec (lower-case).
pub(crate) fn named_ids<K: TunnelKindAdapter>(obj: &K) -> Vec<String> {
    let status = obj.tunnel_status().and_then(|s| s.tunnel_id.clone());
    let spec = obj.existing_tunnel_id();
    let mut ids: Vec<String> = [status.as_deref(), spec]
        .into_iter()
        .flatten()
        .map(|id| id.trim().to_ascii_lowercase())
        .filter(|id| !id.is_empty())
        .collect();
    ids.dedup();
    ids
}

/// Every Tunnel and ClusterTunnel the controllers know.
pub struct Claims {
    pub tunnels: Store<Tunnel>,
    pub cluster_tunnels: Store<ClusterTunnel>,
}

/// One object's claim: who, its rank, the ids.
struct Claim {
    identity: TunnelIdentity,
    display: String,
    rank: Rank,
    ids: Vec<String>,
}

fn claim<K: TunnelKindAdapter>(obj: &K) -> Claim {
    Claim {
        identity: obj.route_identity(),
        display: obj.display(),
        rank: Rank::of(obj),
        ids: claimed_ids(obj),
    }
}

impl Claims {
    /// Has the deletion of `obj` begun (or is it gone, or replaced by a namesake) as the stores
    /// see it now? A reconcile that started before the deletion asks this while it waits.
    pub(crate) fn deletion_started<K: TunnelKindAdapter>(&self, obj: &K) -> bool {
        let id = obj.route_identity();
        let uid = obj.meta().uid.as_deref();
        let deleting = |meta: Option<&ObjectMeta>| {
            meta.is_none_or(|m| m.deletion_timestamp.is_some() || m.uid.as_deref() != uid)
        };
        match id.kind {
            TunnelKind::ClusterTunnel => {
                let found = self.cluster_tunnels.get(&ObjectRef::new(&id.name));
                deleting(found.as_ref().map(|o| &o.metadata))
            }
            _ => {
                let at = ObjectRef::new(&id.name).within(&id.namespace);
                deleting(self.tunnels.get(&at).as_ref().map(|o| &o.metadata))
            }
        }
    }

    /// The claims of the objects claiming one of `ids` (lower-case). Asked on every reconcile,
    /// so the other objects are passed over without building their claims.
    fn of_ids(&self, ids: &[String]) -> Vec<Claim> {
        fn names<K: TunnelKindAdapter>(obj: &K, ids: &[String]) -> bool {
            claimed_ids(obj).iter().any(|id| ids.contains(id))
        }
        let tunnels = self.tunnels.state().into_iter();
        let tunnels = tunnels.filter(|t| names(&**t, ids)).map(|t| claim(&*t));
        let clusters = self.cluster_tunnels.state().into_iter();
        let clusters = clusters.filter(|t| names(&**t, ids)).map(|t| claim(&*t));
        tunnels.chain(clusters).collect()
    }

    /// The object that runs `tunnel_id` instead of `obj`, if one ranks before it.
    pub(crate) fn ahead_of<K: TunnelKindAdapter>(
        &self,
        obj: &K,
        tunnel_id: &str,
    ) -> Option<String> {
        let id = tunnel_id.trim().to_ascii_lowercase();
        let me = obj.route_identity();
        let rank = Rank::of(obj);
        self.of_ids(std::slice::from_ref(&id))
            .into_iter()
            .filter(|c| c.identity != me && c.ids.contains(&id) && c.rank < rank)
            .min_by(|a, b| a.rank.cmp(&b.rank))
            .map(|c| c.display)
    }

    /// The objects claiming one of `ids`, with their rank.
    pub(crate) fn claimants(&self, ids: &[String]) -> Vec<(TunnelIdentity, Rank)> {
        self.of_ids(ids)
            .into_iter()
            .filter(|c| c.ids.iter().any(|id| ids.contains(id)))
            .map(|c| (c.identity, c.rank))
            .collect()
    }
}

/// The `TunnelIdConflict` message of an object that does not run `tunnel_id`.
pub(crate) fn conflict_message(tunnel_id: &str, winner: &str) -> String {
    format!(
        "Cloudflare tunnel {tunnel_id} is run by {winner} (a newTunnel owner comes first, then the oldest object); one tunnel is run by one object only: delete this object or point spec.existingTunnel at another tunnel"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::runtime::reflector;
    use kube::runtime::watcher::Event;
    use serde_json::json;

    fn tunnel(
        name: &str,
        created: &str,
        source: serde_json::Value,
        status_id: Option<&str>,
    ) -> Tunnel {
        let mut spec = json!({"cloudflare": {"domain": "example.com", "secret": "s", "accountId": "0123456789abcdef0123456789abcdef"}});
        if let (Some(spec), Some(source)) = (spec.as_object_mut(), source.as_object()) {
            spec.extend(source.clone());
        }
        serde_json::from_value(json!({
            "apiVersion": "networking.cfargotunnel.com/v1alpha2",
            "kind": "Tunnel",
            "metadata": {"name": name, "namespace": "ns", "uid": name, "creationTimestamp": created},
            "spec": spec,
            "status": {"tunnelId": status_id},
        }))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    fn claims(objects: &[Tunnel]) -> Claims {
        let (tunnels, mut writer) = reflector::store::<Tunnel>();
        writer.apply_watcher_event(&Event::Init);
        for t in objects {
            writer.apply_watcher_event(&Event::InitApply(t.clone()));
        }
        writer.apply_watcher_event(&Event::InitDone);
        let (cluster_tunnels, _) = reflector::store::<ClusterTunnel>();
        Claims {
            tunnels,
            cluster_tunnels,
        }
    }

    const ID: &str = "6ff42ae2-765d-4adf-8112-31c55c1551ef";

    #[test]
    fn the_owner_then_the_oldest_object_runs_a_tunnel_id_and_the_others_are_told_who() {
        let old = tunnel(
            "old",
            "2026-01-01T00:00:00Z",
            json!({"existingTunnel": {"id": ID}}),
            None,
        );
        let young = tunnel(
            "young",
            "2026-02-01T00:00:00Z",
            json!({"existingTunnel": {"name": "pre"}}),
            Some(ID),
        );
        let c = claims(&[old.clone(), young.clone()]);
        assert_eq!(c.ahead_of(&old, ID), None);
        assert_eq!(c.ahead_of(&young, ID).as_deref(), Some("Tunnel ns/old"));
        assert_eq!(c.ahead_of(&young, "another-id"), None);
        // A newTunnel owning the id comes before any existingTunnel, however old.
        let owner = tunnel(
            "owner",
            "2026-03-01T00:00:00Z",
            json!({"newTunnel": {"name": "pre"}}),
            Some(ID),
        );
        let c = claims(&[old.clone(), young.clone(), owner.clone()]);
        assert_eq!(c.ahead_of(&owner, ID), None);
        assert_eq!(
            c.ahead_of(&old, &ID.to_uppercase()).as_deref(),
            Some("Tunnel ns/owner")
        );
        let mut claimants: Vec<String> = c
            .claimants(&[ID.to_string()])
            .into_iter()
            .map(|(i, _)| i.name)
            .collect();
        claimants.sort();
        assert_eq!(claimants, vec!["old", "owner", "young"]);
        // An object being deleted claims nothing: the next in line runs the tunnel.
        let mut going = old.clone();
        going.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::now()));
        let c = claims(&[going, young.clone()]);
        assert_eq!(c.ahead_of(&young, ID), None);
    }
}
