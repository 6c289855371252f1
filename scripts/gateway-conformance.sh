#!/usr/bin/env bash
# Extracts the Gateway API conformance cases cftunnel tests against (manifests and request →
# backend tables, taken from the suite's own sources) into tests/data/gateway-conformance/.
# With --check, fails when the checked-in copy differs from a fresh extraction.
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=v1.6.3
CASES=(
  HTTPRouteSimpleSameNamespace HTTPRouteExactPathMatching HTTPRoutePathMatchOrder
  HTTPRouteHostnameIntersection HTTPRouteListenerHostnameMatching HTTPRouteCrossNamespace
  HTTPRouteReferenceGrant HTTPRouteInvalidNonExistentBackendRef
  HTTPRouteInvalidCrossNamespaceBackendRef
)
dir_of() { # the module's directory in the Go module cache, downloaded when missing
  (cd "$(mktemp -d)" && GOFLAGS=-mod=mod go mod download -json "$1@$VERSION") |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p'
}
conformance=$(dir_of sigs.k8s.io/gateway-api/conformance)
gateway_api=$(dir_of sigs.k8s.io/gateway-api)
out=tests/data/gateway-conformance
target=$out
if [[ "${1:-}" == --check ]]; then
  target=$(mktemp -d)
  trap 'rm -rf "$target"' EXIT
fi
rm -rf "${target:?}/cases.json" "${target:?}/manifests"
[[ -f "$out/README.md" && "$target" != "$out" ]] && cp "$out/README.md" "$target/"
mkdir -p "$target"
target=$(cd "$target" && pwd)
(cd scripts/gateway-conformance && go run . "$conformance" "$gateway_api" "$target" "${CASES[@]}")
if [[ "${1:-}" == --check ]]; then
  if diff -ru "$out" "$target"; then
    echo "$out is current"
  else
    echo "$out is stale: run scripts/gateway-conformance.sh and commit it" >&2
    exit 1
  fi
fi
