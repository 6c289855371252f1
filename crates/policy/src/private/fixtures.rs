//! Routes, owners and accounts shared by the plan's unit and property tests.
use std::collections::BTreeMap;

use cftunnel_types::NetworkRouteSpec;
use cftunnel_types::network::NetworkTunnelRef;

use super::desired::{IpKey, NetworkRouteSource};
use super::listed::{Listed, ListedHostnameRoute, ListedIpRoute};
use super::marker::{Owner, OwnerKind, ownership_comment};
use super::normalize::Cidr;
use crate::dns::ClusterId;

pub const TUNNEL: &str = "11111111-1111-4111-8111-111111111111";
pub const OTHER_TUNNEL: &str = "22222222-2222-4222-8222-222222222222";
pub const DEFAULT_NETWORK: &str = "dddddddd-dddd-4ddd-8ddd-dddddddddddd";
pub const NETWORK: &str = "33333333-3333-4333-8333-333333333333";

pub fn cluster() -> ClusterId {
    ClusterId::new("prod-eu").expect("cluster id")
}

pub fn owner(name: &str) -> Owner {
    Owner::new(OwnerKind::NetworkRoute, "shop", name)
}

pub fn comment(name: &str) -> String {
    ownership_comment(&cluster(), &owner(name), None)
}

pub fn source(name: &str, created: i64, cidrs: &[&str], hostnames: &[&str]) -> NetworkRouteSource {
    NetworkRouteSource {
        owner_kind: OwnerKind::NetworkRoute,
        namespace: "shop".into(),
        name: name.into(),
        created: jiff::Timestamp::from_second(created).ok(),
        spec: NetworkRouteSpec {
            tunnel_ref: NetworkTunnelRef {
                kind: None,
                name: "edge".into(),
            },
            virtual_network_ref: None,
            cidrs: cidrs.iter().map(|c| c.to_string()).collect(),
            services: Vec::new(),
            hostnames: hostnames.iter().map(|h| h.to_string()).collect(),
            comment: None,
        },
        tunnel_id: Some(TUNNEL.into()),
        virtual_network_id: None,
        service_ips: BTreeMap::new(),
    }
}

pub fn ip(id: &str, network: &str, tunnel: &str, comment: &str) -> ListedIpRoute {
    ListedIpRoute {
        id: id.into(),
        network: network.into(),
        tunnel_id: tunnel.into(),
        virtual_network_id: Some(DEFAULT_NETWORK.into()),
        comment: comment.into(),
    }
}

pub fn host(id: &str, hostname: &str, tunnel: &str, comment: &str) -> ListedHostnameRoute {
    ListedHostnameRoute {
        id: id.into(),
        hostname: hostname.into(),
        tunnel_id: tunnel.into(),
        comment: comment.into(),
    }
}

pub fn listed(ip_routes: Vec<ListedIpRoute>, hostname_routes: Vec<ListedHostnameRoute>) -> Listed {
    Listed {
        ip_routes,
        hostname_routes,
        default_network_id: Some(DEFAULT_NETWORK.into()),
    }
}

pub fn key(cidr: &str) -> IpKey {
    IpKey {
        virtual_network_id: None,
        cidr: Cidr::parse(cidr).expect(cidr),
    }
}
