//! Removing what a node leaves behind once its processes are stopped: pod processes, containerd
//! shims, mounts and cgroups. Run by the plane's shutdown and by the watchdog after a crash.
//!
//! The watchdog first stops the recorded processes (kubelet and containerd among them), then runs
//! `<plane dir>/node-cleanup.sh` if it exists. Containers live in kubelet's cgroup subtree (a name
//! unique to the plane, in every v1 hierarchy), shims name the node directory on their command
//! line, and every mount is under the node directory in the private mount namespace, so each can
//! be found without touching anything else on the machine. Network devices and iptables rules
//! go away with the network namespace, once its last process (the watchdog) has exited.

use std::path::Path;

use super::super::TestEnvError;

/// File name of the script inside the plane directory (the watchdog looks for it).
pub(crate) const SCRIPT_NAME: &str = "node-cleanup.sh";

/// `$1` = node directory, `$2` = cgroup root name (one path segment).
const SCRIPT: &str = r#"
node=$1; cg=$2
case $cg in ''|*/*|.|..) exit 1;; esac
kill_cgroup_members() {
  local found=1 round
  for round in $(seq 20); do
    found=0
    for f in $(find /sys/fs/cgroup/*/"$cg" -name cgroup.procs 2>/dev/null); do
      for pid in $(cat "$f" 2>/dev/null); do found=1; kill -KILL "$pid" 2>/dev/null; done
    done
    [ "$found" = 0 ] && return 0
    sleep 0.2
  done
}
kill_cgroup_members
# containerd shims (and anything else) started with a path under the node directory
for p in /proc/[0-9]*; do
  pid=${p#/proc/}
  [ "$pid" = "$$" ] && continue
  cmd=$(tr '\0' ' ' < "$p/cmdline" 2>/dev/null) || continue
  case $cmd in *"$node/"*) kill -KILL "$pid" 2>/dev/null;; esac
done
kill_cgroup_members
sleep 0.3
# mounts under the node directory (overlay roots, pod volumes, pod netns handles), deepest first
for _ in 1 2 3; do
  mounts=$(awk -v d="$node/" 'index($2, d) == 1 { print $2 }' /proc/self/mounts | sort -r)
  [ -z "$mounts" ] && break
  for m in $mounts; do umount -l "$m" 2>/dev/null; done
done
for h in /sys/fs/cgroup/*; do
  [ -d "$h/$cg" ] || continue
  for _ in $(seq 20); do
    find "$h/$cg" -depth -type d -exec rmdir {} \; 2>/dev/null
    [ -d "$h/$cg" ] || break
    sleep 0.2
  done
done
exit 0
"#;

/// Writes the cleanup script for a node whose state is in `node_dir` and whose cgroups are under
/// `cgroup_root` into `plane_dir`.
pub(crate) fn write_script(
    plane_dir: &Path,
    node_dir: &Path,
    cgroup_root: &str,
) -> Result<(), TestEnvError> {
    let body = format!(
        "#!/bin/bash\n# Removes the node's pods, shims, mounts and cgroups (see src/testenv/node/cleanup.rs).\nset -- {} {}\n{SCRIPT}",
        shell_quote(&node_dir.display().to_string()),
        shell_quote(cgroup_root),
    );
    let path = plane_dir.join(SCRIPT_NAME);
    std::fs::write(&path, body).map_err(|e| TestEnvError::io("writing the node cleanup script", e))
}

/// Runs the script written by [`write_script`], if any, and waits for it.
pub fn run_script(plane_dir: &Path) {
    let path = plane_dir.join(SCRIPT_NAME);
    if path.is_file() {
        let _ = std::process::Command::new("bash")
            .arg(&path)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
    }
}

fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn script_names_the_node_directory_and_cgroup_quoted() {
        let dir = tempfile::tempdir().expect("temp dir");
        write_script(dir.path(), Path::new("/tmp/a'b/node"), "cftunnel-x").expect("write");
        let text = std::fs::read_to_string(dir.path().join(SCRIPT_NAME)).expect("read");
        assert!(text.contains(r"set -- '/tmp/a'\''b/node' 'cftunnel-x'"));
    }
}
