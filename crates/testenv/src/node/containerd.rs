//! containerd (Debian's 1.6) with its CRI plugin, runc and the CNI bridge, all state in the node
//! directory; images are imported from OCI archives because the node has no registry.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use super::super::TestEnvError;
use super::super::process::{ManagedProcess, wait_ready};
use super::{POD_CIDR, images};

const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// Directory of the Debian package containernetworking-plugins.
const CNI_BIN_DIR: &str = "/usr/lib/cni";
/// Name of the CNI bridge inside the node's network namespace.
const BRIDGE: &str = "cftunnel0";

/// The socket path; kept short (a unix socket path has at most 107 bytes).
pub fn socket(node_dir: &Path) -> PathBuf {
    node_dir.join("containerd.sock")
}

/// The configuration. Required here: `restrict_oom_score_adj` (the pause container asks for
/// oom_score_adj -998, which needs CAP_SYS_RESOURCE: without it runc fails with "can't get
/// final child's PID from pipe: EOF"), the locally built `sandbox_image`, runc with
/// `SystemdCgroup = false` (kubelet's cgroupfs driver), and pod netns handles under the state
/// directory instead of `/run/netns`.
pub fn config(node_dir: &Path) -> String {
    let d = node_dir.display();
    let pause = images::PAUSE_IMAGE;
    format!(
        r#"version = 2
root = "{d}/containerd/root"
state = "{d}/containerd/state"
[grpc]
  address = "{d}/containerd.sock"
[plugins."io.containerd.internal.v1.opt"]
  path = "{d}/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{pause}"
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  disable_tcp_service = true
  stream_server_address = "127.0.0.1"
  disable_hugetlb_controller = true
  tolerate_missing_hugetlb_controller = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "{d}/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{CNI_BIN_DIR}"
    conf_dir = "{d}/cni"
    max_conf_num = 1
"#
    )
}

/// One bridge network with host-local addresses from [`POD_CIDR`]; the bridge is the pods'
/// default gateway, so their traffic is routed (and DNATed) by the node's namespace.
pub(crate) fn cni_config(node_dir: &Path) -> String {
    let ipam_dir = node_dir.join("cni-ipam");
    serde_json::json!({
        "cniVersion": "0.4.0",
        "name": "cftunnel-pods",
        "plugins": [{
            "type": "bridge",
            "bridge": BRIDGE,
            "isGateway": true,
            "ipMasq": false,
            "hairpinMode": true,
            "ipam": {
                "type": "host-local",
                "ranges": [[{"subnet": POD_CIDR}]],
                "routes": [{"dst": "0.0.0.0/0"}],
                "dataDir": ipam_dir.display().to_string(),
            }
        }]
    })
    .to_string()
}

/// Writes the configurations, starts containerd (log and pid in `plane_dir`, where the watchdog
/// looks) and waits until `ctr version` answers.
pub async fn start(plane_dir: &Path, node_dir: &Path) -> Result<ManagedProcess, TestEnvError> {
    let cni_dir = node_dir.join("cni");
    std::fs::create_dir_all(&cni_dir).map_err(|e| TestEnvError::io("creating the CNI dir", e))?;
    write(&cni_dir.join("10-cftunnel.conflist"), &cni_config(node_dir))?;
    let config_path = node_dir.join("containerd.toml");
    write(&config_path, &config(node_dir))?;
    let mut process = ManagedProcess::spawn(
        "containerd",
        Path::new("containerd"),
        &["--config".to_string(), config_path.display().to_string()],
        plane_dir,
    )?;
    let socket = socket(node_dir);
    wait_ready(&mut process, READY_TIMEOUT, || {
        let mut command = ctr(&socket);
        async move {
            let output = command
                .arg("version")
                .output()
                .map_err(|e| format!("running ctr: {e}"))?;
            if output.status.success() {
                Ok(())
            } else {
                Err(String::from_utf8_lossy(&output.stderr).trim().to_string())
            }
        }
    })
    .await?;
    Ok(process)
}

/// `ctr` talking to this containerd, in the Kubernetes (`k8s.io`) namespace.
pub fn ctr(socket: &Path) -> Command {
    let mut command = Command::new("ctr");
    command
        .arg("--address")
        .arg(socket)
        .args(["--namespace", "k8s.io"])
        .stdin(Stdio::null());
    command
}

/// Imports an OCI (or docker) archive; the image keeps the name stored in the archive.
pub fn import(socket: &Path, archive: &Path) -> Result<(), TestEnvError> {
    let output = ctr(socket)
        .args(["images", "import"])
        .arg(archive)
        .output()
        .map_err(|e| TestEnvError::io("running ctr images import", e))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(TestEnvError::CommandFailed {
            command: format!("ctr images import {}", archive.display()),
            status: output.status.to_string(),
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_string(),
        })
    }
}

/// The host pid of a running container's first process (`ctr tasks ls`: TASK PID STATUS).
pub(crate) fn task_pid(socket: &Path, container_id: &str) -> Option<u32> {
    let output = ctr(socket).args(["tasks", "ls"]).output().ok()?;
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .find_map(|line| {
            let mut fields = line.split_whitespace();
            let id = fields.next()?;
            let pid = fields.next()?.parse().ok()?;
            (id == container_id).then_some(pid)
        })
}

fn write(path: &Path, text: &str) -> Result<(), TestEnvError> {
    std::fs::write(path, text)
        .map_err(|e| TestEnvError::io(format!("writing {}", path.display()), e))
}
