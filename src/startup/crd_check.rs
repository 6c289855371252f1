//! Are the installed CRDs the ones this cftunnel ships? (docs/design.md §7.2.) A Helm upgrade never
//! touches CRDs in a chart's `crds/` folder and the Go operator's CRDs lack `status.conditions`
//! and point conversion at its own Service, so a stale CRD is common and worth a loud log line.
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps,
};
use kube::{Api, Client};

use cftunnel_types::crds::{self, ConversionService};

/// What to do about any problem found.
pub(crate) const FIX: &str = "apply the CRDs of this cftunnel release (kubectl apply -k manifests/, or helm upgrade of the cftunnel chart, whose CRDs are templates)";

/// cert-manager's CA injector overwrites `caBundle` of an object carrying this annotation.
pub(crate) const CERT_MANAGER_INJECT: &str = "cert-manager.io/inject-ca-from";

/// The problems of the installed `live` CRD compared with the `shipped` one (whose conversion
/// calls `service`); empty when current.
pub fn problems(
    shipped: &CustomResourceDefinition,
    live: Option<&CustomResourceDefinition>,
    service: &ConversionService,
) -> Vec<String> {
    let Some(live) = live else {
        return vec!["it is not installed".to_owned()];
    };
    let mut found = Vec::new();
    for version in &shipped.spec.versions {
        let Some(installed) = live.spec.versions.iter().find(|v| v.name == version.name) else {
            found.push(format!("version {} is missing", version.name));
            continue;
        };
        if installed.served != version.served {
            found.push(format!(
                "version {} has served={}, expected {}",
                version.name, installed.served, version.served
            ));
        }
        if version.storage && !installed.storage {
            found.push(format!("the storage version is not {}", version.name));
        }
        if has_conditions(
            version
                .schema
                .as_ref()
                .and_then(|s| s.open_api_v3_schema.as_ref()),
        ) && !has_conditions(
            installed
                .schema
                .as_ref()
                .and_then(|s| s.open_api_v3_schema.as_ref()),
        ) {
            found.push(format!(
                "the {} schema has no status.conditions",
                version.name
            ));
        }
    }
    if let Some(expected) = conversion_service(shipped) {
        match conversion_service(live) {
            Some(actual) if actual == expected => {}
            Some(actual) => found.push(format!(
                "conversion calls the Service {actual}, not cftunnel's {expected}"
            )),
            None => found.push(format!(
                "conversion does not call cftunnel's Service {expected}"
            )),
        }
    }
    // The Go operator's CRDs name its own Certificate; kept by `kubectl apply`, the annotation
    // would make cert-manager replace cftunnel's CA with the Go operator's.
    let own = format!("{}/{}", service.namespace, service.name);
    if let Some(source) = live
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(CERT_MANAGER_INJECT))
        .filter(|source| **source != own)
    {
        found.push(format!(
            "the annotation {CERT_MANAGER_INJECT}: {source} makes cert-manager inject another CA; remove it (kubectl annotate crd {} {CERT_MANAGER_INJECT}-)",
            live.metadata.name.as_deref().unwrap_or_default()
        ));
    }
    found
}

/// Reads every CRD of the group and logs, per stale CRD, one error line naming each problem
/// and the fix. Returns the number of stale CRDs. Never fails: a check that cannot read the
/// CRDs says so and lets cftunnel start.
pub(crate) async fn check_installed_crds(client: &Client, service: &ConversionService) -> usize {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut stale = 0;
    for shipped in crds::all(service) {
        let name = shipped.metadata.name.clone().unwrap_or_default();
        let live = match api.get_opt(&name).await {
            Ok(live) => live,
            Err(error) => {
                tracing::warn!(crd = %name, %error, "cannot read the CRD to check it is current");
                continue;
            }
        };
        let found = problems(&shipped, live.as_ref(), service);
        if !found.is_empty() {
            stale += 1;
            tracing::error!(
                crd = %name,
                "CRD {name} is not current: {}; {FIX}",
                found.join("; ")
            );
        }
    }
    if stale == 0 {
        tracing::info!("the installed CRDs are current");
    }
    stale
}

fn has_conditions(schema: Option<&JSONSchemaProps>) -> bool {
    schema
        .and_then(|s| s.properties.as_ref())
        .and_then(|p| p.get("status"))
        .and_then(|s| s.properties.as_ref())
        .is_some_and(|p| p.contains_key("conditions"))
}

/// `namespace/name:port/path` of the conversion webhook Service, if conversion calls one.
fn conversion_service(crd: &CustomResourceDefinition) -> Option<String> {
    let conversion = crd.spec.conversion.as_ref()?;
    if conversion.strategy != "Webhook" {
        return None;
    }
    let service = conversion
        .webhook
        .as_ref()?
        .client_config
        .as_ref()?
        .service
        .as_ref()?;
    Some(format!(
        "{}/{}:{}{}",
        service.namespace,
        service.name,
        service.port.unwrap_or(443),
        service.path.as_deref().unwrap_or("/")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service() -> ConversionService {
        ConversionService::default()
    }

    fn shipped_tunnel() -> CustomResourceDefinition {
        crds::tunnel(&service())
    }

    #[test]
    fn the_shipped_crds_are_current() {
        for crd in crds::all(&service()) {
            assert_eq!(problems(&crd, Some(&crd), &service()), Vec::<String>::new());
        }
    }

    #[test]
    fn a_missing_crd_is_reported() {
        assert_eq!(
            problems(&shipped_tunnel(), None, &service()),
            vec!["it is not installed".to_owned()]
        );
    }

    #[test]
    fn a_go_operator_style_crd_names_each_difference() {
        let mut live = shipped_tunnel();
        for version in &mut live.spec.versions {
            if let Some(status) = version
                .schema
                .as_mut()
                .and_then(|s| s.open_api_v3_schema.as_mut())
                .and_then(|s| s.properties.as_mut())
                .and_then(|p| p.get_mut("status"))
                .and_then(|s| s.properties.as_mut())
            {
                status.remove("conditions");
            }
        }
        let other = ConversionService {
            namespace: "cloudflare-operator-system".into(),
            name: "cloudflare-operator-webhook-service".into(),
            ..service()
        };
        live.spec.conversion = crds::tunnel(&other).spec.conversion;
        live.metadata.annotations = Some(
            [(
                CERT_MANAGER_INJECT.to_owned(),
                "cloudflare-operator-system/cloudflare-operator-serving-cert".to_owned(),
            )]
            .into(),
        );
        assert_eq!(
            problems(&shipped_tunnel(), Some(&live), &service()),
            vec![
                "the v1alpha2 schema has no status.conditions".to_owned(),
                "the v1alpha1 schema has no status.conditions".to_owned(),
                "conversion calls the Service cloudflare-operator-system/cloudflare-operator-webhook-service:443/convert, not cftunnel's cftunnel-system/cftunnel-webhook:443/convert".to_owned(),
                "the annotation cert-manager.io/inject-ca-from: cloudflare-operator-system/cloudflare-operator-serving-cert makes cert-manager inject another CA; remove it (kubectl annotate crd tunnels.networking.cfargotunnel.com cert-manager.io/inject-ca-from-)".to_owned(),
            ]
        );
    }

    #[test]
    fn cftunnels_own_cert_manager_annotation_is_fine() {
        let mut live = shipped_tunnel();
        live.metadata.annotations = Some(
            [(
                CERT_MANAGER_INJECT.to_owned(),
                "cftunnel-system/cftunnel-webhook".to_owned(),
            )]
            .into(),
        );
        assert_eq!(
            problems(&shipped_tunnel(), Some(&live), &service()),
            Vec::<String>::new()
        );
    }

    #[test]
    fn wrong_storage_and_no_conversion_are_reported() {
        let mut live = shipped_tunnel();
        for version in &mut live.spec.versions {
            version.storage = version.name == "v1alpha1";
        }
        live.spec.conversion = None;
        let mut found = problems(&shipped_tunnel(), Some(&live), &service());
        found.sort();
        assert_eq!(
            found,
            vec![
                "conversion does not call cftunnel's Service cftunnel-system/cftunnel-webhook:443/convert".to_owned(),
                "the storage version is not v1alpha2".to_owned(),
            ]
        );
        live.spec.versions.retain(|v| v.name != "v1alpha2");
        assert!(
            problems(&shipped_tunnel(), Some(&live), &service())
                .contains(&"version v1alpha2 is missing".to_owned())
        );
    }
}
