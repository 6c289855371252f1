//! Each rule of a VirtualNetwork: a refused case and an accepted neighbour.
use std::sync::Arc;

use serde_json::{Value, json};

use super::{ONE_SOURCE, validate};
use crate::rules::view::AdmissionView;
use cftunnel_types::{VirtualNetwork, VirtualNetworkSpec};

const ACCOUNT: &str = "0123456789abcdef0123456789abcdef";

/// A spec in [`ACCOUNT`] with the API Secret `cloudflare`, plus `fields`.
fn spec(fields: Value) -> VirtualNetworkSpec {
    let mut value = json!({"cloudflare": {"accountId": ACCOUNT, "secret": "cloudflare"}});
    if let (Some(map), Some(extra)) = (value.as_object_mut(), fields.as_object()) {
        map.extend(extra.clone());
    }
    serde_json::from_value(value).unwrap_or_else(|e| panic!("spec: {e}"))
}

fn refusals(spec: &VirtualNetworkSpec, view: &AdmissionView) -> Vec<String> {
    validate(spec, "staging", view)
        .violations
        .iter()
        .map(|v| v.message().to_string())
        .collect()
}

fn no_refusal(spec: &VirtualNetworkSpec, view: &AdmissionView) {
    assert_eq!(refusals(spec, view), Vec::<String>::new());
}

#[test]
fn exactly_one_of_name_and_existing_with_the_crds_message() {
    let view = AdmissionView::default();
    for both_or_neither in [
        spec(json!({"name": "staging", "existing": {"name": "prod"}})),
        spec(json!({})),
    ] {
        assert_eq!(refusals(&both_or_neither, &view), [ONE_SOURCE]);
    }
    no_refusal(&spec(json!({"name": "staging"})), &view);
    no_refusal(&spec(json!({"existing": {"name": "prod"}})), &view);
    // The CEL rule the API server runs first says the same.
    let crds = cftunnel_types::crds::all(&cftunnel_types::crds::ConversionService::default());
    let crd = crds
        .iter()
        .find(|c| c.spec.names.kind == "VirtualNetwork")
        .map(|c| serde_json::to_value(c).unwrap_or_else(|e| panic!("crd: {e}")))
        .unwrap_or_else(|| panic!("no VirtualNetwork CRD"));
    let message = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["x-kubernetes-validations"]
        [0]["message"];
    assert_eq!(message, ONE_SOURCE);
}

#[test]
fn a_blank_name_is_refused() {
    let view = AdmissionView::default();
    assert_eq!(
        refusals(&spec(json!({"name": "  "})), &view),
        ["spec.name: must not be blank; give the name of the network to create"]
    );
    no_refusal(&spec(json!({"name": "staging eu"})), &view);
}

#[test]
fn an_existing_network_is_named_by_a_uuid_or_a_name() {
    let view = AdmissionView::default();
    assert_eq!(
        refusals(&spec(json!({"existing": {}})), &view),
        [
            "spec.existing: names no network; give its id (as the Zero Trust dashboard shows it) or its name"
        ]
    );
    assert_eq!(
        refusals(&spec(json!({"existing": {"id": "prod"}})), &view),
        [
            "spec.existing.id: \"prod\" is not a virtual network id (a UUID such as 5f8e0a1c-2b3d-4e5f-8a9b-0c1d2e3f4a5b); copy it from the dashboard, or give spec.existing.name instead"
        ]
    );
    no_refusal(
        &spec(json!({"existing": {"id": "5f8e0a1c-2b3d-4e5f-8a9b-0c1d2e3f4a5b"}})),
        &view,
    );
}

#[test]
fn the_account_id_and_the_secret_name_are_well_formed() {
    let view = AdmissionView::default();
    let with = |account: &str, secret: &str| {
        spec(json!({"name": "staging", "cloudflare": {"accountId": account, "secret": secret}}))
    };
    assert_eq!(
        refusals(&with("0123", "Cloudflare_Secrets"), &view),
        [
            "spec.cloudflare.accountId: \"0123\" is not an account id (32 hexadecimal characters); copy it from the dashboard URL",
            "spec.cloudflare.secret: \"Cloudflare_Secrets\" is not a valid Secret name; use lowercase letters, digits, '-' and '.'",
        ]
    );
    no_refusal(
        &with(&ACCOUNT.to_ascii_uppercase(), "cloudflare-secrets"),
        &view,
    );
}

fn stored(name: &str, spec: VirtualNetworkSpec) -> Arc<VirtualNetwork> {
    Arc::new(VirtualNetwork::new(name, spec))
}

#[test]
fn a_second_network_of_a_name_in_one_account_is_refused_naming_the_first() {
    let other = "fedcba9876543210fedcba9876543210";
    let mut view = AdmissionView::default();
    view.virtual_networks = vec![
        stored(
            "staging-b",
            spec(
                json!({"name": "staging", "cloudflare": {"accountId": other, "secret": "cloudflare"}}),
            ),
        ),
        // Itself, as an UPDATE sees it.
        stored("staging", spec(json!({"name": "staging"}))),
    ];
    no_refusal(&spec(json!({"name": "staging"})), &view);
    let mut going = VirtualNetwork::new("old", spec(json!({"name": "staging"})));
    going.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        jiff::Timestamp::UNIX_EPOCH,
    ));
    view.virtual_networks.push(Arc::new(going));
    no_refusal(&spec(json!({"name": "staging"})), &view);
    view.virtual_networks
        .push(stored("first", spec(json!({"name": "staging"}))));
    assert_eq!(
        refusals(&spec(json!({"name": "staging"})), &view),
        [format!(
            "spec.name: \"staging\" is already the name of VirtualNetwork first in account {ACCOUNT}: an account holds one network of a name; choose another name, or name VirtualNetwork first in the NetworkRoutes' spec.virtualNetworkRef"
        )]
    );
    no_refusal(&spec(json!({"name": "staging-2"})), &view);
}
