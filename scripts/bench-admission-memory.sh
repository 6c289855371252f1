#!/usr/bin/env bash
# Webhook memory of the full operator under reviews at the body limit (BENCHMARKS.md): builds the
# control-plane binaries (a no-op when cached), the release `cftunnel` and the benchmark, then
# runs `cftunnel run` on a local control plane with the Cloudflare simulator and sends it the
# large reviews. Arguments go to the benchmark, e.g. `--concurrency 32,256 --rounds 2`.
set -euo pipefail
cd "$(dirname "$0")/.."
bin_dir=$(scripts/build-control-plane.sh | tail -n 1)
export CFTUNNEL_BIN_DIR=$bin_dir
cargo build --release --bin cftunnel --example admission_memory_bench
target_dir=${CARGO_TARGET_DIR:-target}
exec "$target_dir/release/examples/admission_memory_bench" \
  --operator "$target_dir/release/cftunnel" "$@"
