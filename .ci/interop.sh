#!/usr/bin/env bash
# Runs the project against real MCP peers nobody here wrote:
#   1. installs them into .interop/ (.ci/interop-setup.sh; idempotent),
#   2. the interop tests (`#[ignore]`d in a plain `cargo test`) with --ignored and
#      PLUGIN_MCP_INTEROP=1, so a missing peer FAILS instead of skipping: server-everything
#      (Node 22) and the Python mcp SDK 1.x / 2.x servers,
#   3. the official conformance suite's client scenarios against examples/conformance.rs.
# The MCP 2026-07-28 peers' tests (interop::modern_*) and the suite's 2026-07-28 scenarios run
# too (PLUGIN_MCP_INTEROP_MODERN=0 leaves them out, for a quick look at the 2025 peers alone).
# Exits non-zero on the first failure. Prints the elapsed time at the end.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
started=$(date +%s)

echo "interop: installing peers" >&2
bash .ci/interop-setup.sh >/dev/null

skip=()
if [ "${PLUGIN_MCP_INTEROP_MODERN:-1}" = 0 ]; then skip=(--skip interop::modern_); fi
echo "interop: cargo test --test it interop:: -- --ignored ${skip[*]} (PLUGIN_MCP_INTEROP=1)" >&2
PLUGIN_MCP_INTEROP=1 cargo test --test it interop:: -- --ignored "${skip[@]}"

echo "interop: conformance suite" >&2
cargo build --example conformance
if [ "${PLUGIN_MCP_INTEROP_MODERN:-1}" = 1 ]; then export PLUGIN_MCP_CONFORMANCE_MODERN=1; fi
.ci/conformance.sh "${CARGO_TARGET_DIR:-$ROOT/target}/debug/examples/conformance"

echo "interop: passed in $(( $(date +%s) - started )) s"
