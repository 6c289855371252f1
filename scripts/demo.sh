#!/usr/bin/env bash
# Runs cftunnel end to end on this machine: builds the control-plane binaries once (cached),
# then `cftunnel-demo`: a local control plane (with the Gateway API CRDs), the Cloudflare
# simulator and cftunnel, examples/ applied, and a summary of each tunnel's edge status and
# connectors, the Go-era manifest served back in v1alpha2, the HTTPRoute, the AccessPolicy and
# the DNS records. `scripts/demo.sh --keep-running` leaves it up to explore with kubectl.
set -euo pipefail
cd "$(dirname "$0")/.."
bin_dir=$(scripts/build-control-plane.sh | tail -n 1)
export CFTUNNEL_BIN_DIR=$bin_dir
exec cargo run --quiet -p cftunnel-demo -- "$@"
