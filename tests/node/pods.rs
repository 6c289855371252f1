//! Pods on the node: a hardened pod runs with its settings enforced by the kernel.

use std::time::Duration;

use cftunnel_testenv::{ControlPlane, poll_until};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use serde_json::json;

pub const WAIT: Duration = Duration::from_secs(120);
pub const POLL: Duration = Duration::from_millis(500);
/// The sandbox image the harness builds; it doubles as a do-nothing workload.
pub const PAUSE_IMAGE: &str = cftunnel_testenv::node::images::PAUSE_IMAGE;

/// What the kernel reports for a process (from `/proc/<pid>/status` and `mountinfo`).
#[derive(Debug, PartialEq, Eq)]
pub struct Enforced {
    pub uid: String,
    pub cap_eff: String,
    pub cap_bnd: String,
    pub no_new_privs: String,
    /// 2 = seccomp filter mode (RuntimeDefault).
    pub seccomp: String,
    pub root_read_only: bool,
}

impl Enforced {
    /// The hardened settings: uid 65532, no capabilities, no_new_privs, seccomp filter, read-only root.
    pub fn hardened() -> Enforced {
        Enforced {
            uid: "65532".into(),
            cap_eff: "0000000000000000".into(),
            cap_bnd: "0000000000000000".into(),
            no_new_privs: "1".into(),
            seccomp: "2".into(),
            root_read_only: true,
        }
    }

    /// Reads a running process's settings. Images without a shell (cloudflared's) cannot run a
    /// command inside, so the process is inspected from the node, as the kernel sees it.
    pub fn of_pid(pid: u32) -> Enforced {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
            .unwrap_or_else(|e| panic!("reading /proc/{pid}/status: {e}"));
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{name}:")))
                .map(|v| v.split_whitespace().next().unwrap_or_default().to_string())
                .unwrap_or_default()
        };
        let mountinfo = std::fs::read_to_string(format!("/proc/{pid}/mountinfo"))
            .unwrap_or_else(|e| panic!("reading /proc/{pid}/mountinfo: {e}"));
        // Fields: id parent major:minor root mountpoint options ...; the last "/" mount wins.
        let root_options = mountinfo
            .lines()
            .rev()
            .find_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                (f.get(4) == Some(&"/")).then(|| f.get(5).map(|o| o.to_string()))
            })
            .flatten()
            .unwrap_or_default();
        Enforced {
            uid: field("Uid"),
            cap_eff: field("CapEff"),
            cap_bnd: field("CapBnd"),
            no_new_privs: field("NoNewPrivs"),
            seccomp: field("Seccomp"),
            root_read_only: root_options.split(',').any(|o| o == "ro"),
        }
    }
}

/// The host pid of a pod's container `name` once it runs.
pub async fn container_pid(plane: &ControlPlane, ns: &str, pod: &str, name: &str) -> u32 {
    let pods: Api<Pod> = Api::namespaced(plane.admin_client().expect("client"), ns);
    let node = plane.node().expect("plane has a node");
    let what = format!("container {name} of {ns}/{pod} running");
    let found = poll_until(&what, WAIT, POLL, || async {
        let pod = pods.get_opt(pod).await.ok().flatten()?;
        let status = pod
            .status?
            .container_statuses?
            .into_iter()
            .find(|c| c.name == name)?;
        status.state?.running?;
        node.container_pid(&status.container_id?)
    })
    .await;
    match found {
        Ok(pid) => pid,
        Err(e) => {
            let status = pods.get_opt(pod).await.map(|p| p.and_then(|p| p.status));
            let tasks = node.ctr().args(["tasks", "ls"]).output();
            let tasks = tasks.map(|o| String::from_utf8_lossy(&o.stdout).to_string());
            panic!("{e}\npod status: {status:?}\ncontainerd tasks: {tasks:?}")
        }
    }
}

/// Creates a pod running the pause image with the hardened security context, once the
/// namespace's `default` ServiceAccount exists (the ServiceAccount admission plugin needs it).
pub async fn create_hardened_pod(plane: &ControlPlane, ns: &str, name: &str) {
    let pods: Api<Pod> = Api::namespaced(plane.admin_client().expect("client"), ns);
    let pod = hardened_pod(name);
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        match pods.create(&PostParams::default(), &pod).await {
            Ok(_) => return,
            Err(e) if tokio::time::Instant::now() >= deadline => {
                panic!("creating pod {ns}/{name}: {e}")
            }
            Err(_) => tokio::time::sleep(POLL).await,
        }
    }
}

fn hardened_pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "automountServiceAccountToken": false,
            "terminationGracePeriodSeconds": 5,
            "securityContext": {
                "runAsNonRoot": true,
                "runAsUser": 65532,
                "seccompProfile": {"type": "RuntimeDefault"}
            },
            "containers": [{
                "name": "main",
                "image": PAUSE_IMAGE,
                "imagePullPolicy": "IfNotPresent",
                "securityContext": {
                    "allowPrivilegeEscalation": false,
                    "readOnlyRootFilesystem": true,
                    "capabilities": {"drop": ["ALL"]}
                },
                "resources": {"limits": {"memory": "16Mi", "cpu": "100m"}}
            }]
        }
    }))
    .expect("pod JSON")
}

/// A pod with the hardened security context is scheduled, runs as uid 65532 with no
/// capabilities, no_new_privs, RuntimeDefault seccomp and a read-only root, and deleting it
/// removes its container from containerd.
pub async fn hardened_pod_runs_and_is_removed(plane: &ControlPlane) {
    let ns = plane.create_namespace("node-pod").await.expect("namespace");
    let pods: Api<Pod> = Api::namespaced(plane.admin_client().expect("client"), &ns);
    create_hardened_pod(plane, &ns, "hardened").await;
    let pid = container_pid(plane, &ns, "hardened", "main").await;
    assert_eq!(Enforced::of_pid(pid), Enforced::hardened());
    let pod = pods.get("hardened").await.expect("read pod");
    let status = pod.status.expect("status");
    assert_eq!(status.phase.as_deref(), Some("Running"));
    let ip = status.pod_ip.expect("pod IP");
    assert!(
        ip.starts_with("10.77.0."),
        "pod IP {ip} from the node's pod CIDR"
    );

    pods.delete("hardened", &DeleteParams::default())
        .await
        .expect("delete pod");
    poll_until("pod hardened deleted", WAIT, POLL, || async {
        pods.get_opt("hardened")
            .await
            .ok()
            .flatten()
            .is_none()
            .then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    poll_until("its container's process gone", WAIT, POLL, || async {
        (!std::path::Path::new(&format!("/proc/{pid}")).exists()).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let node = plane.node().expect("node");
    let out = node
        .ctr()
        .args(["tasks", "ls", "-q"])
        .output()
        .expect("ctr tasks ls");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "",
        "containerd tasks left"
    );
}
