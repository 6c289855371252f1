//! NetworkRoutes and VirtualNetworks through `kubectl` on a real API server: a CIDR another
//! namespace routes, a range overlapping one routed in the same network (in any namespace), a
//! private hostname another namespace routes and a CIDR with host bits set are refused with
//! the owner or the canonical range named; the same CIDR in two VirtualNetworks is stored, and
//! a second network of one name in an account is refused naming the first.
use super::{apply_until_refused, env, namespace};
use crate::common::{apply, kubectl};

const ACCOUNT: &str = "0123456789abcdef0123456789abcdef";

/// A NetworkRoute through the Tunnel `edge` of its namespace (not created: a warning only).
fn route(name: &str, fields: &str) -> String {
    format!(
        "apiVersion: networking.cfargotunnel.com/v1alpha2\nkind: NetworkRoute\nmetadata:\n  name: {name}\nspec:\n  tunnelRef: {{name: edge}}\n{fields}"
    )
}

fn network(name: &str, network_name: &str) -> String {
    format!(
        "apiVersion: networking.cfargotunnel.com/v1alpha2\nkind: VirtualNetwork\nmetadata:\n  name: {name}\nspec:\n  name: {network_name}\n  cloudflare: {{accountId: {ACCOUNT}, secret: cloudflare}}\n"
    )
}

/// `kubectl create`, which must succeed.
fn create(env: &super::Env, ns: &str, manifest: &str) {
    let (ok, printed) = kubectl(
        env.plane,
        &["create", "--namespace", ns, "-f", "-"],
        manifest,
    );
    assert!(ok, "{printed}");
}

#[tokio::test]
async fn network_routes_claiming_what_another_routes_are_refused_naming_it() {
    let env = env().await;
    let owner = namespace(&env, "adm-net-owner", true).await;
    let other = namespace(&env, "adm-net-other", true).await;
    let hostname = format!("db.{owner}.internal");
    create(
        &env,
        &owner,
        &route(
            "lan",
            &format!("  cidrs: [10.61.0.0/24]\n  hostnames: [\"{hostname}\"]\n"),
        ),
    );

    // The same CIDR in another namespace, once the webhook's caches hold the first.
    let same = route("lan", "  cidrs: [10.61.0.0/24]\n");
    let printed = apply_until_refused(
        &env,
        &other,
        &same,
        &format!("spec.cidrs[0]: 10.61.0.0/24 is already routed by NetworkRoute {owner}/lan in the account's default network; remove it there first"),
    )
    .await;
    assert!(
        printed.contains(
            "admission webhook \"networkroutes.validate.cfargotunnel.com\" denied the request"
        ),
        "{printed}"
    );

    // An overlapping range, here or in the owner's own namespace.
    for ns in [&other, &owner] {
        let (ok, printed) = kubectl(
            env.plane,
            &["create", "--namespace", ns, "-f", "-"],
            &route("wide", "  cidrs: [10.61.0.0/16]\n"),
        );
        assert!(!ok, "{printed}");
        assert!(
            printed.contains(&format!("spec.cidrs[0]: 10.61.0.0/16 overlaps 10.61.0.0/24, routed by NetworkRoute {owner}/lan in the account's default network: Cloudflare routes by longest prefix, so 10.61.0.0/24 would take the traffic of its addresses from the route of 10.61.0.0/16")),
            "{printed}"
        );
    }

    // The hostname, written otherwise, in another namespace.
    let (ok, printed) = kubectl(
        env.plane,
        &["create", "--namespace", &other, "-f", "-"],
        &route(
            "names",
            &format!("  hostnames: [\"*.{}.\"]\n", hostname.to_ascii_uppercase()),
        ),
    );
    assert!(!ok, "{printed}");
    assert!(
        printed.contains(&format!("spec.hostnames[0]: {hostname} is already routed by NetworkRoute {owner}/lan: a private hostname is routed once per account")),
        "{printed}"
    );

    // Host bits set: the canonical range is named.
    let (ok, printed) = apply(
        env.plane,
        &other,
        &route("hostbits", "  cidrs: [10.62.0.7/24]\n"),
    );
    assert!(!ok, "{printed}");
    assert!(
        printed.contains("spec.cidrs[0]: 10.62.0.7/24 has host bits set; use 10.62.0.0/24"),
        "{printed}"
    );

    // Nothing of it was stored.
    let (_, listed) = kubectl(
        env.plane,
        &["get", "networkroutes", "--namespace", &other, "-o", "name"],
        "",
    );
    assert!(listed.trim().is_empty(), "{listed}");
}

#[tokio::test]
async fn one_cidr_is_routed_once_per_virtual_network() {
    let env = env().await;
    let first = namespace(&env, "adm-vnet-a", true).await;
    let second = namespace(&env, "adm-vnet-b", true).await;
    let (staging, testing) = (format!("staging-{first}"), format!("testing-{first}"));
    create(&env, "default", &network(&staging, &staging));
    create(&env, "default", &network(&testing, &testing));
    let in_network = |name: &str| {
        route(
            "lan",
            &format!("  virtualNetworkRef: {{name: {name}}}\n  cidrs: [10.63.0.0/24]\n"),
        )
    };
    create(&env, &first, &in_network(&staging));
    // The webhook's caches hold the first route once it refuses it in the same network ...
    apply_until_refused(
        &env,
        &second,
        &in_network(&staging),
        &format!("spec.cidrs[0]: 10.63.0.0/24 is already routed by NetworkRoute {first}/lan in VirtualNetwork {staging}"),
    )
    .await;
    // ... and store the same range in another network.
    create(&env, &second, &in_network(&testing));
    let (_, listed) = kubectl(
        env.plane,
        &["get", "networkroutes", "--namespace", &second, "-o", "name"],
        "",
    );
    assert!(listed.contains("lan"), "{listed}");

    // A second network of the name in the account.
    let printed = apply_until_refused(
        &env,
        "default",
        &network(&format!("again-{first}"), &staging),
        &format!("spec.name: \"{staging}\" is already the name of VirtualNetwork {staging} in account {ACCOUNT}"),
    )
    .await;
    assert!(
        printed.contains(
            "admission webhook \"virtualnetworks.validate.cfargotunnel.com\" denied the request"
        ),
        "{printed}"
    );
}
