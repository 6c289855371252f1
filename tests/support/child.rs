//! Running a test of this binary in a child process and checking it left nothing behind.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::time::{Duration, Instant};

pub const CHILD_MODE_ENV: &str = "CFTUNNEL_TESTENV_CHILD_MODE";
pub const CHILD_REPORT_ENV: &str = "CFTUNNEL_TESTENV_CHILD_REPORT";

/// A pid counts as gone once it has no /proc entry or is a zombie nobody reaped yet.
pub fn alive(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let state = stat
        .rsplit_once(") ")
        .and_then(|(_, rest)| rest.chars().next());
    !matches!(state, Some('Z') | Some('X') | None)
}

/// Runs the helper in a child test process and returns its exit status, pids and directory.
pub fn run_child(mode: &str) -> (ExitStatus, Vec<u32>, PathBuf) {
    let report = tempfile::NamedTempFile::new().expect("report file");
    let output = Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            "cleanup_child_helper",
            "--ignored",
            "--nocapture",
        ])
        .env(CHILD_MODE_ENV, mode)
        .env(CHILD_REPORT_ENV, report.path())
        .output()
        .expect("child runs");
    let text = std::fs::read_to_string(report.path()).unwrap_or_default();
    let mut lines = text.lines();
    let pids: Vec<u32> = lines
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect();
    let dir = PathBuf::from(lines.next().unwrap_or_default());
    assert_eq!(
        pids.len(),
        3,
        "child did not report etcd, kube-apiserver and kube-controller-manager; stderr:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status, pids, dir)
}

pub fn assert_cleaned_up(pids: &[u32], dir: &Path) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if !pids.iter().any(|p| alive(*p)) && !dir.exists() {
            return;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let living: Vec<u32> = pids.iter().copied().filter(|p| alive(*p)).collect();
    panic!(
        "left behind: live pids {living:?}, directory exists: {}",
        dir.exists()
    );
}

/// Child control planes are heavy on 2 cores: one at a time.
pub static CHILD_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
