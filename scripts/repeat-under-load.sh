#!/usr/bin/env bash
# Runs one test binary's filtered tests N times in a row while other test binaries of the suite
# run beside them, over and over, as scripts/run-tests.sh runs three at a time: a test that
# waits on priorities must hold under the suite's own load, not only alone. Each round prints
# its result and the test's own lines on stderr that say how it went; the last line counts them.
#
#   scripts/repeat-under-load.sh 20 tunnel_reconciler budget::during_a_ faults node
#     (20 rounds of the tunnel_reconciler tests matching `budget::during_a_`, with the faults
#      and node binaries running alongside)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=$1 binary=$2 filter=$3
shift 3
load=("$@")
logs=${CFTUNNEL_TEST_LOGS:-${CARGO_TARGET_DIR:-target}/repeat-logs}
mkdir -p "$logs"
cargo test --workspace --all-targets --no-run --message-format=json-render-diagnostics >"$logs/build.json"
# Each test binary is copied aside, so a build while the rounds run does not change what runs.
mkdir -p "$logs/bin"
executable() {
  local built
  built=$(grep '"profile":{[^}]*"test":true}' "$logs/build.json" \
    | sed -n 's|.*"executable":"\([^"]*/'"$1"'-[0-9a-f]*\)".*|\1|p' | head -n 1)
  [ -n "$built" ] || return 0
  cp "$built" "$logs/bin/$1"
  echo "$logs/bin/$1"
}
target=$(executable "$binary")
[ -n "$target" ] || { echo "no test binary named $binary" >&2; exit 2; }

# The load: each named binary runs again as soon as it ends, until the rounds are over.
pids=()
for name in "${load[@]}"; do
  exe=$(executable "$name")
  [ -n "$exe" ] || { echo "no test binary named $name" >&2; exit 2; }
  # A process group of its own, so stopping it stops the control planes its tests started too.
  setsid bash -c 'while true; do "$1" >"$2" 2>&1 || true; done' _ "$exe" "$logs/load-$name.log" &
  pids+=($!)
done
stop_load() {
  for pid in "${pids[@]}"; do
    kill -- "-$pid" 2>/dev/null || true
  done
}
trap stop_load EXIT

passed=0 failed=0
for round in $(seq 1 "$rounds"); do
  began=$(date +%s)
  if "$target" "$filter" --nocapture >"$logs/round-$round.log" 2>&1; then
    passed=$((passed + 1)) status=ok
  else
    failed=$((failed + 1)) status=FAILED
  fi
  echo "round $round: $status in $(($(date +%s) - began))s"
  grep -E '^(Ready when|probed with|test .* \.\.\. |thread .* panicked)' "$logs/round-$round.log" | sed 's/^/  /' || true
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
