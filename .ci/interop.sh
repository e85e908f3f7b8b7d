#!/usr/bin/env bash
# Runs the project against real MCP peers nobody here wrote:
#   1. installs them into .interop/ (.ci/interop-setup.sh; idempotent),
#   2. the interop tests (`#[ignore]`d in a plain `cargo test`) with --ignored and
#      PLUGIN_MCP_INTEROP=1, so a missing peer FAILS instead of skipping: server-everything
#      (Node 22) and the Python mcp SDK 1.x / 2.x servers,
#   3. the official conformance suite's client scenarios against examples/conformance.rs.
# PLUGIN_MCP_INTEROP_MODERN=1 adds the MCP 2026-07-28 peers' tests (interop::modern_*) and, through
# PLUGIN_MCP_CONFORMANCE_MODERN=1, the suite's 2026-07-28 scenarios; both need the client's
# 2026-07-28 era.
# Exits non-zero on the first failure. Prints the elapsed time at the end.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
started=$(date +%s)

echo "interop: installing peers" >&2
bash .ci/interop-setup.sh >/dev/null

# The interop::modern_* tests need a client that speaks MCP 2026-07-28 and are left out until
# PLUGIN_MCP_INTEROP_MODERN=1 (see tests/it/interop.rs).
skip=(--skip interop::modern_)
if [ "${PLUGIN_MCP_INTEROP_MODERN:-}" = 1 ]; then skip=(); fi
echo "interop: cargo test --test it interop:: -- --ignored ${skip[*]} (PLUGIN_MCP_INTEROP=1)" >&2
PLUGIN_MCP_INTEROP=1 cargo test --test it interop:: -- --ignored "${skip[@]}"

echo "interop: conformance suite" >&2
cargo build --example conformance
if [ "${PLUGIN_MCP_INTEROP_MODERN:-}" = 1 ]; then export PLUGIN_MCP_CONFORMANCE_MODERN=1; fi
.ci/conformance.sh "${CARGO_TARGET_DIR:-$ROOT/target}/debug/examples/conformance"

echo "interop: passed in $(( $(date +%s) - started )) s"
