//! AccessPolicies through `kubectl` on a real API server: a policy reaching into another
//! namespace is refused by the webhook, one that lets nobody in by the CRD's CEL rule, both with
//! cftunnel's messages; a good one is stored.
use super::{apply_until_refused, env, namespace};
use crate::common::kubectl;
use cftunnel_types::cel::ACCESS_POLICY_NOBODY_ALLOWED;

fn policy(name: &str, spec: &str) -> String {
    format!(
        "apiVersion: networking.cfargotunnel.com/v1alpha2\nkind: AccessPolicy\nmetadata:\n  name: {name}\nspec:\n{spec}"
    )
}

const ALLOW: &str = "  allow:\n    emails: [alice@example.com]\n";

#[tokio::test]
async fn access_policies_are_refused_with_their_fault_and_good_ones_stored() {
    let env = env().await;
    let ns = namespace(&env, "adm-access", true).await;
    let across = policy(
        "across",
        &format!(
            "  targetRefs:\n    - {{group: gateway.networking.k8s.io, kind: HTTPRoute, name: shop, namespace: payments}}\n{ALLOW}"
        ),
    );
    let expected = "spec.targetRefs[0].namespace: an AccessPolicy protects objects of its own namespace only; create the AccessPolicy in namespace payments";
    let printed = apply_until_refused(&env, &ns, &across, expected).await;
    assert!(printed.contains("denied the request"), "{printed}");
    let (ok, printed) = kubectl(
        env.plane,
        &["create", "--namespace", &ns, "-f", "-"],
        &across,
    );
    assert!(!ok && printed.contains(expected), "{printed}");

    let nobody = policy(
        "nobody",
        "  targetRefs:\n    - {group: \"\", kind: Service, name: api}\n  allow: {emails: []}\n  policies: []\n",
    );
    for verb in ["create", "apply"] {
        let (ok, printed) = kubectl(env.plane, &[verb, "--namespace", &ns, "-f", "-"], &nobody);
        assert!(!ok, "{verb}: {printed}");
        assert!(
            printed.contains(ACCESS_POLICY_NOBODY_ALLOWED),
            "{verb}: {printed}"
        );
    }

    let good = policy(
        "staff",
        &format!(
            "  targetRefs:\n    - {{group: networking.cfargotunnel.com, kind: TunnelBinding, name: web}}\n    - {{group: gateway.networking.k8s.io, kind: HTTPRoute, name: shop, namespace: {ns}}}\n{ALLOW}  sessionDuration: 24h\n"
        ),
    );
    let (ok, printed) = kubectl(env.plane, &["create", "--namespace", &ns, "-f", "-"], &good);
    assert!(ok, "{printed}");
    let (_, listed) = kubectl(
        env.plane,
        &["get", "accesspolicies", "--namespace", &ns, "-o", "name"],
        "",
    );
    assert!(listed.contains("staff"), "{listed}");
}
