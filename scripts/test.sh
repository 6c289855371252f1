#!/usr/bin/env bash
# Runs the whole test suite: installs the Debian packages the node and image tests use and builds
# the Kubernetes binaries first (no-ops when present), then `cargo test`. Integration tests start
# their own etcd + kube-apiserver (+ controller manager, + a node in a network namespace of its
# own) and the Cloudflare simulator in-process.
#
#   scripts/test.sh                # everything, as CI runs it
#   scripts/test.sh --test node    # arguments go to cargo test
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-node-deps.sh >&2
scripts/install-image-deps.sh >&2
bin_dir=$(scripts/build-control-plane.sh | tail -n 1)
export CFTUNNEL_BIN_DIR=$bin_dir
# The whole suite: test binaries side by side (scripts/run-tests.sh). With other arguments (a
# filter, `--test NAME`), plain `cargo test`.
case "$*" in
  "" | "--locked") exec scripts/run-tests.sh "$@" ;;
  *) exec cargo test --workspace --all-targets "$@" ;;
esac
