//! NetworkRoutes and VirtualNetworks over a whole input: claims in input order, every
//! VirtualNetwork known to the routes that name it, unreadable ones reported.
use super::input::parse_text;
use super::{Report, validate_documents};

const ACCOUNT: &str = "0123456789abcdef0123456789abcdef";

fn route(namespace: &str, name: &str, fields: &str) -> String {
    format!(
        "apiVersion: networking.cfargotunnel.com/v1alpha2
kind: NetworkRoute
metadata: {{name: {name}, namespace: {namespace}}}
spec:
  tunnelRef: {{kind: ClusterTunnel, name: edge}}
{fields}"
    )
}

fn network(name: &str, network_name: &str) -> String {
    format!(
        "apiVersion: networking.cfargotunnel.com/v1alpha2
kind: VirtualNetwork
metadata: {{name: {name}}}
spec:
  name: {network_name}
  cloudflare: {{accountId: {ACCOUNT}, secret: cloudflare}}
"
    )
}

const EDGE: &str = "apiVersion: networking.cfargotunnel.com/v1alpha2
kind: ClusterTunnel
metadata: {name: edge}
spec:
  newTunnel: {name: edge}
  cloudflare: {domain: example.org, secret: cf, accountId: 0123456789abcdef0123456789abcdef}
";

fn report(docs: &[&str]) -> Report {
    let documents = parse_text("net.yaml", &docs.join("---\n"), false).expect("test YAML parses");
    validate_documents(&documents, "default")
}

#[test]
fn the_earlier_network_route_owns_a_cidr_and_a_hostname() {
    let blog = route(
        "blog",
        "lan",
        "  cidrs: [10.20.0.0/24]\n  hostnames: [db.internal]\n",
    );
    let shop = route(
        "shop",
        "lan",
        "  cidrs: [10.20.0.0/24]\n  hostnames: [DB.internal]\n",
    );
    let found = report(&[EDGE, &blog, &shop]);
    assert_eq!(
        found.violation_lines(),
        [
            "NetworkRoute shop/lan: spec.cidrs[0]: 10.20.0.0/24 is already routed by NetworkRoute blog/lan in the account's default network; remove it there first",
            "NetworkRoute shop/lan: spec.hostnames[0]: db.internal is already routed by NetworkRoute blog/lan: a private hostname is routed once per account, in every network; remove it there first",
        ]
    );
    let reversed = report(&[EDGE, &shop, &blog]).violation_lines();
    assert!(
        reversed
            .iter()
            .all(|l| l.starts_with("NetworkRoute blog/lan: ")),
        "{reversed:?}"
    );
    assert_eq!(found.judged, 3);
}

#[test]
fn a_network_named_anywhere_in_the_input_is_known_and_a_name_taken_once() {
    let staging = route(
        "shop",
        "lan",
        "  virtualNetworkRef: {name: staging}\n  cidrs: [10.20.0.0/24]\n",
    );
    let found = report(&[EDGE, &staging, &network("staging", "staging")]);
    assert_eq!(
        found.findings,
        Vec::new(),
        "no warning: the network is given"
    );
    let found = report(&[EDGE, &staging]);
    assert_eq!(
        found.warning_lines(),
        [
            "NetworkRoute shop/lan: spec.virtualNetworkRef: VirtualNetwork staging is not known yet; the NetworkRoute reports VirtualNetworkNotFound until it exists"
        ]
    );
    let found = report(&[&network("second", "staging"), &network("first", "staging")]);
    assert_eq!(
        found.violation_lines(),
        [format!(
            "VirtualNetwork first: spec.name: \"staging\" is already the name of VirtualNetwork second in account {ACCOUNT}: an account holds one network of a name; choose another name, or name VirtualNetwork second in the NetworkRoutes' spec.virtualNetworkRef"
        )]
    );
}

#[test]
fn network_kinds_that_do_not_read_are_reported() {
    let unserved =
        route("shop", "lan", "  cidrs: [10.20.0.0/24]\n").replace("v1alpha2", "v1alpha1");
    let no_spec = "apiVersion: networking.cfargotunnel.com/v1alpha2\nkind: VirtualNetwork\nmetadata: {name: staging}\n";
    assert_eq!(
        report(&[&unserved, no_spec]).violation_lines(),
        [
            "NetworkRoute shop/lan: apiVersion: \"networking.cfargotunnel.com/v1alpha1\" is not served for NetworkRoute; use networking.cfargotunnel.com/v1alpha2",
            "VirtualNetwork staging: spec: is required by the VirtualNetwork v1alpha2 schema; add it",
        ]
    );
}
