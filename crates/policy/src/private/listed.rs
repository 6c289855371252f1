//! What Cloudflare lists of an account's private routes, as the planner reads it: the fields
//! of an IP route and of a hostname route it compares, keyed as desired routes are.
use super::desired::IpKey;
use super::normalize::{Cidr, normalize_hostname};

/// A live IP route of the account.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListedIpRoute {
    pub id: String,
    /// CIDR notation, as Cloudflare answers it.
    pub network: String,
    pub tunnel_id: String,
    /// `None` only on routes older than virtual networks: they are in the default network.
    pub virtual_network_id: Option<String>,
    pub comment: String,
}

/// A live hostname route of the account.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListedHostnameRoute {
    pub id: String,
    pub hostname: String,
    pub tunnel_id: String,
    pub comment: String,
}

/// Every live private route of one account (deleted ones left out), and the id of its default
/// virtual network, so that a route listed in it compares equal to one desired in "the default
/// network" (`None`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Listed {
    pub ip_routes: Vec<ListedIpRoute>,
    pub hostname_routes: Vec<ListedHostnameRoute>,
    pub default_network_id: Option<String>,
}

impl Listed {
    /// Routes of all kinds: they share one limit per account.
    pub fn len(&self) -> usize {
        self.ip_routes.len() + self.hostname_routes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Where `route` is, as a desired route's key; `None` if its network is not a CIDR.
    pub fn ip_key(&self, route: &ListedIpRoute) -> Option<IpKey> {
        let virtual_network_id = route
            .virtual_network_id
            .clone()
            .filter(|id| Some(id) != self.default_network_id.as_ref());
        let cidr = Cidr::parse(route.network.trim()).ok()?;
        Some(IpKey {
            virtual_network_id,
            cidr,
        })
    }
}

/// The key of a listed hostname route: its hostname normalised.
pub fn hostname_key(route: &ListedHostnameRoute) -> String {
    normalize_hostname(&route.hostname)
}
