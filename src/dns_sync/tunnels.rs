//! What a DNS sync, and the finalizers of the routes, need to know of one tunnel object.
use cftunnel_types::{CloudflareDetails, TunnelIdentity, TunnelStatus};

/// What DNS and finalizers need to know of one tunnel object.
#[derive(Clone, Debug)]
pub struct TunnelRecord {
    pub identity: TunnelIdentity,
    /// Namespace of the API Secret (the tunnel's own, or the cluster-resource namespace).
    pub secret_namespace: String,
    pub cloudflare: CloudflareDetails,
    /// Its status without `routes` (see [`TunnelRecord::routed`]): a copy of every tunnel's
    /// record is taken per route table, and `routes` is most of a status.
    pub status: TunnelStatus,
    /// `status.routes` lists a route: the tunnel may have records to take away.
    pub routed: bool,
    /// `deletionTimestamp` is set: its records are removed by its own deletion.
    pub deleting: bool,
}

impl TunnelRecord {
    /// The record of a tunnel object whose status is `status`.
    pub fn new(
        identity: TunnelIdentity,
        secret_namespace: String,
        cloudflare: &CloudflareDetails,
        status: Option<&TunnelStatus>,
        deleting: bool,
    ) -> TunnelRecord {
        let routed = status
            .and_then(|s| s.routes.as_ref())
            .is_some_and(|routes| !routes.is_empty());
        let status = status
            .map(|s| TunnelStatus {
                routes: None,
                ..s.clone()
            })
            .unwrap_or_default();
        TunnelRecord {
            identity,
            secret_namespace,
            cloudflare: cloudflare.clone(),
            status,
            routed,
            deleting,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cftunnel_types::{RouteStatus, TunnelKind};

    #[test]
    fn a_record_knows_the_tunnel_routed_without_carrying_its_routes() {
        let identity = TunnelIdentity {
            kind: TunnelKind::Tunnel,
            namespace: "shop".into(),
            name: "edge".into(),
        };
        let details: CloudflareDetails =
            serde_json::from_value(serde_json::json!({"domain": "example.com", "secret": "cf"}))
                .unwrap_or_else(|e| panic!("{e}"));
        let routed = TunnelStatus {
            tunnel_id: Some("id-1".into()),
            routes: Some(vec![RouteStatus {
                hostname: "a.example.com".into(),
                ..RouteStatus::default()
            }]),
            ..TunnelStatus::default()
        };
        let record = TunnelRecord::new(
            identity.clone(),
            "shop".into(),
            &details,
            Some(&routed),
            false,
        );
        assert!(record.routed);
        assert_eq!(record.status.routes, None);
        assert_eq!(record.status.tunnel_id.as_deref(), Some("id-1"));
        let empty = TunnelStatus {
            routes: Some(Vec::new()),
            ..TunnelStatus::default()
        };
        assert!(
            !TunnelRecord::new(
                identity.clone(),
                "shop".into(),
                &details,
                Some(&empty),
                false
            )
            .routed
        );
        assert!(!TunnelRecord::new(identity, "shop".into(), &details, None, false).routed);
    }
}
