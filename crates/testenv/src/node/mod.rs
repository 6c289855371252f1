//! A real node for the local control plane: containerd + runc + CNI bridge, kubelet and
//! kube-scheduler, inside a network namespace of the test's own (see [`namespace`]).
//!
//! Started by [`super::ControlPlane::start`] when [`super::ControlPlaneOptions::node`] is set.
//! Then the API server listens on all addresses of the private namespace and advertises
//! [`NODE_IP`] (so pods reach it through the `kubernetes` Service, see
//! [`namespace::route_kubernetes_service`]), authorizes kubelet with `Node,RBAC` and
//! NodeRestriction, reaches webhook Services through their endpoints
//! (`--enable-aggregator-routing`), and the controller manager also runs the ServiceAccount,
//! root-CA publisher, endpoint and disruption (PodDisruptionBudget) controllers.
//!
//! Everything the node leaves (pods, shims, mounts, cgroups) is removed by [`cleanup`] at
//! shutdown and, after a crash, by the watchdog.

pub mod cleanup;
pub mod containerd;
pub mod forward;
pub mod images;
pub mod kubelet;
pub mod namespace;
pub mod scheduler;

use std::path::{Path, PathBuf};
use std::process::Command;

use super::TestEnvError;
use super::binaries::Binaries;
use super::certs::TestCa;
use super::process::ManagedProcess;
use super::users::{write, write_user_files};

pub use namespace::{inside_private_namespaces, rerun_in_private_namespaces};

/// The node's name (its client certificate is `system:node:<name>`).
pub const NODE_NAME: &str = "cftunnel-node";
/// The node's address, on `lo` of the private namespace; the API server advertises it too.
pub(crate) const NODE_IP: &str = "10.78.0.1";
/// Pod addresses (CNI host-local); nothing else uses them inside the private namespace.
pub(crate) const POD_CIDR: &str = "10.77.0.0/24";
/// ClusterIP of the `kubernetes` Service: the first address of `--service-cluster-ip-range`.
pub(crate) const KUBERNETES_SERVICE_IP: &str = "10.96.0.1";

/// What the node starts with.
#[derive(Debug, Clone, Default)]
pub struct NodeOptions {
    /// OCI archives imported into containerd before kubelet starts (the pause image always is).
    /// Pods use them with `imagePullPolicy: IfNotPresent` (or a non-`latest` tag): no registry.
    pub images: Vec<PathBuf>,
}

/// A running node's handles.
#[derive(Debug, Clone)]
pub struct Node {
    dir: PathBuf,
    socket: PathBuf,
    cgroup_root: String,
}

impl Node {
    /// `ctr` for this node's containerd, namespace `k8s.io`.
    pub fn ctr(&self) -> Command {
        containerd::ctr(&self.socket)
    }

    /// Imports another OCI archive into the node's containerd.
    pub fn import_image(&self, archive: &Path) -> Result<(), TestEnvError> {
        containerd::import(&self.socket, archive)
    }

    /// The host pid of a container's main process, from a `containerd://<id>` container ID.
    pub fn container_pid(&self, container_id: &str) -> Option<u32> {
        let id = container_id
            .strip_prefix("containerd://")
            .unwrap_or(container_id);
        containerd::task_pid(&self.socket, id)
    }

    /// Name of kubelet's cgroup root (one directory in every cgroup v1 hierarchy).
    pub fn cgroup_root(&self) -> &str {
        &self.cgroup_root
    }

    /// The node's state directory (containerd, kubelet, CNI).
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

/// Names the API server's serving certificate must carry for pods and the node.
pub(crate) const APISERVER_HOSTS: [&str; 5] = [
    NODE_IP,
    KUBERNETES_SERVICE_IP,
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
];

/// kube-apiserver flags replacing the loopback-only defaults; writes the kubelet client cert.
pub(crate) fn apiserver_flags(
    plane_dir: &Path,
    ca: &TestCa,
    ca_cert: &Path,
) -> Result<Vec<String>, TestEnvError> {
    let client = ca.issue_client_cert("kube-apiserver-kubelet-client", &["system:masters"])?;
    let cert = plane_dir.join("apiserver-kubelet-client.crt");
    let key = plane_dir.join("apiserver-kubelet-client.key");
    write(&cert, client.cert_pem.as_bytes())?;
    write(&key, client.key_pem.as_bytes())?;
    Ok(vec![
        "--bind-address=0.0.0.0".to_string(),
        format!("--advertise-address={NODE_IP}"),
        "--authorization-mode=Node,RBAC".to_string(),
        "--enable-admission-plugins=NodeRestriction".to_string(),
        format!("--kubelet-client-certificate={}", cert.display()),
        format!("--kubelet-client-key={}", key.display()),
        format!("--kubelet-certificate-authority={}", ca_cert.display()),
        "--kubelet-preferred-address-types=InternalIP".to_string(),
        "--enable-aggregator-routing=true".to_string(),
    ])
}

/// The plane's pieces a node needs.
pub struct NodeStart<'a> {
    pub plane_dir: &'a Path,
    pub binaries: &'a Binaries,
    pub ca: &'a TestCa,
    pub ca_cert: &'a Path,
    pub server: &'a str,
    pub apiserver_port: u16,
    pub client: kube::Client,
}

/// The node directory and cgroup root of a plane; the cleanup script is written at once, so
/// the watchdog can remove whatever exists from the first mount on.
pub fn prepare(plane_dir: &Path) -> Result<(PathBuf, String), TestEnvError> {
    let node_dir = plane_dir.join("node");
    std::fs::create_dir_all(&node_dir).map_err(|e| TestEnvError::io("creating the node dir", e))?;
    let base = plane_dir
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("plane");
    let cgroup_root = format!("cftunnel-node-{}", base.trim_start_matches("cftunnel-cp-"));
    cleanup::write_script(plane_dir, &node_dir, &cgroup_root)?;
    namespace::prepare(&node_dir)?;
    Ok((node_dir, cgroup_root))
}

/// Starts kube-scheduler, containerd (images imported) and kubelet, and waits for the Node to
/// be Ready. Each started process is pushed to `processes` at once, so a failure stops it.
pub async fn start(
    ctx: NodeStart<'_>,
    options: &NodeOptions,
    node_dir: &Path,
    cgroup_root: &str,
    processes: &mut Vec<ManagedProcess>,
) -> Result<Node, TestEnvError> {
    let issued = ctx
        .ca
        .issue_client_cert("system:kube-scheduler", &["system:masters"])?;
    let (_, kubeconfig) = write_user_files(
        ctx.plane_dir,
        "scheduler",
        "system:kube-scheduler",
        ctx.server,
        ctx.ca_cert,
        ctx.ca.cert_der(),
        &issued,
    )?;
    processes.push(scheduler::start(&ctx.binaries.scheduler, ctx.plane_dir, &kubeconfig).await?);
    namespace::route_kubernetes_service(ctx.apiserver_port)?;
    kubelet::create_cgroup_root(cgroup_root)?;

    let pause = images::pause_archive()?;
    processes.push(containerd::start(ctx.plane_dir, node_dir).await?);
    let socket = containerd::socket(node_dir);
    for archive in std::iter::once(&pause).chain(&options.images) {
        containerd::import(&socket, archive)?;
    }

    let node_user = format!("system:node:{NODE_NAME}");
    let issued = ctx.ca.issue_client_cert(&node_user, &["system:nodes"])?;
    let (_, kubeconfig) = write_user_files(
        ctx.plane_dir,
        "kubelet",
        &node_user,
        ctx.server,
        ctx.ca_cert,
        ctx.ca.cert_der(),
        &issued,
    )?;
    let serving = ctx.ca.issue_server_cert(&[NODE_IP, NODE_NAME])?;
    let files = kubelet::KubeletFiles {
        kubeconfig,
        ca_cert: ctx.ca_cert.to_path_buf(),
        serving_cert: node_dir.join("kubelet-serving.crt"),
        serving_key: node_dir.join("kubelet-serving.key"),
    };
    write(&files.serving_cert, serving.cert_pem.as_bytes())?;
    write(&files.serving_key, serving.key_pem.as_bytes())?;
    let config = kubelet::config(node_dir, &socket, cgroup_root, &files);
    let process = kubelet::start(
        &ctx.binaries.kubelet,
        ctx.plane_dir,
        node_dir,
        &config,
        &files,
        ctx.client,
    )
    .await?;
    processes.push(process);
    Ok(Node {
        dir: node_dir.to_path_buf(),
        socket,
        cgroup_root: cgroup_root.to_string(),
    })
}
