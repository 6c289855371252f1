//! The API operations the simulator serves, named after the client's needs.
use std::fmt;

/// One Cloudflare v4 operation; faults, counters and log entries are keyed by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Operation {
    VerifyToken,
    VerifyAccountToken,
    ListAccounts,
    ListZones,
    GetZone,
    CreateTunnel,
    ListTunnels,
    GetTunnel,
    DeleteTunnel,
    GetTunnelToken,
    ListConnections,
    CleanupConnections,
    GetConfiguration,
    PutConfiguration,
    ListDnsRecords,
    CreateDnsRecord,
    GetDnsRecord,
    UpdateDnsRecord,
    PatchDnsRecord,
    DeleteDnsRecord,
    BatchDnsRecords,
    GetAccessOrganization,
    ListAccessApps,
    CreateAccessApp,
    GetAccessApp,
    UpdateAccessApp,
    DeleteAccessApp,
    ListAccessPolicies,
    CreateAccessPolicy,
    GetAccessPolicy,
    UpdateAccessPolicy,
    DeleteAccessPolicy,
    ListCertificatePacks,
    ListVirtualNetworks,
    CreateVirtualNetwork,
    UpdateVirtualNetwork,
    DeleteVirtualNetwork,
    ListIpRoutes,
    CreateIpRoute,
    UpdateIpRoute,
    DeleteIpRoute,
    ListHostnameRoutes,
    CreateHostnameRoute,
    GetHostnameRoute,
    UpdateHostnameRoute,
    DeleteHostnameRoute,
}

impl Operation {
    /// Every operation, in a stable order (useful to iterate counters or inject faults broadly).
    pub const ALL: [Operation; 46] = [
        Operation::VerifyToken,
        Operation::VerifyAccountToken,
        Operation::ListAccounts,
        Operation::ListZones,
        Operation::GetZone,
        Operation::CreateTunnel,
        Operation::ListTunnels,
        Operation::GetTunnel,
        Operation::DeleteTunnel,
        Operation::GetTunnelToken,
        Operation::ListConnections,
        Operation::CleanupConnections,
        Operation::GetConfiguration,
        Operation::PutConfiguration,
        Operation::ListDnsRecords,
        Operation::CreateDnsRecord,
        Operation::GetDnsRecord,
        Operation::UpdateDnsRecord,
        Operation::PatchDnsRecord,
        Operation::DeleteDnsRecord,
        Operation::BatchDnsRecords,
        Operation::GetAccessOrganization,
        Operation::ListAccessApps,
        Operation::CreateAccessApp,
        Operation::GetAccessApp,
        Operation::UpdateAccessApp,
        Operation::DeleteAccessApp,
        Operation::ListAccessPolicies,
        Operation::CreateAccessPolicy,
        Operation::GetAccessPolicy,
        Operation::UpdateAccessPolicy,
        Operation::DeleteAccessPolicy,
        Operation::ListCertificatePacks,
        Operation::ListVirtualNetworks,
        Operation::CreateVirtualNetwork,
        Operation::UpdateVirtualNetwork,
        Operation::DeleteVirtualNetwork,
        Operation::ListIpRoutes,
        Operation::CreateIpRoute,
        Operation::UpdateIpRoute,
        Operation::DeleteIpRoute,
        Operation::ListHostnameRoutes,
        Operation::CreateHostnameRoute,
        Operation::GetHostnameRoute,
        Operation::UpdateHostnameRoute,
        Operation::DeleteHostnameRoute,
    ];

    /// The Zero Trust Access operations, whose schema is a separate subset
    /// (`tests/data/cloudflare-openapi-access-subset.json`).
    pub fn is_access(&self) -> bool {
        use Operation::*;
        matches!(
            self,
            GetAccessOrganization
                | ListAccessApps
                | CreateAccessApp
                | GetAccessApp
                | UpdateAccessApp
                | DeleteAccessApp
                | ListAccessPolicies
                | CreateAccessPolicy
                | GetAccessPolicy
                | UpdateAccessPolicy
                | DeleteAccessPolicy
        )
    }

    /// The edge certificate operations, whose schema is a separate subset
    /// (`tests/data/cloudflare-openapi-certificates-subset.json`).
    pub fn is_certificates(&self) -> bool {
        matches!(self, Operation::ListCertificatePacks)
    }

    /// The virtual network and IP route operations, whose schema is a separate subset
    /// (`tests/data/cloudflare-openapi-networks-subset.json`).
    pub fn is_networks(&self) -> bool {
        use Operation::*;
        matches!(
            self,
            ListVirtualNetworks
                | CreateVirtualNetwork
                | UpdateVirtualNetwork
                | DeleteVirtualNetwork
                | ListIpRoutes
                | CreateIpRoute
                | UpdateIpRoute
                | DeleteIpRoute
        )
    }

    /// The hostname route operations, newer than the 2024 schema: theirs is written down from
    /// Cloudflare's generated SDKs (`tests/data/cloudflare-openapi-hostname-routes.json`).
    pub fn is_hostname_routes(&self) -> bool {
        use Operation::*;
        matches!(
            self,
            ListHostnameRoutes
                | CreateHostnameRoute
                | GetHostnameRoute
                | UpdateHostnameRoute
                | DeleteHostnameRoute
        )
    }

    /// The OpenAPI `operationId`; `None` for the account token verify, absent from the subset.
    /// The batch call is newer than the subset: its schema is `tests/data/cloudflare-dns-batch.json`.
    /// The Access operations ([`Operation::is_access`]) are in the Access subset, the edge
    /// certificate ones ([`Operation::is_certificates`]) in the certificates subset, the virtual
    /// network and IP route ones ([`Operation::is_networks`]) in the networks subset and the
    /// hostname route ones ([`Operation::is_hostname_routes`]) in their own document.
    pub fn operation_id(&self) -> Option<&'static str> {
        Some(match self {
            Operation::VerifyToken => "user-api-tokens-verify-token",
            Operation::VerifyAccountToken => return None,
            Operation::ListAccounts => "accounts-list-accounts",
            Operation::ListZones => "zones-get",
            Operation::GetZone => "zones-0-get",
            Operation::CreateTunnel => "cloudflare-tunnel-create-a-cloudflare-tunnel",
            Operation::ListTunnels => "cloudflare-tunnel-list-cloudflare-tunnels",
            Operation::GetTunnel => "cloudflare-tunnel-get-a-cloudflare-tunnel",
            Operation::DeleteTunnel => "cloudflare-tunnel-delete-a-cloudflare-tunnel",
            Operation::GetTunnelToken => "cloudflare-tunnel-get-a-cloudflare-tunnel-token",
            Operation::ListConnections => "cloudflare-tunnel-list-cloudflare-tunnel-connections",
            Operation::CleanupConnections => {
                "cloudflare-tunnel-clean-up-cloudflare-tunnel-connections"
            }
            Operation::GetConfiguration => "cloudflare-tunnel-configuration-get-configuration",
            Operation::PutConfiguration => "cloudflare-tunnel-configuration-put-configuration",
            Operation::ListDnsRecords => "dns-records-for-a-zone-list-dns-records",
            Operation::CreateDnsRecord => "dns-records-for-a-zone-create-dns-record",
            Operation::GetDnsRecord => "dns-records-for-a-zone-dns-record-details",
            Operation::UpdateDnsRecord => "dns-records-for-a-zone-update-dns-record",
            Operation::PatchDnsRecord => "dns-records-for-a-zone-patch-dns-record",
            Operation::DeleteDnsRecord => "dns-records-for-a-zone-delete-dns-record",
            Operation::BatchDnsRecords => "dns-records-for-a-zone-batch-dns-records",
            Operation::GetAccessOrganization => {
                "zero-trust-organization-get-your-zero-trust-organization"
            }
            Operation::ListAccessApps => "access-applications-list-access-applications",
            Operation::CreateAccessApp => "access-applications-add-an-application",
            Operation::GetAccessApp => "access-applications-get-an-access-application",
            Operation::UpdateAccessApp => "access-applications-update-an-access-application",
            Operation::DeleteAccessApp => "access-applications-delete-an-access-application",
            Operation::ListAccessPolicies => "access-policies-list-access-reusable-policies",
            Operation::CreateAccessPolicy => "access-policies-create-an-access-reusable-policy",
            Operation::GetAccessPolicy => "access-policies-get-an-access-reusable-policy",
            Operation::UpdateAccessPolicy => "access-policies-update-an-access-reusable-policy",
            Operation::DeleteAccessPolicy => "access-policies-delete-an-access-reusable-policy",
            Operation::ListCertificatePacks => "certificate-packs-list-certificate-packs",
            Operation::ListVirtualNetworks => "tunnel-virtual-network-list-virtual-networks",
            Operation::CreateVirtualNetwork => "tunnel-virtual-network-create-a-virtual-network",
            Operation::UpdateVirtualNetwork => "tunnel-virtual-network-update-a-virtual-network",
            Operation::DeleteVirtualNetwork => "tunnel-virtual-network-delete-a-virtual-network",
            Operation::ListIpRoutes => "tunnel-route-list-tunnel-routes",
            Operation::CreateIpRoute => "tunnel-route-create-a-tunnel-route",
            Operation::UpdateIpRoute => "tunnel-route-update-a-tunnel-route",
            Operation::DeleteIpRoute => "tunnel-route-delete-a-tunnel-route",
            Operation::ListHostnameRoutes => "zero-trust-networks-route-hostname-list",
            Operation::CreateHostnameRoute => "zero-trust-networks-route-hostname-create",
            Operation::GetHostnameRoute => "zero-trust-networks-route-hostname-get",
            Operation::UpdateHostnameRoute => "zero-trust-networks-route-hostname-update",
            Operation::DeleteHostnameRoute => "zero-trust-networks-route-hostname-delete",
        })
    }

    /// HTTP method of the operation.
    pub fn method(&self) -> http::Method {
        use Operation::*;
        match self {
            CreateTunnel | CreateDnsRecord | BatchDnsRecords | CreateAccessApp
            | CreateAccessPolicy | CreateVirtualNetwork | CreateIpRoute | CreateHostnameRoute => {
                http::Method::POST
            }
            DeleteTunnel | CleanupConnections | DeleteDnsRecord | DeleteAccessApp
            | DeleteAccessPolicy | DeleteVirtualNetwork | DeleteIpRoute | DeleteHostnameRoute => {
                http::Method::DELETE
            }
            PutConfiguration | UpdateDnsRecord | UpdateAccessApp | UpdateAccessPolicy => {
                http::Method::PUT
            }
            PatchDnsRecord | UpdateVirtualNetwork | UpdateIpRoute | UpdateHostnameRoute => {
                http::Method::PATCH
            }
            _ => http::Method::GET,
        }
    }

    /// Path template relative to the API base, in OpenAPI `{param}` syntax (also axum's).
    pub(crate) fn path_template(&self) -> &'static str {
        use Operation::*;
        match self {
            VerifyToken => "/user/tokens/verify",
            VerifyAccountToken => "/accounts/{account_id}/tokens/verify",
            ListAccounts => "/accounts",
            ListZones => "/zones",
            GetZone => "/zones/{zone_id}",
            CreateTunnel | ListTunnels => "/accounts/{account_id}/cfd_tunnel",
            GetTunnel | DeleteTunnel => "/accounts/{account_id}/cfd_tunnel/{tunnel_id}",
            GetTunnelToken => "/accounts/{account_id}/cfd_tunnel/{tunnel_id}/token",
            ListConnections | CleanupConnections => {
                "/accounts/{account_id}/cfd_tunnel/{tunnel_id}/connections"
            }
            GetConfiguration | PutConfiguration => {
                "/accounts/{account_id}/cfd_tunnel/{tunnel_id}/configurations"
            }
            ListDnsRecords | CreateDnsRecord => "/zones/{zone_id}/dns_records",
            BatchDnsRecords => "/zones/{zone_id}/dns_records/batch",
            GetDnsRecord | UpdateDnsRecord | PatchDnsRecord | DeleteDnsRecord => {
                "/zones/{zone_id}/dns_records/{dns_record_id}"
            }
            GetAccessOrganization => "/accounts/{account_id}/access/organizations",
            ListAccessApps | CreateAccessApp => "/accounts/{account_id}/access/apps",
            GetAccessApp | UpdateAccessApp | DeleteAccessApp => {
                "/accounts/{account_id}/access/apps/{app_id}"
            }
            ListAccessPolicies | CreateAccessPolicy => "/accounts/{account_id}/access/policies",
            GetAccessPolicy | UpdateAccessPolicy | DeleteAccessPolicy => {
                "/accounts/{account_id}/access/policies/{policy_id}"
            }
            ListCertificatePacks => "/zones/{zone_id}/ssl/certificate_packs",
            ListVirtualNetworks | CreateVirtualNetwork => {
                "/accounts/{account_id}/teamnet/virtual_networks"
            }
            UpdateVirtualNetwork | DeleteVirtualNetwork => {
                "/accounts/{account_id}/teamnet/virtual_networks/{virtual_network_id}"
            }
            ListIpRoutes | CreateIpRoute => "/accounts/{account_id}/teamnet/routes",
            UpdateIpRoute | DeleteIpRoute => "/accounts/{account_id}/teamnet/routes/{route_id}",
            ListHostnameRoutes | CreateHostnameRoute => {
                "/accounts/{account_id}/zerotrust/routes/hostname"
            }
            GetHostnameRoute | UpdateHostnameRoute | DeleteHostnameRoute => {
                "/accounts/{account_id}/zerotrust/routes/hostname/{hostname_route_id}"
            }
        }
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}
