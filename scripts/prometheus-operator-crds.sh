#!/usr/bin/env bash
# Prints the folder of the Prometheus Operator's CRDs (ServiceMonitor, PodMonitor,
# PrometheusRule, …) of the Go module github.com/prometheus-operator/prometheus-operator, which
# the tests install before applying the chart with monitoring on. The module is fetched from the
# Go module proxy into Go's module cache (a no-op when present).
set -euo pipefail
VERSION=${PROMETHEUS_OPERATOR_VERSION:-v0.85.0}
dir=$( (cd "$(mktemp -d)" && GOFLAGS=-mod=mod go mod download -json \
  "github.com/prometheus-operator/prometheus-operator@$VERSION") |
  sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
crds=$dir/example/prometheus-operator-crd
[ -f "$crds/monitoring.coreos.com_servicemonitors.yaml" ] || {
  echo "no CRDs under $crds" >&2
  exit 1
}
echo "$crds"
