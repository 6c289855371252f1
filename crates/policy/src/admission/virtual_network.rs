//! The rules of a VirtualNetwork (docs/design.md §2.6): exactly one of `spec.name` and
//! `spec.existing` (also the CRD's CEL rule, with the same message), an existing network named
//! by its id or its name, a well-formed account id and Secret name, and a name no other
//! VirtualNetwork of the account takes.
use crate::rules::syntax::{is_dns_subdomain, is_hex32, is_uuid};
use crate::rules::view::AdmissionView;
use crate::rules::{Verdict, Violation};
use cftunnel_types::VirtualNetworkSpec;

/// The message of the CRD's CEL rule on `spec` (`crds::virtual_network`), which admission
/// gives too; the field path is part of it.
pub const ONE_SOURCE: &str =
    "set exactly one of spec.name (a network cftunnel creates) and spec.existing (one it adopts)";

/// All rules of the VirtualNetwork `name` against the view.
pub fn validate(spec: &VirtualNetworkSpec, name: &str, view: &AdmissionView) -> Verdict {
    let mut v = Verdict::default();
    if spec.name.is_some() == spec.existing.is_some() {
        v.violations.push(Violation::from_message(ONE_SOURCE));
    }
    if let Some(network) = spec.name.as_deref() {
        if network.trim().is_empty() {
            v.deny(
                "spec.name",
                "must not be blank; give the name of the network to create",
            );
        } else {
            check_name_free(spec, network, name, view, &mut v);
        }
    }
    if let Some(existing) = &spec.existing {
        let id = existing.id.as_deref().filter(|s| !s.trim().is_empty());
        let by_name = existing.name.as_deref().filter(|s| !s.trim().is_empty());
        match (id, by_name) {
            (None, None) => v.deny(
                "spec.existing",
                "names no network; give its id (as the Zero Trust dashboard shows it) or its name",
            ),
            (Some(id), _) if !is_uuid(id) => v.deny(
                "spec.existing.id",
                format!("{id:?} is not a virtual network id (a UUID such as 5f8e0a1c-2b3d-4e5f-8a9b-0c1d2e3f4a5b); copy it from the dashboard, or give spec.existing.name instead"),
            ),
            _ => {}
        }
    }
    let account = &spec.cloudflare;
    if !is_hex32(&account.account_id) {
        v.deny(
            "spec.cloudflare.accountId",
            format!("{:?} is not an account id (32 hexadecimal characters); copy it from the dashboard URL", account.account_id),
        );
    }
    if !is_dns_subdomain(&account.secret) {
        v.deny(
            "spec.cloudflare.secret",
            format!(
                "{:?} is not a valid Secret name; use lowercase letters, digits, '-' and '.'",
                account.secret
            ),
        );
    }
    v
}

/// Cloudflare holds one network of a name per account: a second VirtualNetwork making a
/// network of the same name in the same account is refused, naming the first. VirtualNetworks
/// being deleted are not counted.
fn check_name_free(
    spec: &VirtualNetworkSpec,
    network: &str,
    name: &str,
    view: &AdmissionView,
    v: &mut Verdict,
) {
    let account = spec.cloudflare.account_id.trim();
    let first = view.virtual_networks.iter().find(|other| {
        other.metadata.deletion_timestamp.is_none()
            && other.metadata.name.as_deref() != Some(name)
            && other.spec.name.as_deref() == Some(network)
            && other
                .spec
                .cloudflare
                .account_id
                .trim()
                .eq_ignore_ascii_case(account)
    });
    if let Some(first) = first {
        v.deny(
            "spec.name",
            format!(
                "{network:?} is already the name of VirtualNetwork {} in account {account}: an account holds one network of a name; choose another name, or name VirtualNetwork {} in the NetworkRoutes' spec.virtualNetworkRef",
                first.metadata.name.as_deref().unwrap_or_default(),
                first.metadata.name.as_deref().unwrap_or_default(),
            ),
        );
    }
}

#[cfg(test)]
#[path = "virtual_network_tests.rs"]
mod tests;
