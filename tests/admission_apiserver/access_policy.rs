//! AccessPolicies through `kubectl` on a real API server: a policy reaching into another
//! namespace is refused by the webhook, one that lets nobody in by the CRD's CEL rule, both with
//! cftunnel's messages; a good one is created as written, and a GRPCRoute target is admitted
//! with the webhook's warning.
use super::{apply, apply_until_refused, env, namespace};
use crate::common::{get_json, kubectl};
use cftunnel_types::cel::ACCESS_POLICY_NOBODY_ALLOWED;

fn policy(name: &str, spec: &str) -> String {
    format!(
        "apiVersion: networking.cfargotunnel.com/v1alpha2\nkind: AccessPolicy\nmetadata:\n  name: {name}\nspec:\n{spec}"
    )
}

const ALLOW: &str = "  allow:\n    emails: [alice@example.com]\n";

#[tokio::test]
async fn access_policies_across_namespaces_or_letting_nobody_in_are_refused_and_good_ones_created()
{
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
    assert!(!printed.contains("Warning"), "{printed}");
    let stored = get_json(env.plane, &ns, "accesspolicy/staff");
    assert_eq!(stored["spec"]["targetRefs"][1]["namespace"], ns.as_str());
    assert_eq!(stored["spec"]["allow"]["emails"][0], "alice@example.com");
    assert_eq!(stored["spec"]["allow"]["anyValidServiceToken"], false);
    assert_eq!(stored["spec"]["sessionDuration"], "24h");

    let grpc = policy(
        "rpc",
        &format!(
            "  targetRefs:\n    - {{group: gateway.networking.k8s.io, kind: GRPCRoute, name: rpc}}\n{ALLOW}"
        ),
    );
    let (ok, printed) = apply(env.plane, &ns, &grpc);
    assert!(ok, "{printed}");
    assert!(
        printed.contains("Warning: spec.targetRefs[0]: Cloudflare Access does not apply to gRPC: the GRPCRoute target will be refused and left unprotected"),
        "{printed}"
    );
}
