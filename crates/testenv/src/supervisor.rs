//! A watchdog process that cleans up after the owning process, even if it panicked or was SIGKILLed.
//!
//! A `static` is never dropped and SIGKILL runs no destructor, so cleanup cannot rely on `Drop`.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use super::TestEnvError;
use super::process::PIDS_FILE;

/// Waits for the owner to go (or the directory to vanish), then stops the recorded processes in
/// reverse start order (SIGTERM, up to 5 s, SIGKILL) and removes the directory. A pid is only
/// signalled while its command line still names the directory, so a recycled pid is left alone.
const WATCHDOG_SCRIPT: &str = r#"
owner=$1; dir=$2
alive() {
  [ -r "/proc/$1/stat" ] || return 1
  state=$(sed -n 's/.*) \(.\) .*/\1/p' "/proc/$1/stat" 2>/dev/null)
  [ -n "$state" ] && [ "$state" != Z ] && [ "$state" != X ]
}
ours() { alive "$1" && tr '\0' '\n' < "/proc/$1/cmdline" 2>/dev/null | grep -qF -- "$dir"; }
pids=""
while alive "$owner" && [ -d "$dir" ]; do
  [ -f "$dir/PIDS" ] && pids=$(tac "$dir/PIDS" 2>/dev/null)
  sleep 0.5
done
[ -f "$dir/PIDS" ] && pids=$(tac "$dir/PIDS" 2>/dev/null)
for pid in $pids; do
  ours "$pid" || continue
  kill -TERM "$pid" 2>/dev/null
  for _ in $(seq 50); do ours "$pid" || break; sleep 0.1; done
  ours "$pid" && kill -KILL "$pid" 2>/dev/null
done
# a node's pods, shims, mounts and cgroups (src/testenv/node/cleanup.rs)
[ -f "$dir/NODE_CLEANUP" ] && bash "$dir/NODE_CLEANUP" >/dev/null 2>&1
rm -rf -- "$dir"
"#;

/// The running watchdog of one control plane.
#[derive(Debug)]
pub(crate) struct Watchdog {
    child: Child,
}

impl Watchdog {
    /// Starts the watchdog for `dir`, owned by the current process.
    pub fn start(dir: &Path) -> Result<Watchdog, TestEnvError> {
        let script = WATCHDOG_SCRIPT
            .replace("PIDS", PIDS_FILE)
            .replace("NODE_CLEANUP", super::node::cleanup::SCRIPT_NAME);
        let child = Command::new("bash")
            .arg("-c")
            .arg(script)
            .arg("cftunnel-testenv-watchdog")
            .arg(std::process::id().to_string())
            .arg(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            // Its own process group: a Ctrl-C aimed at the tests must not kill the cleaner.
            .process_group(0)
            .spawn()
            .map_err(|e| TestEnvError::io("starting the cleanup watchdog (bash)", e))?;
        Ok(Watchdog { child })
    }

    /// Ends the watchdog once the owner has cleaned up by itself.
    pub(crate) fn dismiss(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
