#!/usr/bin/env bash
# Builds the Kubernetes binaries the tests and the demo run: kube-apiserver,
# kube-controller-manager, kube-scheduler, kubelet, kube-proxy and kubectl (from k8s.io/kubernetes
# on the Go module proxy) and helm. The node binaries (kubelet, kube-proxy, kube-scheduler) are
# only started by the tests that run pods on a real node.
# Output: $CFTUNNEL_BIN_DIR (default ~/.cache/cftunnel/bin/k8s-v<version>), printed on the last line.
# A warm run (binaries present) is a no-op. etcd comes from the crates.io package
# etcd-bin-vendored-linux-amd64 (a dev-dependency), not from here.
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-1.37.2}
HELM_VERSION=${HELM_VERSION:-3.22.0}
CACHE_ROOT=${CFTUNNEL_CACHE:-$HOME/.cache/cftunnel}
OUT=${CFTUNNEL_BIN_DIR:-$CACHE_ROOT/bin/k8s-v$K8S_VERSION}
WORK=$CACHE_ROOT/build/k8s-v$K8S_VERSION
HELM_WORK=$CACHE_ROOT/build/helm-v$HELM_VERSION

KUBE_BINS="kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl"

log() { printf '[build-control-plane] %s\n' "$*" >&2; }

have_all() {
  for b in $KUBE_BINS helm; do
    [ -x "$OUT/$b" ] || return 1
  done
}

if have_all; then
  log "cached: $OUT"
  echo "$OUT"
  exit 0
fi

command -v go >/dev/null || { log "go is required (https://go.dev) but not on PATH"; exit 1; }
mkdir -p "$OUT" "$WORK" "$HELM_WORK"
export CGO_ENABLED=0 GOFLAGS=-mod=mod

missing_kube=""
for b in $KUBE_BINS; do [ -x "$OUT/$b" ] || missing_kube="$missing_kube $b"; done
if [ -n "$missing_kube" ]; then
  STAGING_TAG=v0.${K8S_VERSION#1.}
  MINOR=$(echo "$K8S_VERSION" | cut -d. -f2)
  cd "$WORK"
  rm -f go.mod go.sum
  MOD=$(go mod download -json "k8s.io/kubernetes@v$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  [ -f "$MOD" ] || { log "could not download k8s.io/kubernetes@v$K8S_VERSION"; exit 1; }
  STAGING=$(sed -n 's#^[[:space:]]*\(k8s\.io/[a-z0-9-]*\) => \./staging/.*#\1#p' "$MOD")
  go mod init local/cftunnel-kube-bins >/dev/null 2>&1
  go mod edit -go="$(awk '/^go /{print $2; exit}' "$MOD")"
  # godebug lines, single-line or block form
  for g in $(awk '/^godebug \(/{b=1;next} b&&/^\)/{b=0} b{print $1} /^godebug [^(]/{print $2}' "$MOD"); do
    go mod edit -godebug="$g"
  done
  for m in $STAGING; do go mod edit -replace="$m=$m@$STAGING_TAG"; done
  go mod edit -require="k8s.io/kubernetes@v$K8S_VERSION"
  log "resolving modules for Kubernetes v$K8S_VERSION"
  tools=""
  for b in $missing_kube; do tools="$tools k8s.io/kubernetes/cmd/$b@v$K8S_VERSION"; done
  # shellcheck disable=SC2086
  go get -tool $tools
  V=k8s.io/component-base/version
  CV=k8s.io/client-go/pkg/version
  LDFLAGS="-s -w"
  for pkg in $V $CV; do
    LDFLAGS="$LDFLAGS -X $pkg.gitVersion=v$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$MINOR -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  pkgs=""
  for b in $missing_kube; do pkgs="$pkgs k8s.io/kubernetes/cmd/$b"; done
  log "building$missing_kube (cold: tens of minutes on 2 cores)"
  # shellcheck disable=SC2086
  go build -trimpath -tags=selinux,notest,grpcnotrace -ldflags "$LDFLAGS" -o "$OUT/" $pkgs
fi

if [ ! -x "$OUT/helm" ]; then
  cd "$HELM_WORK"
  rm -f go.mod go.sum
  go mod init local/cftunnel-helm-bin >/dev/null 2>&1
  go get -tool "helm.sh/helm/v3/cmd/helm@v$HELM_VERSION"
  log "building helm v$HELM_VERSION"
  go build -trimpath -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=v$HELM_VERSION" \
    -o "$OUT/helm" helm.sh/helm/v3/cmd/helm
fi

have_all || { log "build finished but binaries are missing in $OUT"; exit 1; }
"$OUT/kube-apiserver" --version >&2
log "done: $OUT"
echo "$OUT"
