#!/usr/bin/env bash
# Build-time benchmark of the shipped binary (BENCHMARKS.md, "Build"): a cold release build in
# an empty target directory, exactly as scripts/build-image.sh builds it (static, --target), then
# a warm rebuild after touching one file of the policy layer, then the image's size.
#
#   scripts/bench-build.sh [POLICY_FILE]   # default: crates/policy/src/rules/route.rs
#
# Prints one line per measurement. Needs buildah (scripts/install-image-deps.sh) for the image.
set -euo pipefail
cd "$(dirname "$0")/.."
policy_file=${1:-crates/policy/src/rules/route.rs}
[ -f "$policy_file" ] || { echo "no such file: $policy_file" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export CARGO_TARGET_DIR=$work/target CFTUNNEL_CACHE=$work/cache
triple=$(uname -m)-unknown-linux-gnu
build() {
  RUSTFLAGS="-C target-feature=+crt-static" \
    cargo build --release --locked --target "$triple" --bin cftunnel >/dev/null 2>&1
}
cargo fetch --locked >/dev/null 2>&1
start=$(date +%s.%N); build; end=$(date +%s.%N)
printf 'cold release build: %.0f s\n' "$(echo "$end - $start" | bc)"
touch "$policy_file"
start=$(date +%s.%N); build; end=$(date +%s.%N)
printf 'warm rebuild after touching %s: %.0f s\n' "$policy_file" "$(echo "$end - $start" | bc)"
binary=$CARGO_TARGET_DIR/$triple/release/cftunnel
printf 'binary: %s bytes\n' "$(stat -c %s "$binary")"
archive=$(scripts/build-image.sh 2>/dev/null | tail -n 1)
printf 'image archive: %s bytes\n' "$(stat -c %s "$archive")"
