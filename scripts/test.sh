#!/usr/bin/env bash
# Runs the whole test suite: builds the control-plane binaries first (a no-op when cached),
# then `cargo test`. Integration tests start their own etcd + kube-apiserver (+ controller
# manager) on loopback and the Cloudflare simulator in-process.
set -euo pipefail
cd "$(dirname "$0")/.."
bin_dir=$(scripts/build-control-plane.sh | tail -n 1)
export CFTUNNEL_BIN_DIR=$bin_dir
exec cargo test --all-targets "$@"
