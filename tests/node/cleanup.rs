//! Nothing of a node is left: no process, mount, cgroup or directory — after a normal stop and
//! after the test process was SIGKILLed (then the watchdog cleans up).

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cftunnel_testenv::ControlPlane;
use cftunnel_testenv::node::rerun_in_private_namespaces;

use super::pods;

const REPORT_ENV: &str = "CFTUNNEL_NODE_TEST_REPORT";
const CLEANUP_WAIT: Duration = Duration::from_secs(60);

/// What a running node occupies, recorded to check it is gone later.
#[derive(Debug)]
pub struct Footprint {
    pids: Vec<u32>,
    dir: PathBuf,
    cgroup_root: String,
    netns: String,
}

impl Footprint {
    pub fn of(plane: &ControlPlane) -> Footprint {
        let node = plane.node().expect("plane has a node");
        Footprint {
            pids: plane.pids(),
            dir: plane.dir().to_path_buf(),
            cgroup_root: node.cgroup_root().to_string(),
            netns: std::fs::read_link("/proc/self/ns/net")
                .map(|l| l.display().to_string())
                .unwrap_or_default(),
        }
    }

    fn to_report(&self) -> String {
        let pids: Vec<String> = self.pids.iter().map(u32::to_string).collect();
        format!(
            "{}\n{}\n{}\n{}\n",
            pids.join(" "),
            self.dir.display(),
            self.cgroup_root,
            self.netns
        )
    }

    fn from_report(text: &str) -> Footprint {
        let mut lines = text.lines();
        let mut next = || lines.next().unwrap_or_default().to_string();
        let pids = next()
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect();
        Footprint {
            pids,
            dir: PathBuf::from(next()),
            cgroup_root: next(),
            netns: next(),
        }
    }

    /// What is still there; empty once everything is gone.
    fn leftovers(&self, check_netns: bool) -> Vec<String> {
        let mut left = Vec::new();
        for pid in &self.pids {
            if alive(*pid) {
                left.push(format!("process {pid}"));
            }
        }
        if self.dir.exists() {
            left.push(format!("directory {}", self.dir.display()));
        }
        if let Ok(hierarchies) = std::fs::read_dir("/sys/fs/cgroup") {
            for h in hierarchies.flatten() {
                let cg = h.path().join(&self.cgroup_root);
                if cg.exists() {
                    left.push(format!("cgroup {}", cg.display()));
                }
            }
        }
        let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
        let dir = self.dir.display().to_string();
        for line in mounts
            .lines()
            .filter(|l| l.split(' ').nth(1).is_some_and(|m| m.starts_with(&dir)))
        {
            left.push(format!("mount {line}"));
        }
        for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|p| p.parse::<u32>().ok())
            else {
                continue;
            };
            if pid == std::process::id() || !alive(pid) {
                continue;
            }
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            if String::from_utf8_lossy(&cmdline).contains(&dir) {
                left.push(format!("process {pid} naming {dir}"));
            }
            let netns = std::fs::read_link(entry.path().join("ns/net")).ok();
            if check_netns && netns.is_some_and(|n| n.display().to_string() == self.netns) {
                left.push(format!(
                    "process {pid} in the node's network namespace {}",
                    self.netns
                ));
            }
        }
        left
    }

    fn wait_gone(&self, check_netns: bool) {
        let deadline = Instant::now() + CLEANUP_WAIT;
        loop {
            let left = self.leftovers(check_netns);
            if left.is_empty() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "left behind after {CLEANUP_WAIT:?}: {left:#?}"
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// After a normal stop, from inside the (still living) namespaces.
    pub fn assert_gone(&self) {
        self.wait_gone(false);
    }
}

/// A pid counts as gone once it has no /proc entry or is a zombie nobody reaped yet.
fn alive(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let state = stat
        .rsplit_once(") ")
        .and_then(|(_, rest)| rest.chars().next());
    !matches!(state, Some('Z') | Some('X') | None)
}

/// In the child: a node with a running pod, reported, then SIGKILL of the whole test process.
pub async fn start_pod_and_die() {
    let Ok(report) = std::env::var(REPORT_ENV) else {
        panic!(
            "{REPORT_ENV} not set: this test runs only as the child of node_is_cleaned_up_after_sigkill"
        );
    };
    let plane = super::start_node(Default::default()).await;
    let ns = plane
        .create_namespace("node-kill")
        .await
        .expect("namespace");
    pods::create_hardened_pod(&plane, &ns, "victim").await;
    let container = pods::container_pid(&plane, &ns, "victim", "main").await;
    let mut footprint = Footprint::of(&plane);
    footprint.pids.push(container);
    std::fs::write(&report, footprint.to_report()).expect("write report");
    let _ = std::process::Command::new("kill")
        .args(["-KILL", &std::process::id().to_string()])
        .status();
    tokio::time::sleep(Duration::from_secs(60)).await;
    panic!("still alive after SIGKILL");
}

/// In the parent: runs the child, which dies by SIGKILL, and checks the watchdog removed the
/// processes (control plane, kubelet, containerd, the pod's container), mounts, cgroups, the
/// directory, and that no process is left in the child's network namespace (so it is gone).
pub fn sigkill_child_and_check() {
    let report = tempfile::NamedTempFile::new().expect("report file");
    let path = report.path().display().to_string();
    let status = rerun_in_private_namespaces(
        "node_is_cleaned_up_after_sigkill",
        &[],
        &[(REPORT_ENV, &path)],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let text = std::fs::read_to_string(report.path()).unwrap_or_default();
    assert_eq!(
        status.signal(),
        Some(9),
        "child status {status}; report: {text:?}"
    );
    let footprint = Footprint::from_report(&text);
    assert!(footprint.pids.len() >= 7, "child reported {footprint:?}");
    assert!(
        Path::new(&footprint.netns).as_os_str().len() > 4,
        "netns in report: {footprint:?}"
    );
    footprint.wait_gone(true);
}
