//! What tests read and change of private networks behind the API's back: the virtual networks
//! and routes as stored, objects made by someone else (the dashboard, another tool), deletes
//! nobody asked the operator for, and the account's route limit.
//!
//! The `put_*` controls store an object the way the create would, without a call: nothing is
//! counted or logged and no fault applies. A test may as well call the API with the same token
//! through a second client, which is logged like the operator's own calls.
use serde_json::Value;

use super::network_state::{SimHostnameRoute, SimIpRoute, SimVirtualNetwork};
use super::state::now;
use super::{Simulator, handlers};

impl Simulator {
    /// Every virtual network, deleted ones included, in creation order (the account's
    /// `default` network first).
    pub fn virtual_networks(&self) -> Vec<SimVirtualNetwork> {
        self.lock().networks.virtual_networks.clone()
    }

    /// The id of the account's default virtual network.
    pub fn default_virtual_network_id(&self) -> Option<String> {
        self.lock().networks.default_network().map(|n| n.id.clone())
    }

    /// Every IP route, deleted ones included, in creation order.
    pub fn ip_routes(&self) -> Vec<SimIpRoute> {
        self.lock().networks.ip_routes.clone()
    }

    /// Every hostname route, deleted ones included, in creation order.
    pub fn hostname_routes(&self) -> Vec<SimHostnameRoute> {
        self.lock().networks.hostname_routes.clone()
    }

    /// Stores a virtual network nobody created through this API. `network` is a create body
    /// (`{"name": …, "comment": …, "is_default_network": …}`); `None` when the create's rules
    /// refuse it (a name taken, …).
    pub fn put_virtual_network(&self, network: Value) -> Option<SimVirtualNetwork> {
        let body = network.as_object()?;
        handlers::insert_virtual_network(&mut self.lock(), body).ok()
    }

    /// Stores an IP route nobody created through this API. `route` is a create body
    /// (`{"network": …, "tunnel_id": …, "virtual_network_id": …, "comment": …}`); `None` when
    /// the create's rules refuse it (the range taken in that network, the route limit, …).
    pub fn put_ip_route(&self, route: Value) -> Option<SimIpRoute> {
        let body = route.as_object()?;
        handlers::insert_ip_route(&mut self.lock(), body).ok()
    }

    /// Stores a hostname route nobody created through this API. `route` is a create body
    /// (`{"hostname": …, "tunnel_id": …, "comment": …}`); `None` when the create's rules refuse
    /// it (the hostname taken, the route limit, …).
    pub fn put_hostname_route(&self, route: Value) -> Option<SimHostnameRoute> {
        let body = route.as_object()?;
        handlers::insert_hostname_route(&mut self.lock(), body).ok()
    }

    /// Soft-deletes a live route of either kind, as the dashboard would; false when no live
    /// route has this id.
    pub fn delete_route_out_of_band(&self, route_id: &str) -> bool {
        let mut state = self.lock();
        let at = now();
        let networks = &mut state.networks;
        if let Some(route) = networks
            .ip_route_mut(route_id)
            .filter(|r| r.deleted_at.is_none())
        {
            route.deleted_at = Some(at);
            return true;
        }
        match networks
            .hostname_route_mut(route_id)
            .filter(|r| r.deleted_at.is_none())
        {
            Some(route) => {
                route.deleted_at = Some(at);
                true
            }
            None => false,
        }
    }

    /// Soft-deletes a live virtual network and the IP routes in it, as a forced delete in the
    /// dashboard would; false for an unknown or deleted network, and for the default one.
    pub fn delete_virtual_network_out_of_band(&self, network_id: &str) -> bool {
        handlers::remove_virtual_network(&mut self.lock(), network_id, true).is_ok()
    }

    /// Sets the most live routes (IP and hostname together) the account may hold; Cloudflare's
    /// limit, and the default, is 1,000. Routes already over a lowered limit stay.
    pub fn set_route_limit(&self, limit: usize) {
        self.lock().networks.route_limit = limit;
    }

    pub fn route_limit(&self) -> usize {
        self.lock().networks.route_limit
    }
}
