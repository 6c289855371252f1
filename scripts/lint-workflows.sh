#!/usr/bin/env bash
# Lints .github/workflows/ with actionlint, built once from the Go module proxy and cached under
# ${CFTUNNEL_CACHE:-~/.cache/cftunnel}/bin. shellcheck and pyflakes integration is off so the
# result does not depend on what else the machine has installed.
set -euo pipefail
cd "$(dirname "$0")/.."
version=v1.7.12
cache=${CFTUNNEL_CACHE:-$HOME/.cache/cftunnel}
bin=$cache/bin/actionlint-$version
if [ ! -x "$bin" ]; then
  command -v go >/dev/null || { echo "go is required to build actionlint $version" >&2; exit 1; }
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  echo "building actionlint $version (once; cached in $bin)" >&2
  GOBIN=$tmp GOFLAGS=-mod=mod go install "github.com/rhysd/actionlint/cmd/actionlint@$version"
  mkdir -p "$(dirname "$bin")"
  mv "$tmp/actionlint" "$bin"
fi
"$bin" -version | sed -n 1p
"$bin" -shellcheck= -pyflakes= .github/workflows/*.yml
echo "workflows are clean: $(ls .github/workflows/*.yml | tr '\n' ' ')"
