//! Hostnames outside the tunnel's domain through `kubectl apply`: admitted silently in the zone
//! of another tunnel of the same account, admitted with a warning elsewhere (the account may
//! hold the zone; the route reports it otherwise), never warned with `disableDNSUpdates`, and
//! refused only when they are not hostnames.
use std::time::Duration;

use super::{WAIT, apply, env, namespace};

/// An account no other test of this binary uses, so no other tunnel's domain is known for it.
const ACCOUNT: &str = "a1b2c3d4e5f60718293a4b5c6d7e8f90";

fn tunnel(name: &str, domain: &str) -> String {
    format!(
        "apiVersion: networking.cfargotunnel.com/v1alpha2\nkind: Tunnel\nmetadata:\n  name: {name}\nspec:\n  newTunnel: {{name: {name}}}\n  cloudflare:\n    domain: {domain}\n    secret: cloudflare-secrets\n    accountId: {ACCOUNT}\n"
    )
}

fn binding(name: &str, fqdn: &str, quiet: bool) -> String {
    format!(
        "apiVersion: networking.cfargotunnel.com/v1alpha1\nkind: TunnelBinding\nmetadata:\n  name: {name}\nsubjects:\n  - name: web\n    spec:\n      fqdn: {fqdn}\ntunnelRef:\n  kind: Tunnel\n  name: web\n  disableDNSUpdates: {quiet}\n"
    )
}

#[tokio::test]
async fn hostnames_outside_the_domain_are_admitted_warned_about_or_refused_as_the_zones_known_say()
{
    let env = env().await;
    let ns = namespace(&env, "adm-zones", true).await;
    let (ok, printed) = apply(env.plane, &ns, &tunnel("web", "example.com"));
    assert!(ok, "{printed}");
    // Before the second tunnel exists, example.net is not known for the account: a warning.
    let (ok, printed) = apply(
        env.plane,
        &ns,
        &binding("early", "early.example.net", false),
    );
    assert!(ok, "{printed}");
    assert!(
        printed.contains("Warning: subjects[0].spec.fqdn: \"early.example.net\" is outside the domain \"example.com\" of Tunnel"),
        "{printed}"
    );
    let (ok, printed) = apply(env.plane, &ns, &tunnel("blog", "example.net"));
    assert!(ok, "{printed}");
    // Once the webhook's caches see it, a hostname in its zone is admitted without a word.
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let (ok, printed) = apply(
            env.plane,
            &ns,
            &binding("other-zone", "app.example.net", false),
        );
        assert!(ok, "{printed}");
        if !printed.contains("Warning") {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "still warned about: {printed}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // A zone no tunnel of the account names: admitted, with the known zones named.
    let (ok, printed) = apply(env.plane, &ns, &binding("unknown", "app.example.io", false));
    assert!(ok, "{printed}");
    assert!(
        printed.contains("\"app.example.io\" is outside the domain \"example.com\" of Tunnel")
            && printed
                .contains("in no other zone known for its account (example.com, example.net)"),
        "{printed}"
    );
    // No DNS written: nothing to warn about.
    let (ok, printed) = apply(env.plane, &ns, &binding("quiet", "quiet.example.io", true));
    assert!(ok && !printed.contains("Warning"), "{printed}");
    // Not a hostname: refused.
    let (ok, printed) = apply(
        env.plane,
        &ns,
        &binding("broken", "app..example.net", false),
    );
    assert!(!ok, "{printed}");
    assert!(
        printed.contains("subjects[0].spec.fqdn: \"app..example.net\""),
        "{printed}"
    );
}
