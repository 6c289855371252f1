#!/usr/bin/env bash
# Rewrites every tests/data/plan/<case>.out.yaml from its <case>.in.yaml with the current code
# (crates/policy/tests/plan_golden). Read `git diff tests/data/plan` before committing: each
# output is what cftunnel does for its input.
set -euo pipefail
cd "$(dirname "$0")/.."
CFTUNNEL_BLESS_PLAN=1 exec cargo test --locked -p cftunnel-policy --test plan_golden "$@"
