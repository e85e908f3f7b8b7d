#!/usr/bin/env bash
# A short smoke run of each fuzz target (fuzz/): decode_reply, the SSE + JSON-RPC decoding path
# fed arbitrary replies through the public contract; sse_framer, the SSE framer on its own.
# Needs the nightly toolchain (cargo-fuzz's instrumentation); the machine image carries one.
# New inputs go to a temp dir, not the seeds.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
if ! rustup toolchain list | grep -q '^nightly'; then
  echo "fuzz smoke: skipped, no nightly toolchain on this machine"
  exit 0
fi
command -v cargo-fuzz >/dev/null || cargo install --locked cargo-fuzz
corpus=$(mktemp -d)
trap 'rm -rf "$corpus"' EXIT
mkdir "$corpus/decode_reply" "$corpus/sse_framer"
cargo +nightly fuzz run -s none decode_reply "$corpus/decode_reply" seeds/decode_reply -- \
  -max_total_time=60 -timeout=60 -rss_limit_mb=2048 2>&1 | tail -n 3
cargo +nightly fuzz run -s none sse_framer "$corpus/sse_framer" seeds/sse_framer -- \
  -max_total_time=30 -timeout=10 -rss_limit_mb=2048 2>&1 | tail -n 3
