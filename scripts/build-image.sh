#!/usr/bin/env bash
# Builds the cftunnel operator image on this machine, without a registry or a container daemon,
# and writes it as an OCI archive. The image has the layout the Dockerfile declares: one statically
# linked binary at /usr/local/bin/cftunnel, user 65532:65532, that binary as entrypoint.
#
#   scripts/build-image.sh            # last line of stdout: the archive's path
#
# Import it with `ctr -n k8s.io images import ARCHIVE`; the archive keeps the image name
# (IMAGE_NAME, default ghcr.io/cftunnel/cftunnel:<crate version>, what the manifests and the chart
# deploy), so pods with `imagePullPolicy: IfNotPresent` use it.
#
# Cached under ${CFTUNNEL_CACHE:-~/.cache/cftunnel}: the release build (cargo rebuilds only what
# changed) and the archive, rebuilt only when the binary or the image settings changed.
# Needs buildah (scripts/install-image-deps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib-image.sh

cache=${CFTUNNEL_CACHE:-$HOME/.cache/cftunnel}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$cache/target}
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)
image=${IMAGE_NAME:-ghcr.io/cftunnel/cftunnel:$version}
triple=$(uname -m)-unknown-linux-gnu

# Run from a test, the environment carries the variables `cargo test` sets for the test binary
# (CARGO_PKG_NAME, CARGO_MANIFEST_DIR, ...). Build scripts such as ring's rerun when those change,
# so a release build from a test and one from a shell would each rebuild ring and every crate
# above it; clear them so both see the same environment.
for var in $(compgen -e); do
  case $var in
    CARGO_PKG_*|CARGO_MANIFEST_*|CARGO_CRATE_NAME|CARGO_BIN_NAME|CARGO_BIN_EXE_*|CARGO_PRIMARY_PACKAGE|CARGO_TARGET_TMPDIR|OUT_DIR)
      unset "$var" ;;
  esac
done

# glibc linked statically: a scratch image has no loader or libraries. With --target the flags
# reach only the binary's own units, not build scripts or proc macros.
echo "release build of cftunnel (target dir $CARGO_TARGET_DIR)" >&2
RUSTFLAGS="-C target-feature=+crt-static" \
  cargo build --release --locked --target "$triple" -p cftunnel --bin cftunnel >&2
binary=$CARGO_TARGET_DIR/$triple/release/cftunnel
if ldd "$binary" 2>/dev/null | grep -q "=>"; then
  echo "$binary is dynamically linked; the scratch image needs a static binary" >&2
  exit 1
fi

archive=$cache/images/cftunnel.oci.tar
# Keep in step with the Dockerfile's final stage (tests/image.rs compares them).
scratch_image "$cache" "$archive" "$image" "$binary" /usr/local/bin/cftunnel 65532:65532 \
  '["/usr/local/bin/cftunnel"]' '' \
  org.opencontainers.image.title=cftunnel \
  org.opencontainers.image.source=https://github.com/cftunnel/cftunnel \
  org.opencontainers.image.licenses=Apache-2.0 \
  "org.opencontainers.image.version=$version"
echo "$archive"
