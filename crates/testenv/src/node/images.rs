//! The pod sandbox ("pause") image, built here because the node has no registry to pull from.
//!
//! A static C program (the machine's `cc`) in a FROM-scratch image made with buildah, written as
//! an OCI archive into the cache (`$CFTUNNEL_CACHE`, else `~/.cache/cftunnel`) once; later runs
//! reuse the archive.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::super::TestEnvError;

/// Name of the sandbox image in containerd (`sandbox_image`); bump the tag when the source changes.
pub const PAUSE_IMAGE: &str = "localhost/cftunnel-pause:1";

/// The sandbox's first process: holds the pod's namespaces, reaps orphans, exits on SIGINT or
/// SIGTERM. The signals stay blocked and are taken with `sigwait`, which also works for a
/// process that is pid 1 of its namespace (signals without a handler would be dropped).
const PAUSE_C: &str = r#"#include <signal.h>
#include <sys/wait.h>

int main(void) {
    sigset_t wanted;
    sigemptyset(&wanted);
    sigaddset(&wanted, SIGCHLD);
    sigaddset(&wanted, SIGINT);
    sigaddset(&wanted, SIGTERM);
    sigprocmask(SIG_BLOCK, &wanted, 0);
    for (;;) {
        int sig = 0;
        if (sigwait(&wanted, &sig) != 0) continue;
        if (sig != SIGCHLD) return 0;
        while (waitpid(-1, 0, WNOHANG) > 0) {}
    }
}
"#;

/// The cache directory for built images.
pub(crate) fn cache_dir() -> Result<PathBuf, TestEnvError> {
    let base = match (std::env::var_os("CFTUNNEL_CACHE"), std::env::var_os("HOME")) {
        (Some(cache), _) => PathBuf::from(cache),
        (None, Some(home)) => PathBuf::from(home).join(".cache").join("cftunnel"),
        (None, None) => return Err(TestEnvError::NoBinaryDir),
    };
    Ok(base.join("images"))
}

/// The pause image's OCI archive, built on first use.
pub(crate) fn pause_archive() -> Result<PathBuf, TestEnvError> {
    let cache = cache_dir()?;
    let tag = PAUSE_IMAGE.rsplit(':').next().unwrap_or("0");
    let archive = cache.join(format!("cftunnel-pause-{tag}.tar"));
    if archive.is_file() {
        return Ok(archive);
    }
    std::fs::create_dir_all(&cache).map_err(|e| TestEnvError::io("creating the image cache", e))?;
    let work = tempfile::Builder::new()
        .prefix("pause-build-")
        .tempdir_in(&cache)
        .map_err(|e| TestEnvError::io("creating a build directory", e))?;
    let source = work.path().join("pause.c");
    let binary = work.path().join("pause");
    std::fs::write(&source, PAUSE_C).map_err(|e| TestEnvError::io("writing pause.c", e))?;
    let (s, b) = (source.display().to_string(), binary.display().to_string());
    run(
        "cc",
        &["-static", "-O2", "-o", &b, &s],
        "building pause (needs a C compiler and static libc)",
    )?;
    let built = work.path().join("pause.tar");
    build_scratch_image(
        work.path(),
        &binary,
        "/pause",
        PAUSE_IMAGE,
        "65535:65535",
        &built,
    )?;
    std::fs::rename(&built, &archive)
        .map_err(|e| TestEnvError::io("storing the pause image", e))?;
    Ok(archive)
}

/// buildah FROM scratch: one file as entrypoint, a numeric user, pushed as an OCI archive that
/// keeps `name`. buildah gets its own storage under `work` (vfs: no mounts to clean up).
fn build_scratch_image(
    work: &Path,
    file: &Path,
    path_in_image: &str,
    name: &str,
    user: &str,
    archive: &Path,
) -> Result<(), TestEnvError> {
    let root = work.join("storage").display().to_string();
    let runroot = work.join("runroot").display().to_string();
    let storage = [
        "--root",
        &root,
        "--runroot",
        &runroot,
        "--storage-driver",
        "vfs",
    ];
    let step = |args: &[&str], what: &str| buildah(&storage, args, what);
    let container = step(
        &["from", "scratch"],
        "buildah from scratch (install buildah)",
    )?;
    let container = container.trim();
    let file = file.display().to_string();
    step(
        &["copy", "--chmod", "0755", container, &file, path_in_image],
        "buildah copy",
    )?;
    let entrypoint = format!("[\"{path_in_image}\"]");
    step(
        &[
            "config",
            "--entrypoint",
            &entrypoint,
            "--user",
            user,
            container,
        ],
        "buildah config",
    )?;
    step(&["commit", "--quiet", container, name], "buildah commit")?;
    let destination = format!("oci-archive:{}:{name}", archive.display());
    step(&["push", "--quiet", name, &destination], "buildah push")?;
    let _ = step(&["rm", "--all"], "buildah rm");
    let _ = step(&["rmi", "--all", "--force"], "buildah rmi");
    Ok(())
}

fn buildah(storage: &[&str], args: &[&str], what: &str) -> Result<String, TestEnvError> {
    let all: Vec<&str> = storage.iter().chain(args).copied().collect();
    run("buildah", &all, what)
}

fn run(program: &str, args: &[&str], what: &str) -> Result<String, TestEnvError> {
    let output = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| TestEnvError::io(format!("{what}: running {program}"), e))?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).to_string())
    } else {
        Err(TestEnvError::CommandFailed {
            command: format!("{what}: {program} {}", args.join(" ")),
            status: output.status.to_string(),
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_string(),
        })
    }
}
