//! The ownership marker of private routes: its form, its length whatever the names, and how a
//! comment is read back.
use proptest::prelude::*;

use super::*;

fn cluster(id: &str) -> ClusterId {
    ClusterId::new(id).expect("cluster id")
}

fn route(namespace: &str, name: &str) -> Owner {
    Owner::new(OwnerKind::NetworkRoute, namespace, name)
}

#[test]
fn the_comment_is_the_marker_the_owner_and_the_user_comment() {
    let owner = route("shop", "db");
    let comment = ownership_comment(&cluster("prod-eu"), &owner, Some("  reporting replicas "));
    let marker = format!("cftunnel:prod-eu:{}", owner.digest());
    assert_eq!(comment, format!("{marker} shop/db: reporting replicas"));
    assert_eq!(
        ownership_comment(&cluster("prod-eu"), &owner, Some("  ")),
        format!("{marker} shop/db")
    );
    let network = Owner::new(OwnerKind::VirtualNetwork, "", "staging");
    assert!(
        ownership_comment(&cluster("prod-eu"), &network, None).ends_with(" staging"),
        "a cluster-scoped owner is named without a namespace"
    );
}

#[test]
fn owners_of_another_kind_or_name_have_another_digest() {
    let digests = [
        route("shop", "db").digest(),
        route("shop", "db2").digest(),
        route("shop2", "db").digest(),
        route("sho", "p/db").digest(),
        Owner::new(OwnerKind::Gateway, "shop", "db").digest(),
    ];
    for (i, a) in digests.iter().enumerate() {
        assert_eq!(a.as_str().len(), 12);
        for b in &digests[i + 1..] {
            assert_ne!(a, b);
        }
    }
    assert_eq!(route("shop", "db").digest(), route("shop", "db").digest());
}

#[test]
fn long_names_and_comments_are_shortened_and_the_marker_is_not() {
    let id = "a".repeat(40);
    let owner = route(&"n".repeat(63), &"m".repeat(253));
    let comment = ownership_comment(&cluster(&id), &owner, Some(&"é".repeat(300)));
    assert_eq!(comment.chars().count(), MAX_ROUTE_COMMENT_CHARS);
    let marker = private_marker(&cluster(&id), &owner);
    assert_eq!(marker.len(), 62);
    assert!(comment.starts_with(&format!("{marker} nnnn")), "{comment}");
    assert!(comment.contains("...: éé"), "{comment}");
    assert!(comment.ends_with("é..."), "{comment}");

    // A short name is kept whole, the comment takes the rest.
    let short = ownership_comment(&cluster(&id), &route("a", "b"), Some(&"x".repeat(300)));
    assert!(short.starts_with(&format!(
        "{} a/b: xxx",
        private_marker(&cluster(&id), &route("a", "b"))
    )));
    assert_eq!(short.chars().count(), MAX_ROUTE_COMMENT_CHARS);
}

#[test]
fn comments_are_read_as_ours_another_clusters_or_foreign() {
    let owner = route("shop", "db");
    let ours = ownership_comment(&cluster("prod-eu"), &owner, Some("x"));
    assert_eq!(
        ownership(&ours, &cluster("prod-eu")),
        Ownership::Ours(owner.digest())
    );
    assert_eq!(
        ownership(&ours, &cluster("prod-us")),
        Ownership::OtherCluster(cluster("prod-eu"))
    );
    for foreign in [
        "",
        "db replicas",
        "cftunnel Tunnel shop/edge cluster=prod-eu",
        "cftunnel:prod-eu",
        "cftunnel:prod-eu:",
        "cftunnel:prod-eu:3f9a0c2d71b",
        "cftunnel:prod-eu:3f9a0c2d71bef",
        "cftunnel:prod-eu:3F9A0C2D71BE",
        "cftunnel:Prod:3f9a0c2d71be",
        " cftunnel:prod-eu:3f9a0c2d71be",
    ] {
        assert_eq!(
            ownership(foreign, &cluster("prod-eu")),
            Ownership::Foreign,
            "{foreign:?}"
        );
    }
    assert_eq!(
        parse_marker("cftunnel:prod-eu:3f9a0c2d71be"),
        Some(Marker {
            cluster: cluster("prod-eu"),
            owner: OwnerDigest::parse("3f9a0c2d71be").expect("digest"),
        })
    );
}

fn any_cluster() -> impl Strategy<Value = ClusterId> {
    "[a-z0-9-]{1,40}".prop_map(|id| cluster(&id))
}

fn any_kind() -> impl Strategy<Value = OwnerKind> {
    prop_oneof![
        Just(OwnerKind::NetworkRoute),
        Just(OwnerKind::VirtualNetwork),
        Just(OwnerKind::Gateway),
    ]
}

proptest! {
    #[test]
    fn every_comment_fits_starts_with_the_marker_and_names_its_owner(
        cluster in any_cluster(),
        kind in any_kind(),
        namespace in "\\PC{0,80}",
        name in "\\PC{0,300}",
        user in proptest::option::of("\\PC{0,300}"),
    ) {
        let owner = Owner::new(kind, &namespace, &name);
        let comment = ownership_comment(&cluster, &owner, user.as_deref());
        prop_assert!(comment.chars().count() <= MAX_ROUTE_COMMENT_CHARS, "{}", comment);
        prop_assert!(comment.starts_with(&private_marker(&cluster, &owner)));
        prop_assert_eq!(
            parse_marker(&comment),
            Some(Marker { cluster: cluster.clone(), owner: owner.digest() })
        );
        prop_assert_eq!(ownership(&comment, &cluster), Ownership::Ours(owner.digest()));
        prop_assert_eq!(comment.trim_end(), comment.as_str());
    }
}
