#!/usr/bin/env bash
# Builds every test target once, then runs the test binaries side by side (CFTUNNEL_TEST_JOBS at
# a time, default 3), longest first. Most of the suite waits on API servers, leases and pods
# rather than on the CPU, so running binaries in parallel (as `cargo test` does not) shortens it
# without changing any test. Each binary's output goes to a log (CFTUNNEL_TEST_LOGS, default
# <target dir>/test-logs); a failing binary's log is printed whole, a passing one's summary lines.
#
#   scripts/run-tests.sh [--locked]      # as scripts/test.sh calls it
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${CFTUNNEL_TEST_JOBS:-3}
# Each binary's whole output stays here after the run (timings the tests print included).
logs=${CFTUNNEL_TEST_LOGS:-${CARGO_TARGET_DIR:-target}/test-logs}
rm -rf "$logs"
mkdir -p "$logs"
logs=$(cd "$logs" && pwd)
# A failing test of the operator writes the operator's log there too (tests' harness).
export CFTUNNEL_TEST_LOG_DIR=$logs

cargo test --workspace --all-targets "$@" --no-run --message-format=json-render-diagnostics >"$logs/build.json"
# Test executables of every crate (each library's unit tests, each binary's, each tests/*.rs,
# examples): the artifacts built with the test profile, each with its package's directory.
# Non-test builds (the cftunnel binary) are left out.
grep '"profile":{[^}]*"test":true}' "$logs/build.json" \
  | sed -n 's|.*"manifest_path":"\([^"]*\)/Cargo.toml".*"executable":"\([^"]*\)".*|\2 \1|p' \
  | sort -u >"$logs/targets"
if [ ! -s "$logs/targets" ]; then
  echo "no test executables found in cargo's output" >&2
  exit 1
fi

# The slowest binaries first, so the long ones never start last.
order="node tunnel_reconciler faults upgrade image admission_apiserver go_regex_cloudflared leader_election cftunnel_policy cftunnel"
{
  for name in $order; do grep "/$name-[0-9a-f]* " "$logs/targets" || true; done
  grep -v -E "/($(tr ' ' '|' <<<"$order"))-[0-9a-f]* " "$logs/targets" || true
} >"$logs/queue"

run_one() {
  local exe=${1% *} dir=${1#* } logs=$2 name began status
  name=$(basename "$exe")
  began=$(date +%s)
  # The bad-day tests wait out storms and outages, not the CPU: more of them at once.
  local args=()
  case $name in faults-*) args=(--test-threads 6) ;; esac
  # Like `cargo test`: the package's directory is the working directory.
  if (cd "$dir" && "$exe" "${args[@]}") >"$logs/$name.running" 2>&1; then status=ok; else status=FAILED; fi
  mv "$logs/$name.running" "$logs/$name.$status.log"
  printf '%-44s %-6s %4ss\n' "$name" "$status" "$(($(date +%s) - began))"
}
export -f run_one

started=$(date +%s)
xargs -P "$jobs" -I{} bash -c 'run_one "$1" "$2"' _ {} "$logs" <"$logs/queue" || true

failed=0
for log in "$logs"/*.ok.log; do
  [ -e "$log" ] || continue
  echo "--- $(basename "$log" .ok.log)"
  grep -E '^test result:' "$log" || true
done
for log in "$logs"/*.FAILED.log; do
  [ -e "$log" ] || continue
  failed=1
  echo
  echo "=== $(basename "$log" .FAILED.log) FAILED; its whole output:"
  cat "$log"
done
echo "test binaries ran in $(($(date +%s) - started))s, $jobs at a time; logs in $logs"
exit "$failed"
