//! kubelet 1.37 on cgroup v1 (hybrid) with containerd 1.6, every path under the node directory.

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::Api;

use super::super::TestEnvError;
use super::super::process::{ManagedProcess, wait_healthz, wait_ready};
use super::{NODE_IP, NODE_NAME, POD_CIDR};

const READY_TIMEOUT: Duration = Duration::from_secs(120);
/// kubelet's plain-HTTP health endpoint, on loopback inside the node's namespace.
const HEALTHZ_PORT: u16 = 10248;

/// Files kubelet is started with.
#[derive(Debug, Clone)]
pub struct KubeletFiles {
    pub kubeconfig: PathBuf,
    pub ca_cert: PathBuf,
    pub serving_cert: PathBuf,
    pub serving_key: PathBuf,
}

/// The KubeletConfiguration. Each setting below was needed on this kind of machine:
/// `failCgroupV1: false` (1.37 refuses cgroup v1 otherwise); `cgroupDriver: cgroupfs`
/// (containerd 1.6 lacks the CRI RuntimeConfig call, so kubelet uses its own setting, and
/// systemd is not managing these cgroups); `cgroupRoot` pre-created in every v1 hierarchy;
/// `podLogsDir`/`volumePluginDir` away from their `/var/log`, `/usr/libexec` defaults; image
/// garbage collection off, because the imported images cannot be pulled again; a serving
/// certificate from the cluster CA so the API server can verify kubelet for logs and exec;
/// eviction only when the disk is nearly full (the node shares the disk of the machine that
/// builds it: with the default 15% of a large disk still free, kubelet evicts every pod for
/// disk pressure and taints the node, so nothing schedules).
pub fn config(node_dir: &Path, socket: &Path, cgroup_root: &str, files: &KubeletFiles) -> String {
    let d = node_dir.display();
    format!(
        r#"apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /{cgroup_root}
containerRuntimeEndpoint: unix://{socket}
address: {NODE_IP}
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: {HEALTHZ_PORT}
tlsCertFile: {cert}
tlsPrivateKeyFile: {key}
authentication:
  anonymous: {{enabled: false}}
  webhook: {{enabled: true}}
  x509: {{clientCAFile: {ca}}}
authorization:
  mode: Webhook
podCIDR: {POD_CIDR}
podLogsDir: {d}/pod-logs
volumePluginDir: {d}/volume-plugins
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 100Mi
  nodefs.available: 512Mi
  nodefs.inodesFree: 1%
  imagefs.available: 512Mi
  imagefs.inodesFree: 1%
failSwapOn: true
"#,
        socket = socket.display(),
        cert = files.serving_cert.display(),
        key = files.serving_key.display(),
        ca = files.ca_cert.display(),
    )
}

/// Pre-creates the cgroup root in every cgroup v1 hierarchy (kubelet requires it to exist),
/// with `cpuset.cpus`/`cpuset.mems` copied from the parent so tasks may join it.
pub(crate) fn create_cgroup_root(cgroup_root: &str) -> Result<(), TestEnvError> {
    let hierarchies = std::fs::read_dir("/sys/fs/cgroup")
        .map_err(|e| TestEnvError::io("listing /sys/fs/cgroup", e))?;
    for entry in hierarchies.flatten() {
        let hierarchy = entry.path();
        if entry.file_name() == "unified" || !hierarchy.is_dir() {
            continue;
        }
        let dir = hierarchy.join(cgroup_root);
        std::fs::create_dir_all(&dir)
            .map_err(|e| TestEnvError::io(format!("creating cgroup {}", dir.display()), e))?;
        for file in ["cpuset.cpus", "cpuset.mems"] {
            if let Ok(value) = std::fs::read_to_string(hierarchy.join(file)) {
                std::fs::write(dir.join(file), value)
                    .map_err(|e| TestEnvError::io(format!("writing {file}"), e))?;
            }
        }
    }
    Ok(())
}

/// Starts kubelet, waits for its health endpoint and for the Node to report Ready.
pub async fn start(
    binary: &Path,
    plane_dir: &Path,
    node_dir: &Path,
    config_text: &str,
    files: &KubeletFiles,
    client: kube::Client,
) -> Result<ManagedProcess, TestEnvError> {
    let config_path = node_dir.join("kubelet-config.yaml");
    std::fs::write(&config_path, config_text)
        .map_err(|e| TestEnvError::io("writing the kubelet configuration", e))?;
    let root = node_dir.join("kubelet");
    let args = vec![
        format!("--config={}", config_path.display()),
        format!("--kubeconfig={}", files.kubeconfig.display()),
        format!("--root-dir={}", root.display()),
        format!("--cert-dir={}", root.join("pki").display()),
        format!("--hostname-override={NODE_NAME}"),
        format!("--node-ip={NODE_IP}"),
        "-v=1".to_string(),
    ];
    let mut process = ManagedProcess::spawn("kubelet", binary, &args, plane_dir)?;
    let url = format!("http://127.0.0.1:{HEALTHZ_PORT}/healthz");
    wait_healthz(&mut process, READY_TIMEOUT, &url).await?;
    let nodes: Api<Node> = Api::all(client);
    wait_ready(&mut process, READY_TIMEOUT, || async {
        let node = nodes.get_opt(NODE_NAME).await.map_err(|e| e.to_string())?;
        let node = node.ok_or_else(|| format!("node {NODE_NAME} not registered yet"))?;
        let ready = node
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .into_iter()
            .find(|c| c.type_ == "Ready");
        match ready {
            Some(c) if c.status == "True" => Ok(()),
            Some(c) => Err(format!(
                "node Ready={}: {}",
                c.status,
                c.message.unwrap_or_default()
            )),
            None => Err("node has no Ready condition yet".to_string()),
        }
    })
    .await?;
    Ok(process)
}
