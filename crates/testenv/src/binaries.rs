//! Locating the control-plane executables built by the project's build script.

use std::path::{Path, PathBuf};

use super::TestEnvError;

/// The Kubernetes release the build script produces and the harness expects.
pub const K8S_VERSION: &str = "1.37.2";

/// Paths of the executables the control plane runs.
#[derive(Debug, Clone)]
pub struct Binaries {
    pub etcd: PathBuf,
    pub apiserver: PathBuf,
    pub controller_manager: PathBuf,
    pub kubectl: PathBuf,
    pub helm: PathBuf,
    pub scheduler: PathBuf,
    pub kubelet: PathBuf,
}

impl Binaries {
    /// Resolves every path from the environment (CFTUNNEL_BIN_DIR, CFTUNNEL_CACHE, HOME, CFTUNNEL_ETCD).
    pub fn locate() -> Result<Binaries, TestEnvError> {
        let dir = bin_dir(
            std::env::var_os("CFTUNNEL_BIN_DIR").map(PathBuf::from),
            std::env::var_os("CFTUNNEL_CACHE").map(PathBuf::from),
            std::env::var_os("HOME").map(PathBuf::from),
        )?;
        let etcd = match std::env::var_os("CFTUNNEL_ETCD") {
            Some(path) => PathBuf::from(path),
            None => match etcd_bin_vendored_linux_amd64::etcd_bin_path() {
                Ok(path) => path.to_path_buf(),
                Err(never) => match never {},
            },
        };
        Ok(Binaries {
            etcd,
            apiserver: dir.join("kube-apiserver"),
            controller_manager: dir.join("kube-controller-manager"),
            kubectl: dir.join("kubectl"),
            helm: dir.join("helm"),
            scheduler: dir.join("kube-scheduler"),
            kubelet: dir.join("kubelet"),
        })
    }

    /// Fails with a message naming the build command when a needed executable is absent.
    pub fn require(&self, controller_manager: bool, node: bool) -> Result<(), TestEnvError> {
        require_file("etcd", &self.etcd, "CFTUNNEL_ETCD")?;
        require_file("kube-apiserver", &self.apiserver, "CFTUNNEL_BIN_DIR")?;
        if controller_manager {
            require_file(
                "kube-controller-manager",
                &self.controller_manager,
                "CFTUNNEL_BIN_DIR",
            )?;
        }
        if node {
            require_file("kube-scheduler", &self.scheduler, "CFTUNNEL_BIN_DIR")?;
            require_file("kubelet", &self.kubelet, "CFTUNNEL_BIN_DIR")?;
        }
        Ok(())
    }
}

fn bin_dir(
    explicit: Option<PathBuf>,
    cache: Option<PathBuf>,
    home: Option<PathBuf>,
) -> Result<PathBuf, TestEnvError> {
    if let Some(dir) = explicit {
        return Ok(dir);
    }
    let cache = match (cache, home) {
        (Some(cache), _) => cache,
        (None, Some(home)) => home.join(".cache").join("cftunnel"),
        (None, None) => return Err(TestEnvError::NoBinaryDir),
    };
    Ok(cache.join("bin").join(format!("k8s-v{K8S_VERSION}")))
}

fn require_file(binary: &'static str, path: &Path, env: &'static str) -> Result<(), TestEnvError> {
    if path.is_file() {
        Ok(())
    } else {
        Err(TestEnvError::MissingBinary {
            binary,
            path: path.to_path_buf(),
            env,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bin_dir_prefers_explicit_then_cache_then_home() {
        let explicit = bin_dir(Some("/x".into()), Some("/c".into()), Some("/h".into()));
        assert_eq!(explicit.ok(), Some(PathBuf::from("/x")));
        let cache = bin_dir(None, Some("/c".into()), Some("/h".into()));
        assert_eq!(cache.ok(), Some(PathBuf::from("/c/bin/k8s-v1.37.2")));
        let home = bin_dir(None, None, Some("/h".into()));
        assert_eq!(
            home.ok(),
            Some(PathBuf::from("/h/.cache/cftunnel/bin/k8s-v1.37.2"))
        );
        assert!(matches!(
            bin_dir(None, None, None),
            Err(TestEnvError::NoBinaryDir)
        ));
    }

    #[test]
    fn missing_binary_error_names_the_build_command() {
        let err = require_file(
            "kube-apiserver",
            Path::new("/nonexistent/kube-apiserver"),
            "CFTUNNEL_BIN_DIR",
        );
        let message = err.map_err(|e| e.to_string()).err();
        assert_eq!(
            message.as_deref(),
            Some(
                "kube-apiserver not found at /nonexistent/kube-apiserver: build it with \
                 `scripts/build-control-plane.sh` (or set CFTUNNEL_BIN_DIR)"
            )
        );
    }
}
