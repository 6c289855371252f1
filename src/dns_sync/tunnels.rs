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

/// Did a tunnel's status change in a part DNS reads: the ids and zones its records are
/// written with, whether it lists a route, its `Ready` reason (another object running its
/// tunnel takes its records away)? The watch wakes the route reconciler for these only: a
/// status write that moved nothing of them (a message, `observedGeneration`, the routes' own
/// statuses) is not a change of its input, and a first sync writes thousands of statuses.
pub(crate) fn dns_status_changed(old: Option<&TunnelStatus>, new: Option<&TunnelStatus>) -> bool {
    read_by_dns(old) != read_by_dns(new)
}

type DnsPart<'s> = (
    [&'s Option<String>; 4],
    &'s Option<Vec<cftunnel_types::ZoneRef>>,
    bool,
    Option<&'s String>,
);

fn read_by_dns(status: Option<&TunnelStatus>) -> Option<DnsPart<'_>> {
    status.map(|s| {
        (
            [&s.tunnel_id, &s.account_id, &s.zone_id, &s.zone_domain],
            &s.previous_zones,
            s.routes.as_ref().is_some_and(|r| !r.is_empty()),
            crate::term::conditions::find_ready(s.conditions.as_ref()).map(|c| &c.reason),
        )
    })
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

#[cfg(test)]
mod status_tests {
    use super::*;
    use cftunnel_types::RouteStatus;

    #[test]
    fn only_the_parts_dns_reads_make_a_status_write_a_change() {
        let before = TunnelStatus {
            tunnel_id: Some("id-1".into()),
            ..TunnelStatus::default()
        };
        let zoned = TunnelStatus {
            zone_id: Some("z".into()),
            zone_domain: Some("example.com".into()),
            ..before.clone()
        };
        assert!(dns_status_changed(Some(&before), Some(&zoned)));
        assert!(dns_status_changed(None, Some(&before)));
        let generation = TunnelStatus {
            observed_generation: Some(4),
            ..zoned.clone()
        };
        assert!(!dns_status_changed(Some(&zoned), Some(&generation)));
        let routed = TunnelStatus {
            routes: Some(vec![RouteStatus::default()]),
            ..zoned.clone()
        };
        assert!(dns_status_changed(Some(&zoned), Some(&routed)));
        let more = TunnelStatus {
            routes: Some(vec![RouteStatus::default(), RouteStatus::default()]),
            ..zoned.clone()
        };
        assert!(!dns_status_changed(Some(&routed), Some(&more)));
    }
}
