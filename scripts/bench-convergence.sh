#!/usr/bin/env bash
# Convergence benchmark (docs/design.md §8, BENCHMARKS.md): builds the control-plane binaries (a no-op when
# cached) and the release `cftunnel`, then applies the benchmark's tunnels and routes to a local
# control plane with `cftunnel run` against the Cloudflare simulator. Arguments go to the
# benchmark, e.g. `--namespaces 2 --tunnels-per-namespace 5 --routes-per-tunnel 4`, or inside
# Cloudflare's budget with probes, a CSV and a chart:
#   scripts/bench-convergence.sh --budget default --probes --out-dir docs/bench/100x10
# (`--routes-as httproute` for Gateway API routes, `--cloudflare-budget 900/5m` for cftunnel's pace,
# `--steady 720` to count the drift checks of twelve untouched minutes after the restart).
set -euo pipefail
cd "$(dirname "$0")/.."
bin_dir=$(scripts/build-control-plane.sh | tail -n 1)
export CFTUNNEL_BIN_DIR=$bin_dir
cargo build --release --bin cftunnel --example convergence_bench
target_dir=${CARGO_TARGET_DIR:-target}
exec "$target_dir/release/examples/convergence_bench" --cftunnel "$target_dir/release/cftunnel" "$@"
