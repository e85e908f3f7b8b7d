#!/usr/bin/env bash
# break-11: CLI checks of examples/host.rs that fail today (findings from the break-11 review).
# Each check asserts the exact value the README's contract implies; run: bash break-cli.sh
# (no network beyond none: every config here has no remote servers). Exit 1 if any check fails.
set -uo pipefail
cd "$(dirname "$0")"
cargo build -q --example host
host=target/debug/examples/host
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
check() { # name expected actual
  if [ "$2" = "$3" ]; then echo "ok   $1"; else echo "FAIL $1: expected [$2], got [$3]"; failed=1; fi
}

# finding 5: "CONFIG ... not JSON(C) ... exit 2" (README table). Single-quoted strings and a missing
# comma are neither JSON nor JSONC (VS Code's parser rejects both), yet the host accepts them.
printf "{'servers': {}}" > "$tmp/single-quotes.json"
rc=0; $host "$tmp/single-quotes.json" mcp/get_dynamic_tools >/dev/null 2>&1 || rc=$?
check "finding 5: single-quoted JSONC keys exit 2" 2 "$rc"
printf '{"servers": {} "inputs": []}' > "$tmp/missing-comma.json"
rc=0; $host "$tmp/missing-comma.json" mcp/get_dynamic_tools >/dev/null 2>&1 || rc=$?
check "finding 5: a missing comma exits 2" 2 "$rc"

# finding 6: a config naming "servers" twice silently drops the first object (here the entry
# "files"); "neither or both of mcpServers and servers" exits 2, and so should a repeated key.
printf '{"servers": {"files": {"command": "npx"}}, "servers": {}}' > "$tmp/dup.json"
rc=0; out=$($host "$tmp/dup.json" mcp/get_dynamic_tools 2>/dev/null) || rc=$?
check "finding 6: a repeated servers key exits 2" "2:" "$rc:$out"

# finding 7: a reader that closes stdout early (`| head -n 1` on a script) makes the host panic
# (exit 101, a Rust backtrace on stderr) instead of stopping cleanly.
printf 'mcp/get_dynamic_tools\nmcp/get_dynamic_tools\n' > "$tmp/two.txt"
rc=0; RUST_BACKTRACE=0 $host fixtures/local-only.json --script "$tmp/two.txt" 2>"$tmp/epipe-err" | true; rc=${PIPESTATUS[0]}
check "finding 7: a closed stdout is no panic (exit code)" "not 101" "$([ "$rc" = 101 ] && echo 101 || echo 'not 101')"
check "finding 7: a closed stdout is no panic (stderr)" "" "$(grep -o 'panicked' "$tmp/epipe-err" | head -n 1)"

exit $failed
