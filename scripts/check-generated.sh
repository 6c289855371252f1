#!/usr/bin/env bash
# Fails when a checked-in generated file differs from what the code generates now.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
cargo run --quiet --locked -- crds > "$tmp"
if ! diff -u manifests/crds.yaml "$tmp"; then
  echo "manifests/crds.yaml is stale: run 'cargo run -- crds > manifests/crds.yaml' and commit it" >&2
  exit 1
fi
echo "manifests/crds.yaml is current"
