#!/usr/bin/env bash
# A short smoke run of the fuzz target (fuzz/): the SSE + JSON-RPC decoding path fed arbitrary
# replies through the public contract. Needs the nightly toolchain (cargo-fuzz's
# instrumentation); the machine image carries one. New inputs go to a temp dir, not the seeds.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
if ! rustup toolchain list | grep -q '^nightly'; then
  echo "fuzz smoke: skipped, no nightly toolchain on this machine"
  exit 0
fi
command -v cargo-fuzz >/dev/null || cargo install --locked cargo-fuzz
corpus=$(mktemp -d)
trap 'rm -rf "$corpus"' EXIT
cargo +nightly fuzz run -s none decode_reply "$corpus" seeds/decode_reply -- \
  -max_total_time=60 -timeout=60 -rss_limit_mb=2048 2>&1 | tail -n 3
