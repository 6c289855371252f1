//! The refusals of the private-network calls.
//!
//! Cloudflare documents none of them. Two codes are reported: 1015 for a route that is not
//! routed (404 on a route delete) and 1023 for a tunnel delete refused while routes point at
//! the tunnel. The others are the simulator's, inferred; so each conflict is also recognised
//! by its HTTP 409 on the call that can cause it, which holds whatever code Cloudflare sends.
use super::error::CloudflareError;

/// A live IP route already holds this range in this virtual network (inferred; with 409).
pub const CODE_ROUTE_EXISTS: u32 = 1014;
/// "You are trying to modify the route for a network that isn't routed." (reported, with 404).
pub const CODE_ROUTE_NOT_FOUND: u32 = 1015;
/// A live hostname route already holds this hostname (inferred; with 409).
pub const CODE_HOSTNAME_ROUTE_EXISTS: u32 = 1016;
/// A virtual network still used by IP routes cannot be deleted (inferred; with 400).
pub const CODE_VIRTUAL_NETWORK_IN_USE: u32 = 1017;
/// The account holds as many routes, IP and hostname together, as it may (1,000 unless
/// raised) (inferred; with 400).
pub const CODE_ROUTE_LIMIT: u32 = 1018;
/// A live virtual network already has this name (inferred; with 409).
pub const CODE_VIRTUAL_NETWORK_NAME_EXISTS: u32 = 1020;
/// "Cannot delete tunnel because it has Warp routing configured." (reported): a tunnel
/// delete without `cascade` while routes point at the tunnel.
pub const CODE_TUNNEL_HAS_ROUTES: u32 = 1023;

impl CloudflareError {
    /// An IP route create or update refused because the range is routed in that virtual
    /// network already.
    pub fn is_route_exists(&self) -> bool {
        self.has_code(CODE_ROUTE_EXISTS) || self.is_conflict_of(&["route.create", "route.update"])
    }

    /// A hostname route create or update refused because the hostname is routed already.
    pub fn is_hostname_route_exists(&self) -> bool {
        self.has_code(CODE_HOSTNAME_ROUTE_EXISTS)
            || self.is_conflict_of(&["hostname_route.create", "hostname_route.update"])
    }

    /// A virtual network create or update refused because the name is taken.
    pub fn is_virtual_network_name_exists(&self) -> bool {
        self.has_code(CODE_VIRTUAL_NETWORK_NAME_EXISTS)
            || self.is_conflict_of(&["vnet.create", "vnet.update"])
    }

    /// A virtual network delete refused because IP routes use the network.
    pub fn is_virtual_network_in_use(&self) -> bool {
        self.has_code(CODE_VIRTUAL_NETWORK_IN_USE)
    }

    /// A route create refused because the account holds as many routes as it may.
    pub fn is_route_limit_reached(&self) -> bool {
        self.has_code(CODE_ROUTE_LIMIT)
    }

    /// A tunnel delete refused because routes point at the tunnel.
    pub fn is_tunnel_has_routes(&self) -> bool {
        self.has_code(CODE_TUNNEL_HAS_ROUTES)
    }

    /// HTTP 409 answered to one of `operations`.
    fn is_conflict_of(&self, operations: &[&str]) -> bool {
        matches!(
            self,
            CloudflareError::Api { operation, status: 409, .. } if operations.contains(operation)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ApiErrorItem;

    fn api(operation: &'static str, status: u16, code: u32) -> CloudflareError {
        CloudflareError::Api {
            operation,
            status,
            errors: vec![ApiErrorItem {
                code,
                message: "refused".into(),
                error_chain: Vec::new(),
            }],
        }
    }

    #[test]
    fn conflicts_are_told_by_code_or_by_a_409_of_their_call() {
        assert!(api("route.create", 409, CODE_ROUTE_EXISTS).is_route_exists());
        assert!(api("route.update", 409, 7777).is_route_exists());
        assert!(api("route.create", 400, CODE_ROUTE_EXISTS).is_route_exists());
        assert!(!api("hostname_route.create", 409, 7777).is_route_exists());
        assert!(api("hostname_route.create", 409, 7777).is_hostname_route_exists());
        assert!(!api("route.create", 409, 7777).is_hostname_route_exists());
        assert!(api("vnet.create", 409, 7777).is_virtual_network_name_exists());
        assert!(!api("vnet.delete", 409, 7777).is_virtual_network_name_exists());
    }

    #[test]
    fn refusals_without_a_conflict_status_are_told_by_code() {
        let in_use = api("vnet.delete", 400, CODE_VIRTUAL_NETWORK_IN_USE);
        assert!(in_use.is_virtual_network_in_use() && !in_use.is_route_limit_reached());
        let limit = api("route.create", 400, CODE_ROUTE_LIMIT);
        assert!(limit.is_route_limit_reached() && !limit.is_route_exists());
        assert!(api("tunnel.delete", 400, CODE_TUNNEL_HAS_ROUTES).is_tunnel_has_routes());
        assert!(!api("tunnel.delete", 400, 1022).is_tunnel_has_routes());
    }
}
