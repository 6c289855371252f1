#!/usr/bin/env bash
# Runs cftunnel end to end on this machine: builds the control-plane binaries once (cached),
# then `cftunnel-demo` (local control plane + Cloudflare simulator + cftunnel, examples/ applied).
set -euo pipefail
cd "$(dirname "$0")/.."
bin_dir=$(scripts/build-control-plane.sh | tail -n 1)
export CFTUNNEL_BIN_DIR=$bin_dir
exec cargo run --quiet -p cftunnel-demo -- "$@"
