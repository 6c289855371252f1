//! The private network and mount namespaces a node runs in, and what the node needs inside them.
//!
//! A multi-threaded test process cannot move itself into new namespaces, so a node test
//! re-executes its own binary under `unshare --net --mount --propagation slave` (util-linux)
//! with [`INSIDE_ENV`] set. A new network namespace holds only `lo`: nothing that runs in it —
//! the control plane, containerd, kubelet, every pod — can send a packet off the machine. The
//! private mount namespace keeps containerd's and kubelet's mounts (overlay roots, pod volumes,
//! the sysctl stand-ins below) away from the host; it and the network namespace vanish with
//! their last process. `ip netns exec` is not used: it remounts `/sys`, hiding the cgroups.

use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};

use super::super::TestEnvError;
use super::{KUBERNETES_SERVICE_IP, NODE_IP};

/// Set (to "1") in a test process re-executed inside its own network and mount namespaces.
pub(crate) const INSIDE_ENV: &str = "CFTUNNEL_NODE_NAMESPACES";

/// Global sysctls kubelet rewrites unless they already hold these values (its
/// `protectKernelDefaults: false` behaviour). Inside the private mount namespace a file with the
/// wanted value is bind-mounted over each differing one, so the host keeps its own settings.
const KUBELET_SYSCTLS: [(&str, &str); 6] = [
    ("vm/overcommit_memory", "1"),
    ("vm/panic_on_oom", "0"),
    ("kernel/panic", "10"),
    ("kernel/panic_on_oops", "1"),
    ("kernel/keys/root_maxkeys", "1000000"),
    ("kernel/keys/root_maxbytes", "25000000"),
];

/// Host paths containerd's shims (`/run/containerd/s`, fixed in containerd 1.6) and the CNI
/// result cache (`/var/lib/cni`) write to; a tmpfs over each keeps those files in the private
/// mount namespace. An absent directory is created (empty) on the host to mount over.
const PRIVATE_TMPFS: [&str; 2] = ["/run/containerd", "/var/lib/cni"];

/// Whether this process was started by [`rerun_in_private_namespaces`].
pub fn inside_private_namespaces() -> bool {
    std::env::var(INSIDE_ENV).is_ok_and(|v| v == "1")
}

/// Runs test `test_name` of the current test binary inside new network and mount namespaces and
/// waits for it; its output goes to this process's stdout and stderr. `envs` are added.
pub fn rerun_in_private_namespaces(
    test_name: &str,
    extra_args: &[&str],
    envs: &[(&str, &str)],
) -> Result<ExitStatus, TestEnvError> {
    let exe = std::env::current_exe()
        .map_err(|e| TestEnvError::io("locating the running test binary", e))?;
    Command::new("unshare")
        .args(["--net", "--mount", "--propagation", "slave", "--"])
        .arg(exe)
        .args(["--exact", test_name, "--nocapture", "--test-threads=1"])
        .args(extra_args)
        .env(INSIDE_ENV, "1")
        .envs(envs.iter().copied())
        .stdin(Stdio::null())
        .status()
        .map_err(|e| TestEnvError::io("running `unshare` (util-linux) for a node test", e))
}

/// Fails unless this process runs in namespaces of its own with no route off the machine.
pub(crate) fn require_private() -> Result<(), TestEnvError> {
    if !inside_private_namespaces() {
        return Err(TestEnvError::NotPrivate(format!(
            "{INSIDE_ENV} is not set; run the test through testenv::node::rerun_in_private_namespaces"
        )));
    }
    // The property that matters, checked directly: no route to a public address.
    let route = run_output("ip", &["-4", "route", "get", "1.1.1.1"])?;
    if route.status.success() {
        return Err(TestEnvError::NotPrivate(format!(
            "this network namespace routes off the machine: {}",
            String::from_utf8_lossy(&route.stdout).trim()
        )));
    }
    Ok(())
}

/// `lo` up with the node address on it (kubelet refuses a loopback `--node-ip`, and this kernel
/// has no `dummy` links), the sysctl stand-ins and the private tmpfs mounts.
pub fn prepare(state_dir: &Path) -> Result<(), TestEnvError> {
    run("ip", &["link", "set", "lo", "up"])?;
    run(
        "ip",
        &["addr", "replace", &format!("{NODE_IP}/32"), "dev", "lo"],
    )?;
    let sysctl_dir = state_dir.join("sysctl");
    std::fs::create_dir_all(&sysctl_dir)
        .map_err(|e| TestEnvError::io("creating the sysctl directory", e))?;
    for (key, wanted) in KUBELET_SYSCTLS {
        let proc_path = format!("/proc/sys/{key}");
        let current = std::fs::read_to_string(&proc_path).unwrap_or_default();
        if current.trim() == wanted {
            continue;
        }
        let stand_in = sysctl_dir.join(key.replace('/', "_"));
        std::fs::write(&stand_in, format!("{wanted}\n"))
            .map_err(|e| TestEnvError::io(format!("writing {}", stand_in.display()), e))?;
        run(
            "mount",
            &["--bind", &stand_in.display().to_string(), &proc_path],
        )?;
    }
    for path in PRIVATE_TMPFS {
        std::fs::create_dir_all(path)
            .map_err(|e| TestEnvError::io(format!("creating {path}"), e))?;
        run("mount", &["-t", "tmpfs", "-o", "mode=0711", "tmpfs", path])?;
    }
    Ok(())
}

/// Pods reach the API server through the `kubernetes` Service as in any cluster: one DNAT rule
/// in this namespace sends `10.96.0.1:443` to the API server (instead of kube-proxy, which would
/// do the same for this one Service). Pod traffic is routed through the bridge, so PREROUTING
/// sees it; the rule goes away with the namespace.
pub(crate) fn route_kubernetes_service(apiserver_port: u16) -> Result<(), TestEnvError> {
    run(
        "iptables",
        &[
            "-t",
            "nat",
            "-A",
            "PREROUTING",
            "-d",
            &format!("{KUBERNETES_SERVICE_IP}/32"),
            "-p",
            "tcp",
            "--dport",
            "443",
            "-j",
            "DNAT",
            "--to-destination",
            &format!("{NODE_IP}:{apiserver_port}"),
        ],
    )
}

/// Runs a command to completion and fails with its stderr unless it succeeded.
pub(crate) fn run(program: &str, args: &[&str]) -> Result<(), TestEnvError> {
    let output = run_output(program, args)?;
    if output.status.success() {
        Ok(())
    } else {
        Err(TestEnvError::CommandFailed {
            command: format!("{program} {}", args.join(" ")),
            status: output.status.to_string(),
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_string(),
        })
    }
}

fn run_output(program: &str, args: &[&str]) -> Result<std::process::Output, TestEnvError> {
    Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| TestEnvError::io(format!("running {program}"), e))
}
