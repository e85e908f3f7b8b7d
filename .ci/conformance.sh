#!/usr/bin/env bash
# Runs the MCP conformance suite's client scenarios against a client command.
#   .ci/conformance.sh CLIENT_BINARY [ARG...]
# The suite starts a mock server per scenario and runs
#   CLIENT_BINARY [ARG...] <server-url>
# with MCP_CONFORMANCE_SCENARIO=<scenario> in the environment. Its mock servers
# listen on all interfaces, so each scenario runs inside its own loopback-only
# network namespace (unshare -rn). Fails unless every scenario prints
# "OVERALL: PASSED" (and exits 0). Needs Node 22: installed by .ci/interop-setup.sh.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SCENARIOS=(initialize tools_call sse-retry)

if [ $# -lt 1 ]; then
  echo "usage: $0 CLIENT_BINARY [ARG...]" >&2
  exit 2
fi
client="$1"; shift
if [[ "$client" != */* ]]; then client="$(command -v "$client" || true)"; fi
if [ -z "$client" ] || [ ! -x "$client" ]; then
  echo "conformance: client binary not found or not executable: ${1:-}" >&2
  exit 2
fi
client="$(cd "$(dirname "$client")" && pwd)/$(basename "$client")"
cmd="$client${*:+ $*}"
# The suite splits --command on single spaces (and runs it through a shell).
if [[ "$cmd" =~ [[:space:]][[:space:]] ]] || [[ "$client" =~ [[:space:]] ]]; then
  echo "conformance: the client path must not contain whitespace: $client" >&2
  exit 2
fi

node_bin="$(bash "$ROOT/.ci/interop-setup.sh")"
conformance="$ROOT/.interop/npm/node_modules/@modelcontextprotocol/conformance/dist/index.js"

logdir="$(mktemp -d "${TMPDIR:-/tmp}/conformance.XXXXXX")"
failed=()
for scenario in "${SCENARIOS[@]}"; do
  log="$logdir/$scenario.log"
  echo "conformance: scenario $scenario" >&2
  rc=0
  timeout 180 unshare -rn env PATH="$node_bin:$PATH" bash -c '
      set -e
      ip link set lo up
      exec node "$0" client --command "$1" --scenario "$2" --timeout 60000
    ' "$conformance" "$cmd" "$scenario" >"$log" 2>&1 || rc=$?
  if [ "$rc" -eq 0 ] && grep -q 'OVERALL: PASSED' "$log"; then
    echo "conformance: $scenario PASSED" >&2
  else
    echo "conformance: $scenario FAILED (exit $rc); its output:" >&2
    sed 's/^/    /' "$log" >&2
    failed+=("$scenario")
  fi
done

echo "conformance: logs in $logdir" >&2
passed=$(( ${#SCENARIOS[@]} - ${#failed[@]} ))
echo "conformance: ${passed} passed, ${#failed[@]} failed"
[ "${#failed[@]}" -eq 0 ]
