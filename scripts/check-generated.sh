#!/usr/bin/env bash
# Fails when a checked-in generated file differs from what the code generates now.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
stale=0
check() { # check <file> <cftunnel args...>
  local file=$1; shift
  cargo run --quiet --locked -p cftunnel -- "$@" > "$tmp"
  if diff -u "$file" "$tmp"; then
    echo "$file is current"
  else
    echo "$file is stale: run 'cargo run -p cftunnel -- $* > $file' and commit it" >&2
    stale=1
  fi
}
check manifests/crds.yaml crds
check charts/cftunnel/templates/crds.yaml crds --helm
check docs/reference/crds.md crds --reference
# Copies of the Gateway API module: its conformance cases and its CRDs.
scripts/gateway-conformance.sh --check || stale=1
scripts/gateway-api-crds.sh --check || stale=1
# The Kustomize component of the chart's monitoring objects.
scripts/monitoring-component.sh --check || stale=1
exit "$stale"
