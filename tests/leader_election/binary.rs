//! `cftunnel run` itself: it leads under its pod name and releases its lease on SIGTERM.
use std::process::Command;
use std::time::Duration;

use super::harness::{WAIT, plane, read_record, serving_cert_dir, wait_record};
use crate::install_support::cftunnel_run;

pub async fn run_leads_and_releases_on_sigterm() {
    let plane = plane().await;
    let admin = plane.admin_client().expect("admin client");
    let ns = plane
        .create_namespace("leader-binary")
        .await
        .expect("namespace");
    let dir = serving_cert_dir(plane);
    let (mut command, log_path) = cftunnel_run(dir.path(), plane.admin_kubeconfig());
    let child = command
        .args(["--leader-election-namespace", &ns])
        .args(["--leader-election-id", "cftunnel-binary"])
        .args(["--go-operator-lease-namespace", &ns])
        // Serve the files above; self-managed certificates would need the installed webhooks.
        .args(["--certificate-mode", "files"])
        .env("POD_NAME", "cftunnel-7c9d-xk2p")
        .env("RUST_LOG", "warn,cftunnel::leader=info")
        .spawn()
        .expect("start cftunnel run");
    let mut child = KillOnDrop(Some(child));
    let log = || std::fs::read_to_string(&log_path).unwrap_or_default();
    let held = wait_record(&admin, &ns, "cftunnel-binary", "cftunnel run leads", |r| {
        r.holder.starts_with("cftunnel-7c9d-xk2p_")
    })
    .await;
    assert_eq!(held.duration_seconds, 15);

    let term = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill -TERM");
    assert!(term.success());
    let mut child = child.0.take().expect("child");
    let status = tokio::task::spawn_blocking(move || {
        let deadline = std::time::Instant::now() + WAIT;
        loop {
            match child.try_wait() {
                Ok(Some(status)) => return Some(status),
                Ok(None) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(100));
                }
                _ => {
                    let _ = child.kill();
                    return None;
                }
            }
        }
    })
    .await
    .expect("wait for cftunnel run");
    assert!(
        status.is_some_and(|s| s.success()),
        "cftunnel run did not exit cleanly on SIGTERM: {status:?}\n{}",
        log()
    );
    let text = log();
    assert!(
        !text.contains("WARN") && !text.contains("ERROR"),
        "a normal start and stop logs no warning or error:\n{text}"
    );
    let released = read_record(&admin, &ns, "cftunnel-binary")
        .await
        .expect("lease");
    assert_eq!(released.holder, "", "the lease was not released\n{}", log());
    assert_eq!(released.transitions, held.transitions);
}

/// Kills the child if the test fails before it exits.
struct KillOnDrop(Option<std::process::Child>);

impl KillOnDrop {
    fn id(&self) -> u32 {
        self.0.as_ref().map_or(0, std::process::Child::id)
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
