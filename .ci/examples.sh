#!/usr/bin/env bash
# The README's commands as a newcomer runs them: the quickstart, and the host CLI's three exit
# codes. Asserts exact output.
set -euo pipefail
cd "$(dirname "$0")/.."
fail() { echo "examples: $*" >&2; exit 1; }
checks=0
ok() { checks=$((checks + 1)); }

cargo build -q --examples
out=$(cargo run -q --example quickstart)
[ "$(printf '%s\n' "$out" | tail -n 1)" = "5" ] || fail "quickstart did not end with the call result 5: $out"
ok
printf '%s\n' "$out" | grep -qF '{"namespace":"demo","status":"ready","tools":["add","echo","fail","media","slow","weather"]}' \
  || fail "quickstart printed no ready listing: $out"
ok

host=target/debug/examples/host
expected='{"servers":[{"namespace":"files","status":"error","reason":"local MCP servers (command) are not supported yet","tools":[]},{"namespace":"legacy","status":"error","reason":"the legacy HTTP+SSE transport (type \"sse\") is not supported; point \"url\" at the server'"'"'s Streamable HTTP endpoint instead","tools":[]}]}'
[ "$($host fixtures/local-only.json mcp/get_dynamic_tools)" = "$expected" ] || fail "host listing differs"
ok

rc=0; err=$($host fixtures/local-only.json mcp/call_dynamic_tool '{"namespace":"files","toolName":"read"}' 2>&1 >/dev/null) || rc=$?
[ "$rc" = 1 ] || fail "a tool error should exit 1, got $rc"
ok
[ "$err" = 'unavailable: server "files" is unavailable: local MCP servers (command) are not supported yet' ] || fail "tool error text: $err"
ok

for args in "fixtures/not-mcp.json mcp/get_dynamic_tools" "fixtures/missing.json mcp/get_dynamic_tools" \
            "fixtures/local-only.json" "--wait x fixtures/local-only.json mcp/get_dynamic_tools" \
            "fixtures/local-only.json mcp/get_dynamic_tools {not-json}"; do
  rc=0; $host $args >/dev/null 2>&1 || rc=$?
  [ "$rc" = 2 ] || fail "host $args should exit 2, got $rc"
  ok
done
echo "examples: $checks passed, 0 failed"
