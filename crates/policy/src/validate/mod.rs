//! `cftunnel validate`: the admission rules of docs/design.md §2 run offline over manifests, for CI.
//!
//! All objects are judged together, as the webhook's view would hold them: tunnels given in
//! the input are known (domain, allowedRoutes, originCaPool), Namespaces give their labels,
//! and bindings and labelled Services claim hostnames in input order, the earlier one owning;
//! NetworkRoutes claim CIDRs and private hostnames, and VirtualNetworks their names, the same
//! way (every VirtualNetwork of the input is known to the NetworkRoutes that name it).
//! Only CREATE rules run: UPDATE rules (immutability, ratcheting) need the stored object.
//! Beyond admission, the hostnames of the whole input are added up per tunnel domain against
//! what a Free zone holds (`zone_totals.rs`).
pub mod decode;
pub mod input;
mod model_judged;
#[cfg(test)]
mod network_tests;
pub mod report;
#[cfg(test)]
mod tests;
pub mod view;
pub mod world;
mod zone_totals;

use std::io::{Read, Write};

use crate::admission;
use crate::admission::tunnel::TunnelView;
use crate::routes::SourceKind;
use crate::rules::Verdict;
use cftunnel_types::TunnelIdentity;
use decode::{Decoded, GatewayObject, Outcome};
pub use input::{Document, InputError, read_or_report, read_sources};
pub use report::{Finding, ObjectRef, Report};

/// Namespace of namespaced objects that name none, as `kubectl apply` without `-n` would use.
pub const DEFAULT_NAMESPACE: &str = "default";
/// Exit code when the input cannot be read (1 is reserved for "violations found").
pub const EXIT_UNREADABLE: u8 = 2;

/// Judges every document: Tunnels and ClusterTunnels on their own, then bindings and labelled
/// Services in input order against the claims of the objects before them.
pub(crate) fn validate_documents(documents: &[Document], default_namespace: &str) -> Report {
    let outcomes: Vec<(&Document, Outcome)> = documents
        .iter()
        .map(|d| (d, decode::decode(d, default_namespace)))
        .collect();
    let mut view = view::base_view(outcomes.iter().filter_map(|(_, o)| match o {
        Outcome::Decoded(_, decoded) => Some(decoded.as_ref()),
        _ => None,
    }));
    // Services the rules ignore (no expose labels) are still backends the route model
    // resolves: an HTTPRoute's backend given in the same input is not "missing".
    let services = outcomes.iter().filter_map(|(document, o)| match o {
        Outcome::Ignored => decode::plain_service(document, default_namespace)?.ok(),
        _ => None,
    });
    let ingresses = model_judged::model_verdicts(
        outcomes.iter().filter_map(|(_, o)| match o {
            Outcome::Decoded(_, decoded) => Some(decoded.as_ref()),
            _ => None,
        }),
        services,
    );
    let mut zone_warnings =
        zone_totals::domain_warnings(outcomes.iter().filter_map(|(_, o)| match o {
            Outcome::Decoded(_, decoded) => Some(decoded.as_ref()),
            _ => None,
        }));
    let mut report = Report::default();
    let mut networks_judged = 0;
    for (document, outcome) in outcomes {
        let (object, verdict) = match outcome {
            Outcome::Ignored => continue,
            Outcome::Unreadable(object, violation) => (
                object,
                Verdict {
                    violations: vec![violation],
                    warnings: Vec::new(),
                },
            ),
            Outcome::Decoded(object, decoded) => {
                match judge(&decoded, &mut view, &ingresses, &mut networks_judged) {
                    Some(mut verdict) => {
                        if let Decoded::Tunnel(t) = decoded.as_ref() {
                            let identity = TunnelIdentity {
                                kind: t.kind,
                                namespace: t.namespace.clone(),
                                name: t.name.clone(),
                            };
                            verdict.warnings.extend(zone_warnings.remove(&identity));
                        }
                        (object, verdict)
                    }
                    None => continue,
                }
            }
        };
        report.judged += 1;
        if verdict.violations.is_empty() && verdict.warnings.is_empty() {
            continue;
        }
        report.findings.push(Finding {
            object,
            origin: document.origin.clone(),
            violations: verdict
                .violations
                .iter()
                .map(|v| v.message().to_string())
                .collect(),
            warnings: verdict.warnings,
        });
    }
    report
}

/// The CREATE verdict on one object; a binding or Service then adds its claims to the view.
/// The route model's verdicts on Ingresses and Gateway API routes, by (kind, namespace, name).
type ModelVerdicts = std::collections::BTreeMap<(SourceKind, String, String), Verdict>;

fn model_key(
    kind: SourceKind,
    metadata: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> (SourceKind, String, String) {
    (
        kind,
        metadata.namespace.clone().unwrap_or_default(),
        metadata.name.clone().unwrap_or_default(),
    )
}

/// Ingresses and Gateway API routes were judged all together by the route model
/// (`ingresses`); one not of cftunnel's classes is not judged. `networks_judged` counts the
/// VirtualNetworks judged so far: the view holds all of them, in input order.
fn judge(
    decoded: &Decoded,
    view: &mut crate::rules::AdmissionView,
    ingresses: &ModelVerdicts,
    networks_judged: &mut usize,
) -> Option<Verdict> {
    match decoded {
        Decoded::Tunnel(t) => Some(admission::tunnel::validate(TunnelView {
            name: &t.name,
            spec: &t.spec,
            status: t.status.as_ref(),
        })),
        Decoded::Binding { namespace, binding } => {
            let verdict = crate::rules::binding::validate(binding, namespace, view);
            let claims = view::binding_claims(binding, namespace, view);
            view.add_claims(claims);
            Some(verdict)
        }
        Decoded::Service { namespace, service } => {
            let verdict = crate::rules::service::validate(service, namespace, view);
            let claims = view::service_claims(service, namespace, view);
            view.add_claims(claims);
            Some(verdict)
        }
        Decoded::Access(fields) => Some(admission::access_tunnel::validate(fields)),
        Decoded::AccessPolicy {
            namespace,
            name,
            spec,
        } => {
            // Judged against the policies before it in the input, as the webhook judges a
            // policy against those stored.
            let mut verdict = crate::rules::access_policy::validate(spec, namespace);
            crate::rules::access_policy::warn_targets_named_elsewhere(
                spec,
                namespace,
                name,
                view.access_policies.iter().map(std::sync::Arc::as_ref),
                &mut verdict,
            );
            let mut policy = cftunnel_types::access_policy::AccessPolicy::new(name, spec.clone());
            policy.metadata.namespace = Some(namespace.clone());
            view.access_policies.push(std::sync::Arc::new(policy));
            Some(verdict)
        }
        Decoded::NetworkRoute { namespace, route } => {
            let name = route.metadata.name.as_deref().unwrap_or_default();
            let verdict = admission::network_route::validate(&route.spec, namespace, name, view);
            view.network_routes.push(std::sync::Arc::new(route.clone()));
            Some(verdict)
        }
        Decoded::VirtualNetwork(network) => {
            // Its name is taken only by the VirtualNetworks before it in the input.
            let mut before = crate::rules::AdmissionView::default();
            before.virtual_networks = view
                .virtual_networks
                .get(..*networks_judged)
                .unwrap_or_default()
                .to_vec();
            *networks_judged += 1;
            let name = network.metadata.name.as_deref().unwrap_or_default();
            Some(admission::virtual_network::validate(
                &network.spec,
                name,
                &before,
            ))
        }
        Decoded::Ingress { namespace, ingress } => {
            let name = ingress.metadata.name.clone().unwrap_or_default();
            ingresses
                .get(&(SourceKind::Ingress, namespace.clone(), name))
                .cloned()
        }
        Decoded::Gateway(GatewayObject::HTTPRoute(route)) => ingresses
            .get(&model_key(SourceKind::HTTPRoute, &route.metadata))
            .cloned(),
        Decoded::Gateway(GatewayObject::GRPCRoute(route)) => ingresses
            .get(&model_key(SourceKind::GRPCRoute, &route.metadata))
            .cloned(),
        Decoded::Namespace { .. } | Decoded::IngressClass(_) | Decoded::Gateway(_) => None,
    }
}

/// The whole command: read `sources`, judge, print violations on `out` and warnings and input
/// errors on `err`; returns the exit code (0 clean, 1 violations, 2 unreadable input).
pub fn run(
    sources: &[String],
    default_namespace: &str,
    stdin: &mut dyn Read,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> std::io::Result<u8> {
    let Some(documents) = read_or_report(sources, stdin, err)? else {
        return Ok(EXIT_UNREADABLE);
    };
    let report = validate_documents(&documents, default_namespace);
    report.print(out, err)?;
    Ok(report.exit_code())
}
