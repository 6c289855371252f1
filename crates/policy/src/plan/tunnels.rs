//! Each tunnel's ingress rules as the renderer writes them into config.yaml (and into the
//! remote configuration), with the Access guard's protections applied.
use std::collections::BTreeMap;

use super::input::PlanTunnel;
use super::output::{IngressRulePlan, ProtectionPlan, TunnelPlan};
use crate::access::AccessGuard;
use crate::render::config::ingress_rules;
use crate::render::protection::{Protection, protect};
use crate::render::{OwnerIdentity, TunnelCredentials, TunnelInput};
use crate::routes::RouteTable;

/// Stands in for what only the cluster's Secrets hold: the ingress rules never read it.
const REDACTED: &str = "REDACTED";

/// What `tunnel` renders from `table` under `guard`.
pub(super) fn tunnel_plan(
    tunnel: &PlanTunnel,
    table: &RouteTable,
    guard: &AccessGuard,
) -> TunnelPlan {
    let protected = guard.of_tunnel(&tunnel.identity);
    let routes = protect(&table.routes_of(&tunnel.identity), &protected);
    let tunnel_id = tunnel.tunnel_id.clone().unwrap_or_default();
    let input = TunnelInput {
        identity: OwnerIdentity {
            kind: tunnel.identity.kind,
            namespace: tunnel.identity.namespace.clone(),
            name: tunnel.identity.name.clone(),
            uid: String::new(),
        },
        spec: tunnel.spec.clone(),
        tunnel_id: tunnel_id.clone(),
        account_tag: String::new(),
        tunnel_name: tunnel.tunnel_name.clone(),
        domain: tunnel.spec.cloudflare.domain.clone(),
        credentials: TunnelCredentials {
            account_tag: String::new(),
            secret_b64: REDACTED.to_string(),
            tunnel_id,
        },
        origin_ca_pem: None,
        routes,
    };
    let mut plan = TunnelPlan {
        tunnel_id: tunnel.tunnel_id.clone().filter(|id| !id.is_empty()),
        protection: protections(&protected),
        ..TunnelPlan::default()
    };
    match ingress_rules(&input) {
        Ok((top, rules)) => {
            plan.origin_request = top;
            plan.ingress = rules
                .into_iter()
                .map(|r| IngressRulePlan {
                    hostname: r.hostname,
                    path: r.path,
                    service: r.service,
                    origin_request: r.origin_request,
                })
                .collect();
        }
        Err(e) => plan.render_error = Some(e.to_string()),
    }
    plan
}

fn protections(protected: &BTreeMap<String, Protection>) -> BTreeMap<String, ProtectionPlan> {
    protected
        .iter()
        .map(|(hostname, p)| {
            let plan = match p {
                Protection::Closed { why } => ProtectionPlan::Closed { why: why.clone() },
                Protection::Open { team, aud } => ProtectionPlan::Open {
                    team: team.clone(),
                    aud: aud.clone(),
                },
            };
            (hostname.clone(), plan)
        })
        .collect()
}
