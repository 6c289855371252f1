//! Reading an OCI archive (as `buildah push … oci-archive:` writes it) and the final stage of
//! the Dockerfile, with `tar` and serde only.
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// An unpacked OCI archive: its image config and its layer files.
pub struct OciImage {
    pub config: Value,
    pub layers: Vec<PathBuf>,
    pub ref_name: String,
}

fn tar(args: &[&str]) -> String {
    let out = Command::new("tar")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("tar is required: {e}"));
    assert!(
        out.status.success(),
        "tar {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn blob(dir: &Path, digest: &Value) -> PathBuf {
    let digest = digest.as_str().unwrap_or_else(|| panic!("digest {digest}"));
    let hex = digest
        .strip_prefix("sha256:")
        .unwrap_or_else(|| panic!("digest {digest} is not sha256"));
    dir.join("blobs/sha256").join(hex)
}

impl OciImage {
    /// Unpacks `archive` into `dir` and reads its single image.
    pub fn open(archive: &Path, dir: &Path) -> OciImage {
        std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        let (archive_s, dir_s) = (archive.to_string_lossy(), dir.to_string_lossy());
        tar(&["-xf", &archive_s, "-C", &dir_s]);
        let index = read_json(&dir.join("index.json"));
        let manifests = index["manifests"].as_array().cloned().unwrap_or_default();
        assert_eq!(manifests.len(), 1, "one image per archive: {index}");
        let ref_name = manifests[0]["annotations"]["org.opencontainers.image.ref.name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let manifest = read_json(&blob(dir, &manifests[0]["digest"]));
        let config = read_json(&blob(dir, &manifest["config"]["digest"]));
        let layers = manifest["layers"]
            .as_array()
            .map(|layers| layers.iter().map(|l| blob(dir, &l["digest"])).collect())
            .unwrap_or_default();
        OciImage {
            config,
            layers,
            ref_name,
        }
    }

    /// Every entry of every layer (`tar -tv` lines, without the leading `./`).
    pub fn entries(&self) -> Vec<String> {
        self.layers
            .iter()
            .flat_map(|layer| {
                tar(&["-tvf", &layer.to_string_lossy()])
                    .lines()
                    .map(str::to_string)
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// Unpacks the layers, in order, into `rootfs`.
    pub fn unpack(&self, rootfs: &Path) {
        std::fs::create_dir_all(rootfs).unwrap_or_else(|e| panic!("{e}"));
        for layer in &self.layers {
            tar(&[
                "-xf",
                &layer.to_string_lossy(),
                "-C",
                &rootfs.to_string_lossy(),
            ]);
        }
    }

    pub fn user(&self) -> &str {
        self.config["config"]["User"].as_str().unwrap_or_default()
    }

    pub fn entrypoint(&self) -> Vec<String> {
        strings(&self.config["config"]["Entrypoint"])
    }

    pub fn cmd(&self) -> Vec<String> {
        strings(&self.config["config"]["Cmd"])
    }
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// What the Dockerfile's final stage declares.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct FinalStage {
    pub from: String,
    pub user: String,
    pub entrypoint: Vec<String>,
    /// Destination of each COPY.
    pub copies: Vec<String>,
}

/// Parses the instructions after the last `FROM` (continuation lines joined, comments dropped).
pub fn final_stage(dockerfile: &str) -> FinalStage {
    let mut instructions: Vec<String> = Vec::new();
    let mut current = String::new();
    for line in dockerfile.lines() {
        let trimmed = line.trim();
        if current.is_empty() && (trimmed.is_empty() || trimmed.starts_with('#')) {
            continue;
        }
        match trimmed.strip_suffix('\\') {
            Some(part) => {
                current.push_str(part);
                current.push(' ');
            }
            None => {
                current.push_str(trimmed);
                instructions.push(std::mem::take(&mut current));
            }
        }
    }
    let start = instructions
        .iter()
        .rposition(|i| i.to_ascii_uppercase().starts_with("FROM "))
        .unwrap_or_else(|| panic!("the Dockerfile has no FROM"));
    let mut stage = FinalStage::default();
    for instruction in &instructions[start..] {
        let (keyword, rest) = instruction.split_once(' ').unwrap_or((instruction, ""));
        let rest = rest.trim();
        match keyword.to_ascii_uppercase().as_str() {
            "FROM" => stage.from = rest.to_string(),
            "USER" => stage.user = rest.to_string(),
            "ENTRYPOINT" => {
                stage.entrypoint = serde_json::from_str(rest).unwrap_or_else(|e| {
                    panic!("ENTRYPOINT must be an exec-form JSON array ({e}): {rest}")
                })
            }
            "COPY" => {
                if let Some(dest) = rest.split_whitespace().last() {
                    stage.copies.push(dest.to_string());
                }
            }
            _ => {}
        }
    }
    stage
}
