//! Every Access application cftunnel makes goes when its reason goes (docs/design.md §3.7),
//! on the real API server and the simulator: a target replaced while its applications cannot
//! be deleted keeps every one of them listed in `status.retiring` until they are, and a
//! recorded hostname that becomes refused closes and loses its application; in both cases
//! deleting the policy afterwards finishes with nothing of it left at Cloudflare.
use cftunnel_sim::{Fault, Operation};
use cftunnel_testenv::poll_until;
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::json;

use crate::access_invariant::RenderWatch;
use crate::access_policy::{
    apps_for, binding_target, closed, create_ingress, create_policy, policies, public, route,
    setup, wait_app, wait_programmed, wait_rule,
};
use crate::harness::{Harness, POLL, WAIT};

/// Deletes the policy and waits until it, its applications and its reusable policies are gone.
async fn delete_policy_and_wait_for_nothing_left(h: &Harness, name: &str) {
    policies(h)
        .delete(name, &DeleteParams::default())
        .await
        .expect("delete policy");
    poll_until(
        "the policy and everything of it gone",
        WAIT,
        POLL,
        || async {
            let gone = policies(h).get_opt(name).await.ok()?.is_none();
            (gone && h.sim.access_apps().is_empty() && h.sim.access_policies().is_empty())
                .then_some(())
        },
    )
    .await
    .unwrap_or_else(|e| {
        panic!(
            "{e}; apps {:?}, reusable policies {:?}",
            h.sim.access_apps(),
            h.sim.access_policies()
        )
    });
}

/// Replaces the policy's `spec.targetRefs`.
async fn set_targets(h: &Harness, name: &str, targets: serde_json::Value) {
    policies(h)
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"targetRefs": targets}})),
        )
        .await
        .expect("patch targetRefs");
}

fn behind_access(rule: &serde_json::Value) -> bool {
    !rule["originRequest"]["access"].is_null()
}

#[tokio::test]
async fn a_target_with_two_hosts_replaced_while_deletes_fail_keeps_both_applications_until_they_go()
{
    let h = Harness::start("tr-access-retire").await;
    let watch = RenderWatch::start(&h);
    setup(&h).await;
    let class_name = h.create_ingress_class("edge").await;
    let backend = json!({"service": {"name": "web", "port": {"number": 80}}});
    let rule = |host: &str| json!({"host": host, "http": {"paths": [{"path": "/", "pathType": "Prefix", "backend": backend}]}});
    create_ingress(
        &h,
        json!({"ingressClassName": class_name,
               "rules": [rule("h1.example.com"), rule("h2.example.com")]}),
    )
    .await;
    route(&h, "web-b", "b.example.com").await;
    let ingress_target = json!({"group": "networking.k8s.io", "kind": "Ingress", "name": "shop"});
    create_policy(&h, "staff", json!([ingress_target])).await;
    wait_programmed(&h, "staff", "True", "Programmed").await;
    let apps = [
        wait_app(&h, "h1.example.com").await,
        wait_app(&h, "h2.example.com").await,
    ];
    for host in ["h1.example.com", "h2.example.com"] {
        wait_rule(&h, host, "behind Access", behind_access).await;
        watch.protect(host).await;
    }

    // Deletes refused: the Ingress is replaced by a binding in targetRefs.
    h.sim
        .inject(Operation::DeleteAccessApp, Fault::error_rate(1.0, 403));
    for host in ["h1.example.com", "h2.example.com"] {
        watch.release(host).await;
    }
    set_targets(&h, "staff", json!([binding_target("web-b")])).await;
    for host in ["h1.example.com", "h2.example.com"] {
        wait_rule(&h, host, "public again", public).await;
    }
    let listed = poll_until(
        "both applications listed as retiring",
        WAIT,
        POLL,
        || async {
            let p = policies(&h).get("staff").await.ok()?;
            let retiring: Vec<String> = p
                .status?
                .retiring?
                .into_iter()
                .map(|r| r.application_id)
                .collect();
            (retiring.len() == 2).then_some(retiring)
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    for app in &apps {
        assert!(listed.contains(&app.id), "{} not in {listed:?}", app.id);
    }
    wait_app(&h, "b.example.com").await;
    assert_eq!(
        h.sim.access_apps().len(),
        3,
        "the refused deletes left both old applications"
    );

    // The refusal ends: both go, and the status forgets them only then.
    h.sim.clear_faults();
    poll_until("both old applications deleted", WAIT, POLL, || async {
        (apps_for(&h, "h1.example.com").is_empty() && apps_for(&h, "h2.example.com").is_empty())
            .then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}; apps {:?}", h.sim.access_apps()));
    poll_until("status.retiring emptied", WAIT, POLL, || async {
        let p = policies(&h).get("staff").await.ok()?;
        p.status?.retiring.is_none().then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    delete_policy_and_wait_for_nothing_left(&h, "staff").await;
    watch.assert_held();
}

/// The second path of a retiring target: a target of one hostname removed right after a route
/// change, while the Access pass may still hold the table from before the change, and deletes
/// refused for a while. Its application is listed as retiring, goes once deletes pass, and the
/// policy then deletes with nothing left.
#[tokio::test]
async fn a_one_hostname_target_removed_right_after_a_route_change_keeps_its_application_until_it_goes()
 {
    let h = Harness::start("tr-access-retire-one").await;
    let watch = RenderWatch::start(&h);
    setup(&h).await;
    route(&h, "web-a", "a.example.com").await;
    route(&h, "web-b", "b.example.com").await;
    create_policy(
        &h,
        "staff",
        json!([binding_target("web-a"), binding_target("web-b")]),
    )
    .await;
    wait_programmed(&h, "staff", "True", "Programmed").await;
    let old = wait_app(&h, "a.example.com").await;
    wait_rule(&h, "a.example.com", "behind Access", behind_access).await;
    watch.protect("a.example.com").await;
    watch.protect("b.example.com").await;

    h.sim
        .inject(Operation::DeleteAccessApp, Fault::error_rate(1.0, 403));
    watch.release("a.example.com").await;
    // A route change, and at once the target goes from targetRefs.
    route(&h, "web-c", "c.example.com").await;
    set_targets(&h, "staff", json!([binding_target("web-b")])).await;
    wait_rule(&h, "a.example.com", "public again", public).await;
    poll_until("the application listed as retiring", WAIT, POLL, || async {
        let p = policies(&h).get("staff").await.ok()?;
        let retiring = p.status?.retiring?;
        retiring
            .iter()
            .any(|r| r.application_id == old.id)
            .then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        apps_for(&h, "a.example.com").len(),
        1,
        "the refused delete left it"
    );

    h.sim.clear_faults();
    poll_until("the old application deleted", WAIT, POLL, || async {
        apps_for(&h, "a.example.com").is_empty().then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}; apps {:?}", h.sim.access_apps()));
    // Deleting the policy makes b public.
    watch.release("b.example.com").await;
    delete_policy_and_wait_for_nothing_left(&h, "staff").await;
    watch.assert_held();
}

#[tokio::test]
async fn a_recorded_hostname_refused_later_closes_loses_its_application_and_the_policy_deletes_cleanly()
 {
    let h = Harness::start("tr-access-refused").await;
    let watch = RenderWatch::start(&h);
    setup(&h).await;
    route(&h, "web-a", "a.example.com").await;
    create_policy(&h, "staff", json!([binding_target("web-a")])).await;
    wait_programmed(&h, "staff", "True", "Programmed").await;
    let app = wait_app(&h, "a.example.com").await;
    wait_rule(&h, "a.example.com", "behind Access", behind_access).await;
    watch.protect("a.example.com").await;

    // A reusable policy the account does not have: the hostname is refused.
    policies(&h)
        .patch(
            "staff",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"policies": ["no-such-policy"]}})),
        )
        .await
        .expect("name a missing policy");
    wait_rule(&h, "a.example.com", "closed", closed).await;
    wait_programmed(&h, "staff", "False", "PolicyNotFound").await;
    poll_until("its application deleted", WAIT, POLL, || async {
        h.sim
            .access_apps()
            .iter()
            .all(|a| a.id != app.id)
            .then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}; apps {:?}", h.sim.access_apps()));
    let rule = crate::access_policy::rule(&h, "a.example.com").await;
    assert!(closed(&rule), "refused stays closed: {rule}");
    watch.release("a.example.com").await;
    delete_policy_and_wait_for_nothing_left(&h, "staff").await;
    watch.assert_held();
}

#[tokio::test]
async fn deleting_the_namespace_of_the_accounts_last_tunnel_and_its_policy_leaves_nothing_at_cloudflare()
 {
    use k8s_openapi::api::core::v1::Namespace;
    let h = Harness::start("tr-access-nsdel").await;
    setup(&h).await;
    route(&h, "web-a", "a.example.com").await;
    create_policy(&h, "staff", json!([binding_target("web-a")])).await;
    wait_programmed(&h, "staff", "True", "Programmed").await;
    wait_app(&h, "a.example.com").await;
    wait_rule(&h, "a.example.com", "behind Access", behind_access).await;
    assert_eq!(h.sim.access_policies().len(), 1);

    let namespaces: kube::Api<Namespace> = kube::Api::all(h.admin.clone());
    namespaces
        .delete(&h.ns, &DeleteParams::default())
        .await
        .expect("delete the namespace");
    h.wait_gone(&namespaces, &h.ns).await;
    assert!(
        h.sim.access_apps().is_empty(),
        "applications left: {:?}",
        h.sim.access_apps()
    );
    assert!(
        h.sim.access_policies().is_empty(),
        "reusable policies left: {:?}",
        h.sim.access_policies()
    );
    assert!(
        h.live_tunnels().is_empty(),
        "the tunnel deleted on Cloudflare"
    );
    assert!(
        crate::routes::records(&h, "a.example.com").is_empty(),
        "its DNS record removed"
    );
}
