//! What the route reconciler reads of a tunnel's status: the watch wakes it when that changes.
use cftunnel_types::TunnelStatus;

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
            s.conditions
                .iter()
                .flatten()
                .find(|c| c.type_ == "Ready")
                .map(|c| &c.reason),
        )
    })
}

#[cfg(test)]
mod tests {
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
