//! The local control plane is a real Kubernetes: CRUD, RBAC, controllers, GC, webhooks, cleanup.

mod support;

use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;
use std::process::Command;
use std::time::Duration;

use cftunnel_testenv::{ControlPlane, ControlPlaneOptions, poll_until};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::Api;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, PostParams,
};
use support::child::{CHILD_LOCK, CHILD_MODE_ENV, CHILD_REPORT_ENV, assert_cleaned_up, run_child};
use support::fixtures::{
    DENY_LABEL, DENY_MESSAGE, WIDGET_GROUP, api_error_code, config_map, config_map_role,
    deny_configuration, deployment, group_binding,
};
use support::webhook_server::{Call, DenyingWebhook};
use support::{GC_WAIT, POLL, WAIT, plane};

#[tokio::test]
async fn config_map_crud_through_admin_client_and_kubectl() {
    let plane = plane().await;
    let ns = plane.create_namespace("crud").await.expect("namespace");
    let api: Api<ConfigMap> = Api::namespaced(plane.admin_client().expect("client"), &ns);

    api.create(
        &PostParams::default(),
        &config_map("settings", &[], &[("mode", "a")]),
    )
    .await
    .expect("create");
    let mut read = api.get("settings").await.expect("read");
    assert_eq!(
        read.data
            .as_ref()
            .and_then(|d| d.get("mode"))
            .map(String::as_str),
        Some("a")
    );

    read.data = Some(BTreeMap::from([("mode".to_string(), "b".to_string())]));
    api.replace("settings", &PostParams::default(), &read)
        .await
        .expect("update");
    let updated = api.get("settings").await.expect("read after update");
    assert_eq!(
        updated.data,
        Some(BTreeMap::from([("mode".to_string(), "b".to_string())]))
    );

    api.delete("settings", &DeleteParams::default())
        .await
        .expect("delete");
    assert!(
        api.get_opt("settings")
            .await
            .expect("read after delete")
            .is_none()
    );

    // The real kubectl works with the admin kubeconfig.
    let output = plane
        .kubectl()
        .args([
            "create",
            "configmap",
            "from-kubectl",
            "-n",
            &ns,
            "--from-literal=k=v",
        ])
        .output()
        .expect("kubectl runs");
    assert!(
        output.status.success(),
        "kubectl failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let created = api.get("from-kubectl").await.expect("kubectl's configmap");
    assert_eq!(
        created.data,
        Some(BTreeMap::from([("k".to_string(), "v".to_string())]))
    );
}

#[tokio::test]
async fn rbac_denies_a_user_until_a_role_binding_grants_its_group() {
    let plane = plane().await;
    let ns = plane.create_namespace("rbac").await.expect("namespace");
    let admin = plane.admin_client().expect("admin");
    let group = format!("readers-{ns}");
    // The binding names the second O attribute, so both groups of the certificate must count.
    let user = plane
        .user("rbac-reader", &["unrelated-group", &group])
        .expect("user");
    let as_user: Api<ConfigMap> = Api::namespaced(user.client().expect("user client"), &ns);

    let denied = as_user.list(&ListParams::default()).await;
    match &denied {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 403);
            assert_eq!(
                status.message,
                format!(
                    "configmaps is forbidden: User \"rbac-reader\" cannot list resource \
                     \"configmaps\" in API group \"\" in the namespace \"{ns}\""
                )
            );
        }
        other => panic!("expected 403, got {other:?}"),
    }

    let admin_cms: Api<ConfigMap> = Api::namespaced(admin.clone(), &ns);
    admin_cms
        .create(
            &PostParams::default(),
            &config_map("visible", &[], &[("x", "1")]),
        )
        .await
        .expect("admin creates");
    Api::<Role>::namespaced(admin.clone(), &ns)
        .create(
            &PostParams::default(),
            &config_map_role("configmap-reader", &["get", "list"]),
        )
        .await
        .expect("role");
    Api::<RoleBinding>::namespaced(admin, &ns)
        .create(
            &PostParams::default(),
            &group_binding("readers", "configmap-reader", &group),
        )
        .await
        .expect("role binding");

    // The authorizer reads RBAC objects from an informer, so the grant lands shortly after.
    let names = poll_until("the binding to take effect", WAIT, POLL, || async {
        let list = as_user.list(&ListParams::default()).await.ok()?;
        Some(
            list.items
                .into_iter()
                .filter_map(|cm| cm.metadata.name)
                .collect::<Vec<_>>(),
        )
    })
    .await
    .expect("user can list");
    assert_eq!(names, vec!["visible".to_string()]);

    let create = as_user
        .create(&PostParams::default(), &config_map("not-allowed", &[], &[]))
        .await;
    assert_eq!(api_error_code(&create), Some(403), "{create:?}");
}

#[tokio::test]
async fn controller_manager_rolls_out_deployments_and_gc_removes_dependents() {
    let plane = plane().await;
    let ns = plane.create_namespace("kcm").await.expect("namespace");
    let client = plane.admin_client().expect("client");
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let replica_sets: Api<ReplicaSet> = Api::namespaced(client.clone(), &ns);
    let pods: Api<Pod> = Api::namespaced(client, &ns);

    let created = deployments
        .create(&PostParams::default(), &deployment("web", 2))
        .await
        .expect("deployment");
    let deployment_uid = created.metadata.uid.expect("uid");

    let rs = poll_until(
        "a ReplicaSet owned by the Deployment",
        WAIT,
        POLL,
        || async {
            let list = replica_sets.list(&ListParams::default()).await.ok()?;
            list.items.into_iter().find(|rs| {
                rs.metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .any(|o| o.uid == deployment_uid && o.controller == Some(true))
            })
        },
    )
    .await
    .expect("replica set");
    let rs_uid = rs.metadata.uid.clone().expect("rs uid");

    let phases = poll_until("two Pods owned by the ReplicaSet", WAIT, POLL, || async {
        let list = pods.list(&ListParams::default()).await.ok()?;
        let owned: Vec<_> = list
            .items
            .into_iter()
            .filter(|p| {
                p.metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .any(|o| o.uid == rs_uid)
            })
            .collect();
        (owned.len() == 2).then(|| {
            owned
                .into_iter()
                .map(|p| p.status.and_then(|s| s.phase).unwrap_or_default())
                .collect::<Vec<_>>()
        })
    })
    .await
    .expect("pods");
    assert_eq!(phases, vec!["Pending".to_string(), "Pending".to_string()]);

    deployments
        .delete("web", &DeleteParams::background())
        .await
        .expect("delete deployment");
    let remaining = poll_until(
        "GC to remove the ReplicaSet and Pods",
        GC_WAIT,
        POLL,
        || async {
            let rs_left = replica_sets
                .list(&ListParams::default())
                .await
                .ok()?
                .items
                .len();
            let pods_left = pods.list(&ListParams::default()).await.ok()?.items.len();
            (rs_left == 0 && pods_left == 0).then_some((rs_left, pods_left))
        },
    )
    .await
    .expect("garbage collected");
    assert_eq!(remaining, (0, 0));
}

#[tokio::test]
async fn api_server_calls_a_registered_webhook_over_tls() {
    let plane = plane().await;
    let ns = plane.create_namespace("webhook").await.expect("namespace");
    let server = DenyingWebhook::start(plane.ca(), DENY_LABEL, DENY_MESSAGE).await;
    plane
        .register_webhooks(
            Some(deny_configuration(&format!("deny-{ns}"), &ns)),
            None,
            &server.url_base,
            plane.ca().cert_pem(),
        )
        .await
        .expect("register");

    let api: Api<ConfigMap> = Api::namespaced(plane.admin_client().expect("client"), &ns);
    let labelled = |name: &str| config_map(name, &[(DENY_LABEL, "yes")], &[]);
    // The API server learns of new configurations through an informer: probe with dry runs.
    let dry_run = PostParams {
        dry_run: true,
        ..Default::default()
    };
    poll_until("the webhook to become active", WAIT, POLL, || async {
        api.create(&dry_run, &labelled("probe")).await.err()
    })
    .await
    .expect("webhook active");
    let probes = server.calls().len();
    assert!(probes >= 1);

    let denied = api
        .create(&PostParams::default(), &labelled("refused"))
        .await;
    match &denied {
        Err(kube::Error::Api(status)) => {
            // The webhook sets no code, so the API server reports the denial as 400.
            assert_eq!(status.code, 400, "{status:?}");
            assert_eq!(
                status.message,
                format!(
                    "admission webhook \"deny.cftunnel.test\" denied the request: {DENY_MESSAGE}"
                )
            );
        }
        other => panic!("expected a denial, got {other:?}"),
    }
    api.create(&PostParams::default(), &config_map("accepted", &[], &[]))
        .await
        .expect("unlabelled configmap is allowed");

    let real_calls: Vec<Call> = server.calls().into_iter().skip(probes).collect();
    assert_eq!(
        real_calls,
        vec![
            Call {
                name: "refused".to_string(),
                dry_run: false,
                allowed: false
            },
            Call {
                name: "accepted".to_string(),
                dry_run: false,
                allowed: true
            },
        ]
    );
    assert!(api.get_opt("refused").await.expect("get").is_none());
}

#[tokio::test]
async fn crds_from_the_options_are_served_when_start_returns() {
    let plane = plane().await;
    let ns = plane.create_namespace("crd").await.expect("namespace");
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(WIDGET_GROUP, "v1", "Widget"));
    let widgets: Api<DynamicObject> =
        Api::namespaced_with(plane.admin_client().expect("client"), &ns, &resource);
    let mut widget = DynamicObject::new("small", &resource);
    widget.data = serde_json::json!({ "spec": { "size": 3 } });
    widgets
        .create(&PostParams::default(), &widget)
        .await
        .expect("create a custom object without waiting");
    let read = widgets.get("small").await.expect("read it back");
    assert_eq!(read.data["spec"]["size"], serde_json::json!(3));
}

#[tokio::test]
async fn a_taken_api_server_port_is_left_for_a_free_one() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("hold a port");
    let taken_port = taken.local_addr().expect("its address").port();
    let plane = ControlPlane::start(ControlPlaneOptions {
        apiserver_port: Some(taken_port),
        ..ControlPlaneOptions::default()
    })
    .await
    .expect("the plane starts on another port");
    let url = plane.server_url().to_string();
    assert_ne!(url, format!("https://127.0.0.1:{taken_port}"));
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> =
        Api::all(plane.admin_client().expect("client"));
    namespaces
        .get("default")
        .await
        .expect("the admin reaches the API server at its new port");
    let output = plane
        .kubectl()
        .args(["get", "namespace", "default", "-o", "name"])
        .output()
        .expect("kubectl");
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        "namespace/default"
    );
    plane.stop().await;
    drop(taken);
}

#[tokio::test]
async fn extra_apiserver_args_enable_owner_references_permission_enforcement() {
    let plane = plane().await;
    let ns = plane.create_namespace("ownerref").await.expect("namespace");
    let admin = plane.admin_client().expect("admin");
    let group = format!("writers-{ns}");
    Api::<Role>::namespaced(admin.clone(), &ns)
        .create(
            &PostParams::default(),
            &config_map_role("configmap-writer", &["get", "list", "create"]),
        )
        .await
        .expect("role");
    Api::<RoleBinding>::namespaced(admin.clone(), &ns)
        .create(
            &PostParams::default(),
            &group_binding("writers", "configmap-writer", &group),
        )
        .await
        .expect("binding");
    let owner = Api::<ConfigMap>::namespaced(admin, &ns)
        .create(&PostParams::default(), &config_map("owner", &[], &[]))
        .await
        .expect("owner");
    let user = plane.user("ownerref-writer", &[&group]).expect("user");
    let as_user: Api<ConfigMap> = Api::namespaced(user.client().expect("client"), &ns);
    let owned = |name: &str, block: bool| {
        let mut cm = config_map(name, &[], &[]);
        cm.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "v1".to_string(),
            kind: "ConfigMap".to_string(),
            name: "owner".to_string(),
            uid: owner.metadata.uid.clone().unwrap_or_default(),
            block_owner_deletion: Some(block),
            controller: None,
        }]);
        cm
    };
    // Wait for the grant with an object the plugin does not care about.
    poll_until("the binding to take effect", WAIT, POLL, || async {
        as_user
            .create(&PostParams::default(), &owned("unblocked", false))
            .await
            .ok()
    })
    .await
    .expect("user can create configmaps");

    let blocked = as_user
        .create(&PostParams::default(), &owned("blocked", true))
        .await;
    match &blocked {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 403, "{status:?}");
            assert!(
                status.message.contains(
                    "cannot set blockOwnerDeletion if an ownerReference refers to a resource \
                     you can't set finalizers on"
                ),
                "{}",
                status.message
            );
        }
        other => panic!("expected the plugin to refuse, got {other:?}"),
    }
}

/// Run only as a child of the cleanup tests: starts its own plane, reports it, then dies.
#[tokio::test]
#[ignore = "run in a child process by the cleanup tests"]
async fn cleanup_child_helper() {
    let (Ok(mode), Ok(report)) = (
        std::env::var(CHILD_MODE_ENV),
        std::env::var(CHILD_REPORT_ENV),
    ) else {
        return;
    };
    let plane = ControlPlane::start(ControlPlaneOptions {
        controller_manager: true,
        ..Default::default()
    })
    .await
    .expect("own control plane starts");
    let pids: Vec<String> = plane.pids().iter().map(u32::to_string).collect();
    std::fs::write(
        &report,
        format!("{}\n{}\n", pids.join(" "), plane.dir().display()),
    )
    .expect("write report");
    if mode == "sigkill" {
        let _ = Command::new("kill")
            .args(["-KILL", &std::process::id().to_string()])
            .status();
        tokio::time::sleep(Duration::from_secs(60)).await;
    }
    panic!("deliberate panic while a control plane runs");
}

#[test]
fn harness_leaves_nothing_behind_after_a_panicking_test() {
    let _guard = CHILD_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let (status, pids, dir) = run_child("panic");
    assert_eq!(
        status.code(),
        Some(101),
        "test harness exit code for a failed test"
    );
    assert_cleaned_up(&pids, &dir);
}

#[test]
fn harness_leaves_nothing_behind_after_sigkill() {
    let _guard = CHILD_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let (status, pids, dir) = run_child("sigkill");
    assert_eq!(status.signal(), Some(9));
    assert_cleaned_up(&pids, &dir);
}

/// cftunnel's event recorder on a real API server: a repeat of an event on the same object
/// (its resourceVersion moved on) is counted on the first Event as a series; another reason
/// is an Event of its own.
#[tokio::test]
async fn a_repeated_event_is_counted_on_the_first_as_a_series() {
    use k8s_openapi::api::core::v1::ObjectReference;
    use k8s_openapi::api::events::v1::Event as K8sEvent;
    use kube::runtime::events::{Event, EventType, Reporter};

    let plane = plane().await;
    let ns = plane.create_namespace("events").await.expect("namespace");
    let client = plane.admin_client().expect("client");
    let reporter = Reporter {
        controller: "cftunnel".into(),
        instance: None,
    };
    let recorder = cftunnel::term::recorder::Recorder::new(client.clone(), reporter);
    let regarding = |resource_version: &str| ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("ConfigMap".into()),
        namespace: Some(ns.clone()),
        name: Some("settings".into()),
        uid: Some("0b7e-u1".into()),
        resource_version: Some(resource_version.into()),
        ..ObjectReference::default()
    };
    let event = |reason: &str| Event {
        type_: EventType::Warning,
        reason: reason.into(),
        note: Some(format!("{reason} happened")),
        action: "Reconcile".into(),
        secondary: None,
    };
    for (reason, version) in [
        ("Stuck", "1"),
        ("Stuck", "2"),
        ("Stuck", "3"),
        ("Ready", "3"),
    ] {
        recorder
            .publish(&event(reason), &regarding(version))
            .await
            .unwrap_or_else(|e| panic!("{reason} at {version}: {e}"));
    }
    let events = Api::<K8sEvent>::namespaced(client, &ns)
        .list(&ListParams::default())
        .await
        .expect("list events")
        .items;
    let of = |reason: &str| -> Vec<&K8sEvent> {
        events
            .iter()
            .filter(|e| e.reason.as_deref() == Some(reason))
            .collect()
    };
    let (stuck, ready) = (of("Stuck"), of("Ready"));
    assert_eq!((stuck.len(), ready.len()), (1, 1), "{events:?}");
    assert_eq!(stuck[0].series.as_ref().map(|s| s.count), Some(3));
    assert_eq!(stuck[0].note.as_deref(), Some("Stuck happened"));
    assert!(ready[0].series.is_none());
    assert_eq!(ready[0].reporting_controller.as_deref(), Some("cftunnel"));
}
