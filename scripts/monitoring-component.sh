#!/usr/bin/env bash
# Writes manifests/components/monitoring/monitoring.yaml, the Kustomize component of the chart's
# monitoring objects (metrics Service, ServiceMonitor, PodMonitor, PrometheusRule, dashboard
# ConfigMap), rendered from the chart with monitoring on, so the two installs carry the same
# objects. With --check, fails when the checked-in copy differs. Needs helm
# (scripts/build-control-plane.sh builds it; its folder is the last line it prints).
set -euo pipefail
cd "$(dirname "$0")/.."
helm=${HELM:-$(scripts/build-control-plane.sh | tail -n 1)/helm}
out=manifests/components/monitoring/monitoring.yaml
generate() {
  echo "# The chart's monitoring objects, rendered by scripts/monitoring-component.sh; do not edit."
  "$helm" template cftunnel charts/cftunnel --namespace cftunnel-system \
    --kube-version 1.37.2 --api-versions monitoring.coreos.com/v1 \
    --set monitoring.serviceMonitor.enabled=true --set monitoring.podMonitor.enabled=true \
    --set monitoring.prometheusRule.enabled=true --set monitoring.dashboard.enabled=true \
    --show-only templates/monitoring.yaml |
    grep -v -e '^  *helm.sh/chart:' -e '^  *app.kubernetes.io/managed-by:'
}
if [[ "${1:-}" == --check ]]; then
  if diff -u "$out" <(generate) >/dev/null; then
    echo "$out is current"
  else
    echo "$out is stale: run scripts/monitoring-component.sh and commit it" >&2
    exit 1
  fi
else
  generate > "$out"
fi
