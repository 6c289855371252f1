//! The names cftunnel gives its Access applications and reusable policies, which carry its
//! ownership marker with the cluster id (as its DNS records do), and how it tells its own.
//!
//! - application: `<hostname> (cftunnel AccessPolicy <namespace>/<name> cluster=<id>)`, so the
//!   dashboard's list reads by hostname;
//! - reusable policy: `cftunnel AccessPolicy <namespace>/<name> cluster=<id>`.
//!
//! Ownership is an exact match of the name cftunnel would give: an application of this
//! cluster's for another policy, or of another cluster, or one made by hand, is never changed
//! or deleted.
use super::guard::PolicyKey;
use crate::dns::ClusterId;
use crate::dns::MARKER_PREFIX;

/// The name of the reusable policy cftunnel keeps for `policy`.
pub fn policy_name(cluster: &ClusterId, policy: &PolicyKey) -> String {
    format!("{MARKER_PREFIX}AccessPolicy {policy} cluster={cluster}")
}

/// The name of the application cftunnel keeps for `hostname` of `policy`.
pub fn app_name(cluster: &ClusterId, policy: &PolicyKey, hostname: &str) -> String {
    format!(
        "{} ({})",
        hostname.to_ascii_lowercase(),
        policy_name(cluster, policy)
    )
}

/// Who an application found for a hostname belongs to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AppOwner {
    /// This policy's, in this cluster.
    Ours,
    /// Another AccessPolicy's of this cluster (one being deleted, or moved).
    OtherPolicy(String),
    /// Another cluster's or someone else's.
    Foreign,
}

/// Whose the application named `name` is, for `hostname` of `policy`.
pub fn app_owner(name: &str, cluster: &ClusterId, policy: &PolicyKey, hostname: &str) -> AppOwner {
    if name == app_name(cluster, policy, hostname) {
        return AppOwner::Ours;
    }
    let tail = format!(" cluster={cluster})");
    let head = format!("({MARKER_PREFIX}AccessPolicy ");
    match name.strip_suffix(&tail).and_then(|n| n.rsplit_once(&head)) {
        Some((_, other)) => AppOwner::OtherPolicy(other.to_string()),
        None => AppOwner::Foreign,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> PolicyKey {
        PolicyKey {
            namespace: "shop".into(),
            name: name.into(),
        }
    }

    #[test]
    fn admission_knows_the_names_of_cftunnels_reusable_policies() {
        use crate::rules::access_policy::is_cftunnel_policy_name;
        let us = ClusterId::new("c1").expect("id");
        let name = policy_name(&us, &key("staff"));
        assert!(is_cftunnel_policy_name(&name), "{name}");
        let tokens = format!("{name}{}", crate::access::desired::SERVICE_TOKENS_SUFFIX);
        assert!(is_cftunnel_policy_name(&tokens));
        assert!(!is_cftunnel_policy_name("staff"));
    }

    #[test]
    fn only_the_exact_name_of_this_cluster_and_policy_is_ours() {
        let us = ClusterId::new("c1").expect("id");
        let them = ClusterId::new("c2").expect("id");
        let name = app_name(&us, &key("staff"), "App.Example.com");
        assert_eq!(
            name,
            "app.example.com (cftunnel AccessPolicy shop/staff cluster=c1)"
        );
        assert_eq!(
            app_owner(&name, &us, &key("staff"), "app.example.com"),
            AppOwner::Ours
        );
        assert_eq!(
            app_owner(&name, &us, &key("ops"), "app.example.com"),
            AppOwner::OtherPolicy("shop/staff".into())
        );
        assert_eq!(
            app_owner(&name, &them, &key("staff"), "app.example.com"),
            AppOwner::Foreign
        );
        assert_eq!(
            app_owner("Admin site", &us, &key("staff"), "app.example.com"),
            AppOwner::Foreign
        );
        assert_eq!(
            policy_name(&us, &key("staff")),
            "cftunnel AccessPolicy shop/staff cluster=c1"
        );
    }
}
