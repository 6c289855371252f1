#!/usr/bin/env bash
# Runs the whole test suite: installs the Debian packages the node and image tests use, builds
# the Kubernetes binaries and the pinned earlier cftunnel build first (no-ops when present), then
# `cargo test`. Integration tests start their own etcd + kube-apiserver (+ controller manager, + a
# node in a network namespace of its own) and the Cloudflare simulator in-process.
#
#   scripts/test.sh                # everything, as CI runs it
#   scripts/test.sh --test node    # arguments go to cargo test
set -euo pipefail
cd "$(dirname "$0")/.."
# The tests check rendered configs, path rules and the image against a real cloudflared: find it
# before building anything (the variable, then PATH), or say in one line how to get one.
if [ -z "${CFTUNNEL_CLOUDFLARED:-}" ] && command -v cloudflared >/dev/null; then
  CFTUNNEL_CLOUDFLARED=$(command -v cloudflared)
fi
if [ -z "${CFTUNNEL_CLOUDFLARED:-}" ] || [ ! -x "$CFTUNNEL_CLOUDFLARED" ]; then
  echo "scripts/test.sh: no cloudflared${CFTUNNEL_CLOUDFLARED:+ at $CFTUNNEL_CLOUDFLARED}: download cloudflared-linux-amd64 from https://github.com/cloudflare/cloudflared/releases, make it executable and run CFTUNNEL_CLOUDFLARED=/path/to/cloudflared scripts/test.sh" >&2
  exit 2
fi
export CFTUNNEL_CLOUDFLARED
scripts/install-node-deps.sh >&2
scripts/install-image-deps.sh >&2
scripts/install-monitoring-deps.sh >&2
bin_dir=$(scripts/build-control-plane.sh | tail -n 1)
export CFTUNNEL_BIN_DIR=$bin_dir
# The pinned earlier cftunnel build tests/upgrade.rs upgrades from and rolls back to (cached).
if [ -z "${CFTUNNEL_PINNED_BIN:-}" ]; then
  CFTUNNEL_PINNED_BIN=$(scripts/build-pinned.sh | tail -n 1)
fi
export CFTUNNEL_PINNED_BIN
# The whole suite: test binaries side by side (scripts/run-tests.sh). With other arguments (a
# filter, `--test NAME`), plain `cargo test`.
case "$*" in
  "" | "--locked") exec scripts/run-tests.sh "$@" ;;
  *) exec cargo test --workspace --all-targets "$@" ;;
esac
