#!/usr/bin/env bash
# Installs what the alert-rule tests (tests/prometheus_rules.rs) run: promtool, from Debian's
# prometheus package (which brings promtool and prometheus), through apt-get; a no-op when
# promtool is on PATH. Tests use $CFTUNNEL_PROMTOOL instead when it is set.
set -euo pipefail
if [ -n "${CFTUNNEL_PROMTOOL:-}" ] && [ -x "$CFTUNNEL_PROMTOOL" ]; then
  echo "[install-monitoring-deps] promtool present: $CFTUNNEL_PROMTOOL"
  exit 0
fi
if command -v promtool >/dev/null 2>&1; then
  echo "[install-monitoring-deps] promtool present: $(command -v promtool)"
  exit 0
fi
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "[install-monitoring-deps] promtool is missing and this is not root with apt-get:" >&2
  echo "  install Debian's prometheus package (apt-get install prometheus), or set" >&2
  echo "  CFTUNNEL_PROMTOOL to a promtool binary (Prometheus 2.42 or later)" >&2
  exit 1
fi
echo "[install-monitoring-deps] installing: prometheus"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends prometheus
promtool --version | head -n 1
