//! Private networks as stored: the account's virtual networks, its IP (CIDR) routes and its
//! hostname routes, deleted ones included (deletes are soft, as Cloudflare's are).
//!
//! The account starts with one virtual network, `default`, which is its default; exactly one
//! live virtual network is the default at any time. Live routes of both kinds count together
//! against one account limit (1,000, as Cloudflare's; [`NetworkState::route_limit`]).

/// Live IP and hostname routes an account may hold together (Cloudflare's account limit).
pub(crate) const DEFAULT_ROUTE_LIMIT: usize = 1_000;

/// The name of the virtual network every account starts with.
pub(crate) const DEFAULT_NETWORK_NAME: &str = "default";

/// A virtual network: a namespace of IP routes, so two networks may route the same range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimVirtualNetwork {
    /// A UUID.
    pub id: String,
    pub name: String,
    /// `""` unless sent.
    pub comment: String,
    /// True on exactly one live network, the account's default.
    pub is_default_network: bool,
    pub created_at: String,
    pub deleted_at: Option<String>,
}

/// An IP route: a range of a virtual network reached through a tunnel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimIpRoute {
    /// A UUID.
    pub id: String,
    /// Canonical CIDR text (`10.0.0.0/8`, `fd00::/8`): unique among the network's live routes.
    pub network: String,
    pub tunnel_id: String,
    /// The account's default network when the create named none.
    pub virtual_network_id: String,
    /// `""` unless sent.
    pub comment: String,
    pub created_at: String,
    pub deleted_at: Option<String>,
}

/// A hostname route: a private hostname resolved and reached through a tunnel. Not scoped to
/// a virtual network; its hostname is unique among the account's live hostname routes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimHostnameRoute {
    /// A UUID.
    pub id: String,
    /// Lower-case, leading `*` and `.` and a trailing `.` trimmed.
    pub hostname: String,
    pub tunnel_id: String,
    /// `""` unless sent.
    pub comment: String,
    pub created_at: String,
    pub deleted_at: Option<String>,
}

/// Everything the account holds of private networks.
#[derive(Debug)]
pub(crate) struct NetworkState {
    /// Creation order, which is also the list order.
    pub virtual_networks: Vec<SimVirtualNetwork>,
    /// Creation order, which is also the list order.
    pub ip_routes: Vec<SimIpRoute>,
    /// Creation order, which is also the list order.
    pub hostname_routes: Vec<SimHostnameRoute>,
    /// Most live routes, IP and hostname together.
    pub route_limit: usize,
}

impl NetworkState {
    /// An account's networks at start: its default virtual network, created `at`.
    pub fn new(default_id: String, at: String) -> Self {
        NetworkState {
            virtual_networks: vec![SimVirtualNetwork {
                id: default_id,
                name: DEFAULT_NETWORK_NAME.to_string(),
                comment: String::new(),
                is_default_network: true,
                created_at: at,
                deleted_at: None,
            }],
            ip_routes: Vec::new(),
            hostname_routes: Vec::new(),
            route_limit: DEFAULT_ROUTE_LIMIT,
        }
    }

    /// The live default network.
    pub fn default_network(&self) -> Option<&SimVirtualNetwork> {
        self.virtual_networks
            .iter()
            .find(|n| n.is_default_network && n.deleted_at.is_none())
    }

    /// A live virtual network by id.
    pub fn live_network(&self, id: &str) -> Option<&SimVirtualNetwork> {
        self.virtual_networks
            .iter()
            .find(|n| n.id.eq_ignore_ascii_case(id) && n.deleted_at.is_none())
    }

    pub fn network_mut(&mut self, id: &str) -> Option<&mut SimVirtualNetwork> {
        self.virtual_networks
            .iter_mut()
            .find(|n| n.id.eq_ignore_ascii_case(id))
    }

    /// Makes the live network `id` the default and every other one not.
    pub fn make_default(&mut self, id: &str) {
        for network in &mut self.virtual_networks {
            network.is_default_network =
                network.deleted_at.is_none() && network.id.eq_ignore_ascii_case(id);
        }
    }

    pub fn ip_route(&self, id: &str) -> Option<&SimIpRoute> {
        self.ip_routes
            .iter()
            .find(|r| r.id.eq_ignore_ascii_case(id))
    }

    pub fn ip_route_mut(&mut self, id: &str) -> Option<&mut SimIpRoute> {
        self.ip_routes
            .iter_mut()
            .find(|r| r.id.eq_ignore_ascii_case(id))
    }

    pub fn hostname_route(&self, id: &str) -> Option<&SimHostnameRoute> {
        self.hostname_routes
            .iter()
            .find(|r| r.id.eq_ignore_ascii_case(id))
    }

    pub fn hostname_route_mut(&mut self, id: &str) -> Option<&mut SimHostnameRoute> {
        self.hostname_routes
            .iter_mut()
            .find(|r| r.id.eq_ignore_ascii_case(id))
    }

    /// Live routes of both kinds: what the account limit counts.
    pub fn live_routes(&self) -> usize {
        let ip = self.ip_routes.iter().filter(|r| r.deleted_at.is_none());
        let hostname = self
            .hostname_routes
            .iter()
            .filter(|r| r.deleted_at.is_none());
        ip.count() + hostname.count()
    }

    /// Live IP routes of the network `id`.
    pub fn routes_in(&self, network_id: &str) -> usize {
        self.ip_routes
            .iter()
            .filter(|r| r.deleted_at.is_none() && r.virtual_network_id == network_id)
            .count()
    }

    /// The live IP route of `network` holding `cidr`, other than `except`.
    pub fn ip_route_for(
        &self,
        network_id: &str,
        cidr: &str,
        except: Option<&str>,
    ) -> Option<&SimIpRoute> {
        self.ip_routes.iter().find(|r| {
            r.deleted_at.is_none()
                && r.virtual_network_id == network_id
                && r.network == cidr
                && except.is_none_or(|id| r.id != id)
        })
    }

    /// The live hostname route for `hostname`, other than `except`.
    pub fn hostname_route_for(
        &self,
        hostname: &str,
        except: Option<&str>,
    ) -> Option<&SimHostnameRoute> {
        self.hostname_routes.iter().find(|r| {
            r.deleted_at.is_none() && r.hostname == hostname && except.is_none_or(|id| r.id != id)
        })
    }

    /// The live network called `name`, other than `except`.
    pub fn network_named(&self, name: &str, except: Option<&str>) -> Option<&SimVirtualNetwork> {
        self.virtual_networks.iter().find(|n| {
            n.deleted_at.is_none() && n.name == name && except.is_none_or(|id| n.id != id)
        })
    }

    /// Soft-deletes the live IP routes of network `id` (a forced network delete); how many.
    pub fn delete_routes_in(&mut self, network_id: &str, at: &str) -> usize {
        let mut deleted = 0;
        for route in &mut self.ip_routes {
            if route.deleted_at.is_none() && route.virtual_network_id == network_id {
                route.deleted_at = Some(at.to_string());
                deleted += 1;
            }
        }
        deleted
    }

    /// Live routes of either kind through `tunnel_id`.
    pub fn routes_through(&self, tunnel_id: &str) -> usize {
        let ip = self
            .ip_routes
            .iter()
            .filter(|r| r.deleted_at.is_none() && r.tunnel_id == tunnel_id);
        let hostname = self
            .hostname_routes
            .iter()
            .filter(|r| r.deleted_at.is_none() && r.tunnel_id == tunnel_id);
        ip.count() + hostname.count()
    }

    /// Soft-deletes the live routes of either kind through `tunnel_id` (a tunnel deleted with
    /// `cascade=true`); how many.
    pub fn delete_routes_through(&mut self, tunnel_id: &str, at: &str) -> usize {
        let mut deleted = 0;
        for route in &mut self.ip_routes {
            if route.deleted_at.is_none() && route.tunnel_id == tunnel_id {
                route.deleted_at = Some(at.to_string());
                deleted += 1;
            }
        }
        for route in &mut self.hostname_routes {
            if route.deleted_at.is_none() && route.tunnel_id == tunnel_id {
                route.deleted_at = Some(at.to_string());
                deleted += 1;
            }
        }
        deleted
    }
}
