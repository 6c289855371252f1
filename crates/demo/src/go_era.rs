//! The Go-era manifest of `examples/80-go-era-tunnel.yaml`: applied as v1alpha1, read back here
//! as the API server serves it in v1alpha2 (through cftunnel's conversion webhook).
use kube::api::{ApiResource, DynamicObject};
use kube::{Api, Client};

use cftunnel_types::Tunnel;

const NAMESPACE: &str = "demo";
const NAME: &str = "legacy";

/// What the API server answers for the Tunnel at v1alpha2: its apiVersion, `spec.deployPatch`
/// and whether the v1alpha1 fields are gone from the spec.
pub(crate) async fn print(client: &Client) {
    let resource = ApiResource::erase::<Tunnel>(&());
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), NAMESPACE, &resource);
    let object = match api.get(NAME).await {
        Ok(object) => object,
        Err(e) => {
            println!("  Go-era Tunnel {NAMESPACE}/{NAME}: not readable at v1alpha2 ({e})");
            return;
        }
    };
    let api_version = object
        .types
        .as_ref()
        .map(|t| t.api_version.as_str())
        .unwrap_or("unknown");
    let spec = object.data.get("spec");
    let patch = spec
        .and_then(|s| s.get("deployPatch"))
        .and_then(|p| p.as_str())
        .unwrap_or_default();
    let leftovers: Vec<&str> = ["size", "image", "nodeSelectors", "tolerations"]
        .into_iter()
        .filter(|field| spec.and_then(|s| s.get(*field)).is_some())
        .collect();
    println!(
        "  Go-era Tunnel {NAMESPACE}/{NAME} (applied as networking.cfargotunnel.com/v1alpha1): accepted, served back as {api_version}"
    );
    println!("    spec.deployPatch: {}", patch.trim());
    if leftovers.is_empty() {
        println!(
            "    size and nodeSelectors moved into deployPatch; the v1alpha2 spec has neither"
        );
    } else {
        println!(
            "    v1alpha1 fields still in the v1alpha2 spec: {}",
            leftovers.join(", ")
        );
    }
}
