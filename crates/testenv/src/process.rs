//! Child processes with their output captured to log files and their pids recorded for the watchdog.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::TestEnvError;

/// File (inside the control-plane directory) listing every started pid, one per line.
pub(crate) const PIDS_FILE: &str = "pids";

/// How long a process gets between SIGTERM and SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// A started component of the control plane.
#[derive(Debug)]
pub struct ManagedProcess {
    pub name: &'static str,
    pub log: PathBuf,
    child: Child,
}

impl ManagedProcess {
    /// Starts `program args`, sending stdout and stderr to `<dir>/<name>.log`.
    pub fn spawn(
        name: &'static str,
        program: &Path,
        args: &[String],
        dir: &Path,
    ) -> Result<ManagedProcess, TestEnvError> {
        let log = dir.join(format!("{name}.log"));
        let out = File::create(&log)
            .map_err(|e| TestEnvError::io(format!("creating {}", log.display()), e))?;
        let err = out
            .try_clone()
            .map_err(|e| TestEnvError::io("duplicating a log handle", e))?;
        let child = Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| TestEnvError::io(format!("starting {}", program.display()), e))?;
        record_pid(dir, child.id())?;
        Ok(ManagedProcess { name, log, child })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The exit status if the process has ended (a dead process is never ready).
    pub(crate) fn exit_status(&mut self) -> Option<String> {
        match self.child.try_wait() {
            Ok(Some(status)) => Some(status.to_string()),
            Ok(None) => None,
            Err(e) => Some(format!("unknown ({e})")),
        }
    }

    /// The last lines of this process's log, for error messages.
    pub(crate) fn log_tail(&self) -> String {
        log_tail(&self.log, 40)
    }

    /// SIGTERM, a grace period, then SIGKILL; always reaps the child.
    pub fn stop(&mut self) {
        if self.exit_status().is_some() {
            return;
        }
        // `kill` the command: sending SIGTERM from Rust would need libc and unsafe.
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.pid().to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let deadline = Instant::now() + STOP_GRACE;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Polls `probe` until it succeeds, failing early (with the log tail) if the process dies.
pub async fn wait_ready<F, Fut>(
    process: &mut ManagedProcess,
    timeout: Duration,
    mut probe: F,
) -> Result<(), TestEnvError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), String>>,
{
    let started = Instant::now();
    loop {
        if let Some(status) = process.exit_status() {
            return Err(TestEnvError::ProcessExited {
                process: process.name,
                status,
                log_tail: process.log_tail(),
            });
        }
        let last_error = match probe().await {
            Ok(()) => return Ok(()),
            Err(e) => e,
        };
        if started.elapsed() >= timeout {
            return Err(TestEnvError::NotReady {
                process: process.name,
                secs: timeout.as_secs(),
                last_error,
                log_tail: process.log_tail(),
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until a component's `/healthz` at `url` answers `ok` with a success status. The
/// components' serving certificates are self-signed and the probe sends nothing secret, so the
/// certificate is not verified.
pub(crate) async fn wait_healthz(
    process: &mut ManagedProcess,
    timeout: Duration,
    url: &str,
) -> Result<(), TestEnvError> {
    let http = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .timeout(Duration::from_secs(2))
        .build()
        .map_err(|e| TestEnvError::io("building an HTTP client", std::io::Error::other(e)))?;
    wait_ready(process, timeout, || async {
        let response = http.get(url).send().await.map_err(|e| e.to_string())?;
        let status = response.status();
        let body = response.text().await.map_err(|e| e.to_string())?;
        if status.is_success() && body.trim() == "ok" {
            Ok(())
        } else {
            Err(format!("healthz {status}: {body}"))
        }
    })
    .await
}

fn record_pid(dir: &Path, pid: u32) -> Result<(), TestEnvError> {
    let path = dir.join(PIDS_FILE);
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(|e| TestEnvError::io("recording a pid", e))?;
    writeln!(file, "{pid}").map_err(|e| TestEnvError::io("recording a pid", e))
}

/// The last `lines` lines of a log file, or a note saying why it could not be read.
pub(crate) fn log_tail(path: &Path, lines: usize) -> String {
    match std::fs::read(path) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            let all: Vec<&str> = text.lines().collect();
            all[all.len().saturating_sub(lines)..].join("\n")
        }
        Err(e) => format!("(cannot read {}: {e})", path.display()),
    }
}

/// How many times a component is started on fresh ports when the ones it was given were taken.
pub(crate) const PORT_ATTEMPTS: u32 = 5;

/// Runs `start`, which picks its ports with [`crate::free_port`], again (up to [`PORT_ATTEMPTS`] in all)
/// while it fails because a port was taken. A port from [`crate::free_port`] is only free until the
/// process binds it; in between, any socket of another test on this machine may take it as its
/// ephemeral port (CI saw etcd exit with `bind: address already in use`).
pub(crate) async fn on_free_ports<T, F, Fut>(start: F) -> Result<T, TestEnvError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, TestEnvError>>,
{
    while_port_taken(PORT_ATTEMPTS, Duration::ZERO, start).await
}

/// Runs `start` again, `pause` after each failure, while it fails because a port was taken, up
/// to `attempts` runs in all. With a pause it serves a process that must come back on the port
/// it had: an outbound connection that took the port meanwhile is usually short.
pub(crate) async fn while_port_taken<T, F, Fut>(
    attempts: u32,
    pause: Duration,
    mut start: F,
) -> Result<T, TestEnvError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, TestEnvError>>,
{
    let mut attempt = 1;
    loop {
        match start().await {
            Err(e) if attempt < attempts && port_was_taken(&e) => {
                attempt += 1;
                tokio::time::sleep(pause).await;
            }
            other => return other,
        }
    }
}

/// Whether a component exited because a port it was to listen on was in use.
pub(crate) fn port_was_taken(error: &TestEnvError) -> bool {
    matches!(error, TestEnvError::ProcessExited { log_tail, .. } if log_tail.contains("address already in use"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_tail_keeps_only_the_last_lines() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("x.log");
        std::fs::write(&path, "one\ntwo\nthree\nfour\n").expect("write");
        assert_eq!(log_tail(&path, 2), "three\nfour");
        assert_eq!(log_tail(&path, 10), "one\ntwo\nthree\nfour");
    }

    fn exited(log_tail: &str) -> TestEnvError {
        TestEnvError::ProcessExited {
            process: "etcd",
            status: "exit status: 1".to_string(),
            log_tail: log_tail.to_string(),
        }
    }

    #[tokio::test]
    async fn a_start_is_tried_again_only_while_its_port_was_taken() {
        let mut calls = 0;
        let result = on_free_ports(|| {
            calls += 1;
            let n = calls;
            async move {
                match n {
                    1 | 2 => Err(exited(
                        "listen tcp 127.0.0.1:1: bind: address already in use",
                    )),
                    _ => Ok(n),
                }
            }
        })
        .await;
        assert_eq!(result.ok(), Some(3));

        let mut calls = 0;
        let result: Result<(), _> = on_free_ports(|| {
            calls += 1;
            async { Err(exited("flag provided but not defined")) }
        })
        .await;
        assert!(result.is_err());
        assert_eq!(calls, 1, "any other failure is returned at once");

        let mut calls = 0;
        let result: Result<(), _> = on_free_ports(|| {
            calls += 1;
            async { Err(exited("bind: address already in use")) }
        })
        .await;
        assert!(result.is_err());
        assert_eq!(
            calls, PORT_ATTEMPTS,
            "gives up after a bounded number of tries"
        );
    }
}
