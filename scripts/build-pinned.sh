#!/usr/bin/env bash
# Builds the cftunnel binary of a pinned earlier commit, the build tests/upgrade.rs upgrades from
# and rolls back to. The source is `git archive` of that commit (so the working tree is never
# touched), built with `--locked` and a target directory of its own, so it never mixes with the
# current tree's build. A debug build: the test only needs the binary to run, and a cold debug
# build is the shortest.
# Output: $CFTUNNEL_PINNED_DIR (default ~/.cache/cftunnel/pinned/<hash>)/cftunnel, its path printed
# on the last line. A warm run (binary present) is a no-op. On a shallow clone the commit is
# fetched first.
set -euo pipefail
cd "$(dirname "$0")/.."

# The last commit before the status writer, the new route loop and prometheus-client metrics.
PINNED_COMMIT=6501a518ab96197d4494de9c82d9ec9c8637c40c
CACHE_ROOT=${CFTUNNEL_CACHE:-$HOME/.cache/cftunnel}
OUT=${CFTUNNEL_PINNED_DIR:-$CACHE_ROOT/pinned/$PINNED_COMMIT}
BIN=$OUT/cftunnel

log() { printf '[build-pinned] %s\n' "$*" >&2; }

if [ -x "$BIN" ]; then
  log "cached: $BIN"
  echo "$BIN"
  exit 0
fi

command -v cargo >/dev/null || { log "cargo (Rust stable) is required but not on PATH"; exit 1; }

# A shallow or single-branch clone may lack the commit: fetch it (by hash, else the whole history).
if ! git cat-file -e "$PINNED_COMMIT^{commit}" 2>/dev/null; then
  log "fetching $PINNED_COMMIT"
  git fetch --quiet --no-tags origin "$PINNED_COMMIT" \
    || git fetch --quiet --no-tags --unshallow origin \
    || git fetch --quiet --no-tags origin
  git cat-file -e "$PINNED_COMMIT^{commit}" || { log "commit $PINNED_COMMIT not found"; exit 1; }
fi

SRC=$OUT/src
mkdir -p "$OUT"
rm -rf "$SRC" "$SRC.tmp"
mkdir -p "$SRC.tmp"
git archive --format=tar "$PINNED_COMMIT" | tar -x -C "$SRC.tmp"
mv "$SRC.tmp" "$SRC"

log "building cftunnel at $PINNED_COMMIT (cold: about 6 minutes on 2 cores)"
(cd "$SRC" && CARGO_TARGET_DIR=$OUT/target cargo build --locked -p cftunnel --bin cftunnel >&2)
install -m 0755 "$OUT/target/debug/cftunnel" "$BIN.tmp"
mv "$BIN.tmp" "$BIN"
log "done: $BIN"
echo "$BIN"
