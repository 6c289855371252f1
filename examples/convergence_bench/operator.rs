//! `cftunnel run` as a child process of a benchmark, against a local control plane and the
//! Cloudflare simulator, its webhook on a loopback port with a certificate of the plane's CA.
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use cftunnel_testenv::ControlPlane;

/// How the operator is started, beside its binary and where it finds the plane and Cloudflare.
pub struct OperatorOptions<'a> {
    /// Its logs (one file per start) go here; the plane's directory when `None`.
    pub log_dir: Option<&'a Path>,
    /// Its `RUST_LOG`.
    pub log_filter: &'a str,
    /// Its `--cloudflare-budget`, its default when `None`.
    pub cloudflare_budget: Option<&'a str>,
    /// A command (split at spaces) that runs the operator, its arguments appended.
    pub under: Option<&'a str>,
}

/// A loopback port free now (the operator listens there, across its restart).
pub fn free_loopback_port() -> anyhow::Result<std::net::SocketAddr> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?)
}

/// Waits until something accepts connections at `addr`.
pub async fn wait_listening(addr: std::net::SocketAddr) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(120);
    while tokio::net::TcpStream::connect(addr).await.is_err() {
        if Instant::now() > deadline {
            bail!("the operator's webhook never listened at {addr}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}

/// `cftunnel run` as a child process, its log in a file, killed when dropped.
pub struct Operator {
    child: Option<Child>,
    log: PathBuf,
    peak_rss_kib: u64,
}

impl Operator {
    pub fn start(
        plane: &ControlPlane,
        binary: &Path,
        cloudflare_url: &str,
        webhook: std::net::SocketAddr,
        options: &OperatorOptions<'_>,
    ) -> anyhow::Result<Operator> {
        let dir = plane.dir().join("bench-operator");
        std::fs::create_dir_all(&dir)?;
        let log_dir = options
            .log_dir
            .map_or_else(|| dir.clone(), Path::to_path_buf);
        std::fs::create_dir_all(&log_dir)?;
        let cert = plane.ca().issue_server_cert(&["127.0.0.1"])?;
        std::fs::write(dir.join("tls.crt"), &cert.cert_pem)?;
        std::fs::write(dir.join("tls.key"), &cert.key_pem)?;
        let log = log_dir.join(format!("cftunnel-{}.log", unique()));
        let mut command = match options.under.map(str::split_whitespace) {
            Some(mut words) => {
                let program = words.next().context("--restart-under is empty")?;
                let mut command = Command::new(program);
                command.args(words);
                command
            }
            None => Command::new(binary),
        };
        // A process group of its own: a wrapper (`--restart-under heaptrack …`, a script) is
        // stopped with what it runs, not leaving the operator behind it running.
        let child = command
            .process_group(0)
            .args(["run", "--webhook-listen", &webhook.to_string()])
            .args(["--health-listen", "127.0.0.1:0"])
            .arg("--tls-cert-file")
            .arg(dir.join("tls.crt"))
            .arg("--tls-key-file")
            .arg(dir.join("tls.key"))
            .args(["--certificate-mode", "files", "--leader-elect", "false"])
            .args(["--cloudflare-api-url", cloudflare_url])
            .args(
                options
                    .cloudflare_budget
                    .iter()
                    .flat_map(|b| ["--cloudflare-budget", b]),
            )
            .env("KUBECONFIG", plane.admin_kubeconfig())
            .env("RUST_LOG", options.log_filter)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log)?)
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))?;
        Ok(Operator {
            child: Some(child),
            log,
            peak_rss_kib: 0,
        })
    }

    /// Fails when the operator exited; samples its peak RSS (the kernel's high-water mark).
    pub fn check(&mut self) -> anyhow::Result<()> {
        let Some(child) = self.child.as_mut() else {
            bail!("the operator is stopped");
        };
        if let Some(status) = child.try_wait()? {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            bail!("cftunnel run exited with {status}:\n{log}");
        }
        if let Some(kib) = status_kib(child.id(), "VmHWM:") {
            self.peak_rss_kib = self.peak_rss_kib.max(kib);
        }
        Ok(())
    }

    /// The operator's resident memory now (0 when it cannot be read).
    pub fn rss_kib(&self) -> u64 {
        self.child
            .as_ref()
            .and_then(|child| status_kib(child.id(), "VmRSS:"))
            .unwrap_or(0)
    }

    /// The running operator's process id.
    pub fn pid(&self) -> anyhow::Result<u32> {
        Ok(self.child.as_ref().context("the operator is stopped")?.id())
    }

    pub fn peak_rss_kib(&mut self) -> u64 {
        let _ = self.check();
        self.peak_rss_kib
    }

    /// SIGTERM (a clean shutdown), then waits for the exit.
    pub fn stop(&mut self) -> anyhow::Result<()> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        signal_group(&child, "-TERM")?;
        let deadline = Instant::now() + Duration::from_secs(60);
        while child.try_wait()?.is_none() {
            if Instant::now() > deadline {
                signal_group(&child, "-KILL")?;
                let _ = child.wait();
                bail!("cftunnel run ignored SIGTERM for 60 s");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(())
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = signal_group(&child, "-KILL");
            let _ = child.wait();
        }
    }
}

/// Sends `signal` to the operator's process group (it leads its own), with the `kill` command:
/// sending it from Rust would need libc and unsafe.
fn signal_group(child: &Child, signal: &str) -> anyhow::Result<()> {
    Command::new("kill")
        .args([signal, "--", &format!("-{}", child.id())])
        .status()?;
    Ok(())
}

fn unique() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default()
}

/// A `kB` figure of the process's `/proc/PID/status` (`field` with its colon).
fn status_kib(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}
