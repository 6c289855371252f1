#!/usr/bin/env bash
# Installs what the node tests (tests/node.rs) run besides the Kubernetes binaries: containerd,
# runc, the CNI plugins, buildah and skopeo (images without a registry), iptables, conntrack, a
# static libc for the pause image and util-linux's unshare/nsenter. Debian packages, through
# apt-get; a no-op when all are present. Needs root (the node tests need it anyway).
set -euo pipefail
packages=(containerd runc containernetworking-plugins buildah skopeo iptables conntrack
          util-linux iproute2 libc6-dev gcc)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "[install-node-deps] all present"
  exit 0
fi
echo "[install-node-deps] installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
