//! The example's AccessPolicy: waited until its Access application is in place, and summed up
//! with what the simulated account holds.
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{Api, Client};

use cftunnel_sim::Simulator;
use cftunnel_testenv::{TestEnvError, poll_until};
use cftunnel_types::{AccessPolicy, AccessPolicyStatus};

/// `examples/31-access-policy.yaml`.
const NAMESPACE: &str = "demo";
const NAME: &str = "staff";

fn condition<'c>(status: &'c AccessPolicyStatus, type_: &str) -> Option<&'c Condition> {
    status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == type_)
}

/// Waits until the policy is Programmed (its applications exist on Cloudflare); its status then.
pub(crate) async fn wait_programmed(client: &Client) -> Result<AccessPolicyStatus, TestEnvError> {
    let api: Api<AccessPolicy> = Api::namespaced(client.clone(), NAMESPACE);
    poll_until(
        "AccessPolicy demo/staff to be Programmed",
        Duration::from_secs(120),
        Duration::from_millis(500),
        || async {
            let status = api.get_opt(NAME).await.ok().flatten()?.status?;
            condition(&status, "Programmed")
                .is_some_and(|c| c.status == "True")
                .then_some(status)
        },
    )
    .await
}

/// The policy's conditions and targets, then the Access applications of the simulated account.
pub(crate) fn print(sim: &Simulator, status: Result<AccessPolicyStatus, TestEnvError>) {
    match status {
        Ok(status) => {
            let told = |type_: &str| match condition(&status, type_) {
                Some(c) => format!("{type_} {} ({})", c.status, c.reason),
                None => format!("{type_} not set"),
            };
            println!(
                "  AccessPolicy {NAMESPACE}/{NAME}: {} · {}",
                told("Accepted"),
                told("Programmed")
            );
            for target in status.targets.iter().flatten() {
                for protected in &target.hostnames {
                    println!(
                        "    {} {}: {} behind Access application {} (team {}, aud {}…)",
                        target.kind,
                        target.name,
                        protected.hostname,
                        protected.application_id,
                        protected.team,
                        protected.aud.get(..12).unwrap_or(&protected.aud)
                    );
                }
                if let Some(reason) = &target.reason {
                    println!(
                        "    {} {}: not protected: {reason} {}",
                        target.kind,
                        target.name,
                        target.message.as_deref().unwrap_or_default()
                    );
                }
            }
        }
        Err(e) => println!("  AccessPolicy {NAMESPACE}/{NAME}: not Programmed ({e})"),
    }
    let apps = sim.access_apps();
    println!("  Access applications (simulated): {}", apps.len());
    for app in apps {
        println!(
            "    {} · {} · session {} · policies linked: {}",
            app.domain,
            app.name,
            app.session_duration,
            app.policies.len()
        );
    }
}
