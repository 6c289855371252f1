//! The images the node runs: cftunnel's (scripts/build-image.sh) and cloudflared's
//! (scripts/build-cloudflared-image.sh from the binary named by CFTUNNEL_CLOUDFLARED), both
//! cached by their scripts, so a warm run only re-reads the archives.
//!
//! Overrides: CFTUNNEL_IMAGE_ARCHIVE (an OCI archive named ghcr.io/cftunnel/cftunnel:<version>),
//! CFTUNNEL_CLOUDFLARED_IMAGE_ARCHIVE with CFTUNNEL_CLOUDFLARED_IMAGE (its name).

use std::path::PathBuf;
use std::process::Command;

use super::install_support::repo_path;

/// What the manifests deploy; the archive carries this name.
pub const UPSTREAM_CFTUNNEL: &str = "ghcr.io/cftunnel/cftunnel";

#[derive(Debug, Clone)]
pub struct Images {
    pub cftunnel_archive: PathBuf,
    pub cloudflared_archive: PathBuf,
    /// e.g. mirror.local/cloudflare/cloudflared:2026.8.2
    pub cloudflared: String,
}

/// Locates or builds both images; fails with what to set when something is missing.
pub fn images() -> Images {
    let cftunnel_archive = match std::env::var_os("CFTUNNEL_IMAGE_ARCHIVE") {
        Some(path) => PathBuf::from(path),
        None => PathBuf::from(last_line(&run_script("scripts/build-image.sh"))),
    };
    let (cloudflared_archive, cloudflared) = match (
        std::env::var_os("CFTUNNEL_CLOUDFLARED_IMAGE_ARCHIVE"),
        std::env::var("CFTUNNEL_CLOUDFLARED_IMAGE"),
    ) {
        (Some(path), Ok(name)) => (PathBuf::from(path), name),
        _ => {
            assert!(
                std::env::var_os("CFTUNNEL_CLOUDFLARED").is_some(),
                "the node tests run cloudflared: set CFTUNNEL_CLOUDFLARED to a static cloudflared \
                 binary (linux, e.g. built from github.com/cloudflare/cloudflared with CGO_ENABLED=0); \
                 scripts/build-cloudflared-image.sh makes its image"
            );
            let out = run_script("scripts/build-cloudflared-image.sh");
            let name = out
                .lines()
                .find_map(|l| l.strip_prefix("image "))
                .unwrap_or_else(|| panic!("no `image NAME` line in:\n{out}"))
                .trim()
                .to_string();
            (PathBuf::from(last_line(&out)), name)
        }
    };
    for archive in [&cftunnel_archive, &cloudflared_archive] {
        assert!(
            archive.is_file(),
            "image archive {} does not exist",
            archive.display()
        );
    }
    Images {
        cftunnel_archive,
        cloudflared_archive,
        cloudflared,
    }
}

fn run_script(relative: &str) -> String {
    let path = repo_path(relative);
    assert!(path.is_file(), "{} is missing", path.display());
    let out = Command::new("bash")
        .arg(&path)
        .output()
        .unwrap_or_else(|e| panic!("running {relative}: {e}"));
    assert!(
        out.status.success(),
        "{relative} failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).to_string()
}

fn last_line(text: &str) -> String {
    text.lines().last().unwrap_or_default().trim().to_string()
}
