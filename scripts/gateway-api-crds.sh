#!/usr/bin/env bash
# Copies the Gateway API v1.6.3 standard-channel CRDs of the kinds cftunnel serves (GatewayClass,
# Gateway, HTTPRoute, GRPCRoute, ReferenceGrant, TCPRoute, UDPRoute) from the Go module
# sigs.k8s.io/gateway-api into charts/cftunnel/files/gateway-api-crds.yaml, which the chart
# installs when crds.gatewayApi is true and the tests install. Each CRD gets
# helm.sh/resource-policy: keep (an uninstall must not delete every Gateway and route of the
# cluster); nothing else is changed.
# With --check, fails when the checked-in copy differs.
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=v1.6.3
dir=$( (cd "$(mktemp -d)" && GOFLAGS=-mod=mod go mod download -json "sigs.k8s.io/gateway-api@$VERSION") |
  sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
out=charts/cftunnel/files/gateway-api-crds.yaml
generate() {
  echo "# Gateway API $VERSION standard-channel CRDs, copied by scripts/gateway-api-crds.sh; do not edit."
  for kind in gatewayclasses gateways httproutes grpcroutes referencegrants tcproutes udproutes; do
    echo "---"
    sed 's/^  annotations:$/  annotations:\n    helm.sh\/resource-policy: keep/' \
      "$dir/config/crd/standard/gateway.networking.k8s.io_$kind.yaml" | grep -v '^---$'
  done
}
if [[ "${1:-}" == --check ]]; then
  if diff -u "$out" <(generate) >/dev/null; then
    echo "$out is current"
  else
    echo "$out is stale: run scripts/gateway-api-crds.sh and commit it" >&2
    exit 1
  fi
else
  mkdir -p "$(dirname "$out")"
  generate > "$out"
fi
