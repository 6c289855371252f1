//! The operator image: `scripts/build-image.sh` builds it without a registry (buildah, FROM
//! scratch); it must hold what the Dockerfile's final stage declares (binary path, numeric
//! non-root user, entrypoint) and nothing else, and run as that user on a read-only root.
//! Needs buildah and runc (scripts/install-image-deps.sh) and root (runc).
#[path = "image/oci.rs"]
mod oci;
#[path = "image/runc.rs"]
mod runc;

use std::path::{Path, PathBuf};
use std::process::Command;

use oci::{OciImage, final_stage};

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Runs a build script and returns the archive path it prints on its last line.
fn build(script: &str, envs: &[(&str, &str)]) -> PathBuf {
    let out = Command::new(repo().join(script))
        .envs(envs.iter().copied())
        .output()
        .unwrap_or_else(|e| panic!("{script}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{script} failed:\n{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let last = stdout.lines().last().unwrap_or_default();
    let path = PathBuf::from(last);
    assert!(path.is_file(), "{script}: last line {last:?} is not a file");
    path
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Regular files of a layer listing (`tar -tv` lines), without directories.
fn files(entries: &[String]) -> Vec<(String, String)> {
    entries
        .iter()
        .filter(|line| line.starts_with('-'))
        .filter_map(|line| {
            let mode = line.split_whitespace().next()?;
            let name = line.split_whitespace().last()?;
            Some((
                mode.to_string(),
                format!("/{}", name.trim_start_matches("./")),
            ))
        })
        .collect()
}

#[test]
fn the_built_image_has_the_dockerfile_layout_and_runs_as_its_user_on_a_read_only_root() {
    let dockerfile = std::fs::read_to_string(repo().join("Dockerfile")).unwrap_or_default();
    let stage = final_stage(&dockerfile);
    assert_eq!(
        stage.from, "scratch",
        "the final stage must be FROM scratch"
    );
    assert_eq!(
        stage.copies.len(),
        1,
        "one COPY in the final stage: {stage:?}"
    );
    assert_eq!(stage.entrypoint.first(), stage.copies.first(), "{stage:?}");

    let archive = build("scripts/build-image.sh", &[]);
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let image = OciImage::open(&archive, &dir.path().join("oci"));
    assert_eq!(
        image.ref_name,
        format!("ghcr.io/cftunnel/cftunnel:{}", env!("CARGO_PKG_VERSION")),
        "the name the manifests and the chart deploy"
    );
    assert_eq!(image.user(), stage.user);
    assert_eq!(image.entrypoint(), stage.entrypoint);
    assert_eq!(image.cmd(), Vec::<String>::new());
    let user = runc::numeric_user(image.user())
        .unwrap_or_else(|| panic!("user {:?} is not numeric", image.user()));
    assert!(user.0 != 0 && user.1 != 0, "user {user:?} is root");
    // Only the binary: no shell, no libraries, no CA bundle.
    assert_eq!(
        files(&image.entries()),
        [("-rwxr-xr-x".to_string(), stage.copies[0].clone())]
    );

    let bundle = dir.path().join("bundle");
    image.unpack(&bundle.join("rootfs"));
    let mut args = image.entrypoint();
    args.push("--version".into());
    let id = format!("cftunnel-image-test-{}", std::process::id());
    let out = runc::run(&bundle, &id, &args, user);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        text(&out.stdout),
        format!("cftunnel {}\n", env!("CARGO_PKG_VERSION"))
    );

    // The root filesystem is read-only: writing anywhere on it fails with EROFS.
    let mut args = image.entrypoint();
    args.extend(["certs".into(), "--dir".into(), "/usr/local/certs".into()]);
    let out = runc::run(&bundle, &format!("{id}-ro"), &args, user);
    assert!(!out.status.success(), "{out:?}");
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(all.contains("Read-only file system"), "{all}");
}

#[test]
fn the_cloudflared_image_keeps_the_upstream_layout_and_is_tagged_with_its_version() {
    let Some(binary) = std::env::var_os("CFTUNNEL_CLOUDFLARED") else {
        panic!(
            "CFTUNNEL_CLOUDFLARED must point at a cloudflared binary (built from \
             github.com/cloudflare/cloudflared; .ci/run sets it)"
        );
    };
    let binary = binary.to_string_lossy().into_owned();
    let version = Command::new(&binary)
        .arg("--version")
        .output()
        .map(|o| text(&o.stdout))
        .unwrap_or_else(|e| panic!("{binary}: {e}"));
    let version = version
        .split_whitespace()
        .nth(2)
        .unwrap_or_else(|| panic!("cannot read the version in {version:?}"))
        .to_string();

    let archive = build(
        "scripts/build-cloudflared-image.sh",
        &[("CFTUNNEL_CLOUDFLARED", &binary)],
    );
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let image = OciImage::open(&archive, &dir.path().join("oci"));
    assert_eq!(
        image.ref_name,
        format!("mirror.local/cloudflare/cloudflared:{version}")
    );
    assert_eq!(image.user(), "65532:65532");
    assert_eq!(
        image.entrypoint(),
        ["/usr/local/bin/cloudflared", "--no-autoupdate"]
    );
    assert_eq!(image.cmd(), ["version"]);
    assert_eq!(
        files(&image.entries()),
        [(
            "-rwxr-xr-x".to_string(),
            "/usr/local/bin/cloudflared".to_string()
        )]
    );

    // The image's default command, as its user on a read-only root.
    let bundle = dir.path().join("bundle");
    image.unpack(&bundle.join("rootfs"));
    let mut args = image.entrypoint();
    args.extend(image.cmd());
    let user = runc::numeric_user(image.user()).unwrap_or_else(|| panic!("numeric user"));
    let id = format!("cloudflared-image-test-{}", std::process::id());
    let out = runc::run(&bundle, &id, &args, user);
    assert!(out.status.success(), "{out:?}");
    assert!(
        text(&out.stdout).starts_with(&format!("cloudflared version {version} ")),
        "{out:?}"
    );
}
