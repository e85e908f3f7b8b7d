#!/usr/bin/env bash
# A short smoke run of each fuzz target (fuzz/): decode_reply, the SSE + JSON-RPC decoding path
# fed arbitrary replies through the public contract; sse_framer, the SSE framer on its own.
# Needs the nightly toolchain (cargo-fuzz's instrumentation); the machine image carries one.
# The build is kept outside the clone (~/.cache/plugin-mcp/fuzz-target, PLUGIN_MCP_CACHE
# overrides) so a machine that ran it before only rebuilds this crate. New inputs go to a temp
# dir, not the seeds.
# `fuzz-smoke.sh build` only builds the targets, `fuzz-smoke.sh run` only runs them (building
# first if needed), no argument does both: .ci/run builds beside the steps after `cargo test`,
# then runs the fuzzing (which uses one core) beside the bench's release build.
set -euo pipefail
phase="${1:-all}"
cd "$(dirname "$0")/../fuzz"
if ! rustup toolchain list | grep -q '^nightly'; then
  echo "fuzz smoke: skipped, no nightly toolchain on this machine"
  exit 0
fi
CARGO_FUZZ_VERSION=0.13.2
if ! cargo fuzz --version 2>/dev/null | grep -q " $CARGO_FUZZ_VERSION\$"; then
  cargo install --locked --version "$CARGO_FUZZ_VERSION" cargo-fuzz
fi
target_dir="${PLUGIN_MCP_CACHE:-$HOME/.cache/plugin-mcp}/fuzz-target"
corpus=$(mktemp -d)
trap 'rm -rf "$corpus"' EXIT
mkdir "$corpus/decode_reply" "$corpus/sse_framer"
# CARGO_TARGET_DIR from .ci/run belongs to the stable builds; the fuzz build has its own.
build() { # the last lines of the build's output; its errors in full when it fails
  local log="$corpus/build.log"
  if env -u CARGO_TARGET_DIR cargo +nightly fuzz build --target-dir "$target_dir" -s none >"$log" 2>&1; then
    tail -n 3 "$log"
  else
    grep -v '^ *[0-9]*: \|^ *at ' "$log" | grep -A12 -E '^error' | head -n 80
    return 1
  fi
}
[ "$phase" = run ] || build
[ "$phase" = build ] && exit 0
run() { # target seconds timeout
  env -u CARGO_TARGET_DIR cargo +nightly fuzz run --target-dir "$target_dir" -s none "$1" \
    "$corpus/$1" "seeds/$1" -- -max_total_time="$2" -timeout="$3" -rss_limit_mb=2048 2>&1 | tail -n 3
}
run decode_reply 45 60
run sse_framer 20 10
