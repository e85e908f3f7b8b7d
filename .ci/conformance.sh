#!/usr/bin/env bash
# Runs the MCP conformance suite's client scenarios against a client command.
#   .ci/conformance.sh CLIENT_BINARY [ARG...]
# The suite starts a mock server per scenario and runs
#   CLIENT_BINARY [ARG...] <server-url>
# with MCP_CONFORMANCE_SCENARIO=<scenario> in the environment. Its mock servers
# listen on all interfaces, so each scenario runs inside its own loopback-only
# network namespace (unshare -rn). Fails unless every scenario prints
# "OVERALL: PASSED" (and exits 0). Needs Node 22: installed by .ci/interop-setup.sh.
# The auth scenarios also pass MCP_CONFORMANCE_CONTEXT (a pre-registered client); each scenario
# gets its own empty PLUGIN_MCP_OAUTH_DIR. CONFORMANCE_ONLY="a b" runs only those scenarios.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SCENARIOS=(initialize tools_call sse-retry
  # Client authorization (MCP 2025-11-25 "Authorization"): every auth scenario of the suite
  # but the draft and cross-app-access ones.
  auth/metadata-default auth/metadata-var1 auth/metadata-var2 auth/metadata-var3
  auth/basic-cimd
  auth/scope-from-www-authenticate auth/scope-from-scopes-supported
  auth/scope-omitted-when-undefined auth/scope-step-up auth/scope-retry-limit
  auth/token-endpoint-auth-basic auth/token-endpoint-auth-post auth/token-endpoint-auth-none
  auth/pre-registration
  auth/2025-03-26-oauth-metadata-backcompat auth/2025-03-26-oauth-endpoint-fallback
  auth/client-credentials-jwt auth/client-credentials-basic)
# Only these scenarios run when CONFORMANCE_ONLY names some (space-separated).
if [ -n "${CONFORMANCE_ONLY:-}" ]; then read -r -a SCENARIOS <<<"$CONFORMANCE_ONLY"; fi

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
  log="$logdir/${scenario//\//_}.log"
  echo "conformance: scenario $scenario" >&2
  rc=0
  # Each scenario signs in afresh: its own store for registrations and grants.
  oauth_dir="$logdir/oauth-${scenario//\//_}"
  timeout 180 unshare -rn env PATH="$node_bin:$PATH" PLUGIN_MCP_OAUTH_DIR="$oauth_dir" bash -c '
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
