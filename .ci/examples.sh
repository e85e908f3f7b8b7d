#!/usr/bin/env bash
# The README's commands as a newcomer runs them: the quickstart, the host CLI's exit
# codes, and every code block of README.md (built, run or parsed; see the end). Asserts exact
# output.
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

host="${CARGO_TARGET_DIR:-target}/debug/examples/host"
expected='{"servers":[{"namespace":"files","status":"error","reason":"local MCP servers (command) are not supported yet","tools":[]},{"namespace":"legacy","status":"error","reason":"the legacy HTTP+SSE transport (type \"sse\") is not supported; point \"url\" at the server'"'"'s Streamable HTTP endpoint instead","tools":[]}]}'
[ "$($host fixtures/local-only.json mcp/get_dynamic_tools)" = "$expected" ] || fail "host listing differs"
ok

rc=0; err=$($host fixtures/local-only.json mcp/call_dynamic_tool '{"namespace":"files","toolName":"read"}' 2>&1 >/dev/null) || rc=$?
[ "$rc" = 1 ] || fail "a tool error should exit 1, got $rc"
ok
[ "$err" = 'unavailable: server "files" is unavailable: local MCP servers (command) are not supported yet' ] || fail "tool error text: $err"
ok

tmp=$(mktemp -d)
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; rm -rf "$tmp"; }
trap cleanup EXIT

# Every usage and config problem exits 2.
printf '{"mcpServers": {}, "servers": {}}' > "$tmp/both.json"
printf '{"mcpServers": 5}' > "$tmp/not-object.json"
printf '[1, 2]' > "$tmp/array.json"
printf 'mcp/get_dynamic_tools\nmcp/get_dynamic_tools {oops\n' > "$tmp/bad-script.txt"
# JSONC is JSON plus comments and trailing commas, nothing looser, and no key named twice.
printf "{'servers': {}}" > "$tmp/single-quotes.json"
printf '{"servers": {} "inputs": []}' > "$tmp/missing-comma.json"
printf '{"servers": {"files": {"command": "npx"}}, "servers": {}}' > "$tmp/dup.json"
printf '{"servers": {"files": {"command": "npx", "command": "uvx"}}}' > "$tmp/dup-entry.json"
for args in "fixtures/not-mcp.json mcp/get_dynamic_tools" "fixtures/missing.json mcp/get_dynamic_tools" \
            "$tmp/both.json mcp/get_dynamic_tools" "$tmp/not-object.json mcp/get_dynamic_tools" \
            "$tmp/array.json mcp/get_dynamic_tools" \
            "$tmp/single-quotes.json mcp/get_dynamic_tools" "$tmp/missing-comma.json mcp/get_dynamic_tools" \
            "$tmp/dup.json mcp/get_dynamic_tools" "$tmp/dup-entry.json mcp/get_dynamic_tools" \
            "fixtures/local-only.json" "--wait x fixtures/local-only.json mcp/get_dynamic_tools" \
            "--bogus fixtures/local-only.json mcp/get_dynamic_tools" \
            "fixtures/local-only.json mcp/get_dynamic_tools {not-json}" \
            "fixtures/local-only.json --script $tmp/bad-script.txt" \
            "fixtures/local-only.json --script $tmp/missing.txt" \
            "fixtures/local-only.json mcp/get_dynamic_tools --script fixtures/script.txt"; do
  rc=0; out=$($host $args 2>/dev/null) || rc=$?
  [ "$rc" = 2 ] || fail "host $args should exit 2, got $rc"
  ok
  [ -z "$out" ] || fail "host $args printed on stdout: $out"
  ok
done
# `host FILE mcp/get_dynamic_tools` (FILE in $tmp) fails with `host: $tmp/FILE` and then exactly
# REST on stderr; else fails with LABEL.
config_error() { # FILE REST LABEL
  rc=0; err=$($host "$tmp/$1" mcp/get_dynamic_tools 2>&1) || rc=$?
  [ "$err" = "host: $tmp/$1$2" ] || fail "$3: $err"
  ok
}
config_error both.json ': the mcp config is a whole mcp.json with both "mcpServers" and "servers"; keep one' "both keys"
config_error not-object.json ': the mcp config'"'"'s "mcpServers" must be an object of servers, found a number' \
  "not an object"
config_error missing-comma.json ': the mcp config'"'"'s text is not JSON (comments and trailing commas are allowed): expected `,` or `}` at line 1 column 16' \
  "missing comma"
config_error dup.json ': the mcp config'"'"'s text names the key "servers" twice in one object; keep one at line 1 column 52' "repeated key"
config_error dup-entry.json ': the mcp config'"'"'s text names the key "command" twice in one object; keep one at line 1 column 50' \
  "repeated key in an entry"

# --help: the usage on stdout, exit 0.
help=$($host --help) || fail "--help should exit 0"
[ "$(printf '%s\n' "$help" | head -n 1)" = "usage: host [--wait SECONDS] [--json] CONFIG TOOL [ARGUMENTS]" ] || fail "--help: $help"
ok

printf '%s\n' "$help" | grep -qxF '       host login [--wait SECONDS] CONFIG NAMESPACE' || fail "--help lists no login: $help"
ok
printf '%s\n' "$help" | grep -qxF '       host logout CONFIG NAMESPACE' || fail "--help lists no logout: $help"
ok
for args in "login --help" "logout --help" "login --wait 5 x.json docs --help"; do
  rc=0; out=$($host $args) || rc=$?
  [ "$rc" = 0 ] && [ "$out" = "$help" ] || fail "host $args: exit $rc, $out"
  ok
done

# host login waits through a server that is down (its start is retried), then says why.
printf '{"mcpServers": {"down": {"url": "http://127.0.0.1:9/mcp"}}}' > "$tmp/down.json"
rc=0; err=$($host login --wait 2 "$tmp/down.json" down 2>&1 >/dev/null) || rc=$?
[ "$rc" = 1 ] || fail "login to a server that is down should exit 1, got $rc"
ok
[ "$err" = 'host: login failed: server "down" was not ready within 2 seconds; last: connection refused by http://127.0.0.1:9 (no server is listening there)' ] \
  || fail "login to a server that is down: $err"
ok

# JSONC and VS Code's "servers" key.
[ "$($host fixtures/vscode.jsonc mcp/get_dynamic_tools)" = '{"servers":[{"namespace":"files","status":"error","reason":"local MCP servers (command) are not supported yet","tools":[]}]}' ] \
  || fail "the JSONC config with \"servers\" was not read"
ok

# A UTF-8 byte order mark before a config or a script file is skipped.
printf '\357\273\277{"servers": {"files": {"command": "npx"}}}' > "$tmp/bom.json"
printf '\357\273\277mcp/get_dynamic_tools {"namespace":"files"}\n' > "$tmp/bom.txt"
rc=0; out=$($host "$tmp/bom.json" --script "$tmp/bom.txt") || rc=$?
[ "$rc" = 3 ] || fail "a config and a script with a BOM should exit 3 (its entry is refused), got $rc"
ok
[ "$out" = '{"line":1,"ok":true,"text":"{\"namespace\":\"files\",\"status\":\"error\",\"reason\":\"local MCP servers (command) are not supported yet\",\"tools\":[]}","json":{"namespace":"files","status":"error","reason":"local MCP servers (command) are not supported yet","tools":[]}}' ] \
  || fail "BOM: $out"
ok

# A reader that closes stdout early stops the host quietly: exit 1, no panic.
printf 'mcp/get_dynamic_tools\nmcp/get_dynamic_tools\n' > "$tmp/two.txt"
closed_stdout() { # runs "$@" with a stdout pipe whose reader is already gone; prints the exit code
  python3 -c 'import os, subprocess, sys
r, w = os.pipe(); os.close(r)
print(subprocess.run(sys.argv[1:], stdout=w).returncode)' "$@"
}
rc=$(RUST_BACKTRACE=0 closed_stdout $host fixtures/local-only.json --script "$tmp/two.txt" 2>"$tmp/epipe-err")
[ "$rc" = 1 ] || fail "a closed stdout should exit 1, got $rc"
ok
[ ! -s "$tmp/epipe-err" ] || fail "a closed stdout printed on stderr: $(cat "$tmp/epipe-err")"
ok
rc=$(closed_stdout $host fixtures/local-only.json mcp/get_dynamic_tools 2>"$tmp/epipe-err")
[ "$rc" = 1 ] || fail "a single call with a closed stdout should exit 1, got $rc"
ok
[ ! -s "$tmp/epipe-err" ] || fail "a single call with a closed stdout printed on stderr: $(cat "$tmp/epipe-err")"
ok

# --json: one JSON line on stdout, exit 1 for a failed call.
rc=0; out=$($host --json fixtures/local-only.json mcp/call_dynamic_tool '{"namespace":"files","toolName":"read"}' 2>/dev/null) || rc=$?
[ "$rc" = 1 ] || fail "--json: a tool error should exit 1, got $rc"
ok
[ "$out" = '{"ok":false,"kind":"unavailable","message":"server \"files\" is unavailable: local MCP servers (command) are not supported yet"}' ] \
  || fail "--json line: $out"
ok

# Script mode: one JSON line per TOOL line, in order; exit 1 when any call failed.
# A namespace refused by its config is not waited for: --wait 100 costs nothing here.
started=$SECONDS
rc=0; out=$($host --wait 100 fixtures/local-only.json --script fixtures/script.txt 2>/dev/null) || rc=$?
[ "$rc" = 1 ] || fail "a script with a failed call should exit 1, got $rc"
ok
[ $((SECONDS - started)) -lt 50 ] || fail "the host waited for a refused namespace"
ok
expected='{"line":2,"ok":true,"text":"{\"namespace\":\"files\",\"status\":\"error\",\"reason\":\"local MCP servers (command) are not supported yet\",\"tools\":[]}","json":{"namespace":"files","status":"error","reason":"local MCP servers (command) are not supported yet","tools":[]}}
{"line":5,"ok":false,"kind":"unavailable","message":"server \"files\" is unavailable: local MCP servers (command) are not supported yet"}
{"line":6,"ok":false,"kind":"not_found","message":"unknown namespace \"nowhere\"; known namespaces: files, legacy"}'
[ "$out" = "$expected" ] || fail "script output differs: $out"
ok
rc=0; out=$(printf '# from stdin\nmcp/get_dynamic_tools {"namespace":"legacy"}\n' | $host fixtures/local-only.json --script -) || rc=$?
[ "$rc" = 3 ] || fail "an all-ok script on a config with refused entries should exit 3, got $rc"
ok
[ "$out" = '{"line":2,"ok":true,"text":"{\"namespace\":\"legacy\",\"status\":\"error\",\"reason\":\"the legacy HTTP+SSE transport (type \\\"sse\\\") is not supported; point \\\"url\\\" at the server'"'"'s Streamable HTTP endpoint instead\",\"tools\":[]}","json":{"namespace":"legacy","status":"error","reason":"the legacy HTTP+SSE transport (type \"sse\") is not supported; point \"url\" at the server'"'"'s Streamable HTTP endpoint instead","tools":[]}}' ] \
  || fail "stdin script: $out"
ok
rc=0; out=$(printf 'sleep forever\n' | $host fixtures/local-only.json --script - 2>/dev/null) || rc=$?
[ "$rc" = 1 ] || fail "a bad stdin line should exit 1 (a failed line), got $rc"
ok
[ "$out" = '{"line":1,"ok":false,"kind":"invalid_arguments","message":"line 1: sleep takes seconds from 0 to 86400, not \"forever\""}' ] || fail "bad stdin line: $out"
ok

# A live demo server (loopback) beside a hung one: calls to the demo wait for the demo only.
"${CARGO_TARGET_DIR:-target}/debug/examples/quickstart" --serve > "$tmp/demo-url" &
pids+=($!)
python3 -c 'import socket, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(64)
print(s.getsockname()[1], flush=True); time.sleep(600)' > "$tmp/hung-port" &
pids+=($!)
for _ in $(seq 100); do [ -s "$tmp/demo-url" ] && [ -s "$tmp/hung-port" ] && break; sleep 0.1; done
printf '{"mcpServers": {"demo": {"url": "%s"}, "hung": {"url": "http://127.0.0.1:%s/mcp"}}}' \
  "$(head -n 1 "$tmp/demo-url")" "$(head -n 1 "$tmp/hung-port")" > "$tmp/live.json"
printf '%s\n' 'mcp/call_dynamic_tool {"namespace":"demo","toolName":"add","arguments":{"a":2,"b":3}}' \
  'sleep 0.05' 'mcp/call_dynamic_tool {"namespace":"demo","toolName":"fail"}' > "$tmp/live.txt"
started=$SECONDS
rc=0; out=$($host --wait 100 "$tmp/live.json" --script "$tmp/live.txt" 2>/dev/null) || rc=$?
[ "$rc" = 1 ] || fail "the live script should exit 1 (one failed call), got $rc"
ok
[ "$out" = '{"line":1,"ok":true,"text":"5"}
{"line":3,"ok":false,"kind":"backend","message":"the demo tool failed on purpose"}' ] || fail "live script output: $out"
ok
[ $((SECONDS - started)) -lt 60 ] || fail "the calls to demo waited for the hung server"
ok
# The hung server was still loading when the wait ran out: it is not up, so exit 3 (not 0).
rc=0; out=$($host --wait 1 "$tmp/live.json" mcp/get_dynamic_tools 2>"$tmp/err") || rc=$?
[ "$rc" = 3 ] || fail "the listing with a server still loading after the wait should exit 3, got $rc"
ok
[ "$out" = '{"servers":[{"namespace":"demo","status":"ready","tools":["add","echo","fail","media","slow","weather"]},{"namespace":"hung","status":"loading","tools":[]}]}' ] \
  || fail "listing after the wait: $out"
ok
[ "$(cat "$tmp/err")" = 'host: the wait ran out; not ready: hung (loading)
host: exit 3: not every server is up: hung (loading)' ] || fail "wait message: $(cat "$tmp/err")"
ok

# Every code block of README.md is built, run or parsed: the ```toml dependencies and the ```rust
# Host (the first ```rust block; each later one is built as a module of it) are built as a crate
# of their own (as a Host author would, against this clone), and the Host is run against the demo
# server and against a server that records its DELETE (the cleanup wait); each
# ```sh line is run and must exit 0 (or 3: it answered, and its config has a refused entry), but
# `cargo test`, which is .ci/run's own step; each ```json block must parse.
python3 - README.md "$tmp/readme" <<'PY'
import json, os, re, sys, tomllib
text = open(sys.argv[1]).read()
out = sys.argv[2]
os.makedirs(out + "/src", exist_ok=True)
blocks = re.findall(r"^```(\w*)\n(.*?)^```$", text, re.S | re.M)
kinds = {}
rust = []
for kind, body in blocks:
    kinds[kind] = kinds.get(kind, 0) + 1
    if kind == "json":
        json.loads(body)
    elif kind == "toml":
        deps = tomllib.loads(body)["dependencies"]
        assert set(deps) == {"plugin-mcp", "runvil-plugin", "serde_json", "tokio"}, deps
        open(out + "/deps.toml", "w").write(body)
    elif kind == "rust":
        rust.append(body)
    elif kind == "sh":
        lines = [l for l in body.replace("\\\n", " ").splitlines() if l.strip() and not l.startswith("#")]
        # `cargo test` is .ci/run's own step ("the README's test command"): not run twice.
        lines = [l for l in lines if l.split("#")[0].strip() != "cargo test"]
        open(out + "/commands.sh", "a").write("\n".join(lines) + "\n")
    else:
        sys.exit(f"README.md has a ```{kind} block that .ci/examples.sh does not check")
if not rust or kinds.get("toml") != 1:
    sys.exit(f"README.md should have a ```rust Host and one ```toml block: {kinds}")
# The first ```rust block is the Host (its main.rs); each later one is a module of it, built too.
main = rust[0]
for i, body in enumerate(rust[1:], 1):
    open(f"{out}/src/readme_{i}.rs", "w").write(body)
    main += f"\n#[allow(dead_code)]\nmod readme_{i};\n"
open(out + "/src/main.rs", "w").write(main)
PY
ok
clone=$(pwd)
{ printf '[package]\nname = "readme-host"\nversion = "0.0.0"\nedition = "2024"\n\n[workspace]\n\n'
  sed "s#\"\.\./plugin-mcp#\"$clone#" "$tmp/readme/deps.toml"; } > "$tmp/readme/Cargo.toml"
cp Cargo.lock "$tmp/readme/"
(cd "$tmp/readme" && cargo build -q --offline) || fail "the README's Host does not build with the README's Cargo.toml lines"
ok
readme_host="${CARGO_TARGET_DIR:-$tmp/readme/target}/debug/readme-host"
while IFS= read -r command; do
  rc=0; out=$(bash -c "$command" 2>/dev/null) || rc=$?
  # 3: the command answered, but an entry of its config is refused (fixtures/local-only.json).
  { [ "$rc" = 0 ] || [ "$rc" = 3 ]; } && [ -n "$out" ] || fail "README command exits $rc or prints nothing: $command"
  ok
done < "$tmp/readme/commands.sh"

printf '{"mcpServers": {"demo": {"url": "%s"}}}' "$(head -n 1 "$tmp/demo-url")" > "$tmp/demo.json"
[ "$($readme_host "$tmp/demo.json")" = '{"servers":[{"namespace":"demo","status":"ready","tools":["add","echo","fail","media","slow","weather"]}]}' ] \
  || fail "the README's Host printed another listing"
ok
cat > "$tmp/deletes.py" <<'PY'
import json, select, socket, sys, time
from http.server import ThreadingHTTPServer, BaseHTTPRequestHandler
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def send(self, code, body=None):
        data = json.dumps(body).encode() if body is not None else b""
        self.send_response(code); self.send_header("Mcp-Session-Id", "s-1")
        if body is not None: self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data))); self.end_headers(); self.wfile.write(data)
    def do_GET(self): self.send(405)
    def do_DELETE(self):
        time.sleep(0.3)   # a DELETE that takes a moment: the Host must still be there to hear it
        ready, _, _ = select.select([self.connection], [], [], 0)
        gone = bool(ready) and self.connection.recv(1, socket.MSG_PEEK) == b""
        who = " after the client left" if gone else ""
        open(sys.argv[1], "a").write("DELETE " + self.headers.get("Mcp-Session-Id", "") + who + "\n"); self.send(200)
    def do_POST(self):
        msg = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        if "id" not in msg: return self.send(202)
        result = {"initialize": {"protocolVersion": msg.get("params", {}).get("protocolVersion"), "capabilities": {"tools": {}},
                  "serverInfo": {"name": "d", "version": "1"}}, "tools/list": {"tools": []}}.get(msg["method"], {})
        self.send(200, {"jsonrpc": "2.0", "id": msg["id"], "result": result})
s = ThreadingHTTPServer(("127.0.0.1", 0), H); print(s.server_address[1], flush=True); s.serve_forever()
PY
python3 "$tmp/deletes.py" "$tmp/deletes.log" > "$tmp/deletes-port" &
pids+=($!)
for _ in $(seq 100); do [ -s "$tmp/deletes-port" ] && break; sleep 0.1; done
printf '{"mcpServers": {"d": {"url": "http://127.0.0.1:%s/mcp"}}}' "$(head -n 1 "$tmp/deletes-port")" > "$tmp/deletes.json"
[ "$($readme_host "$tmp/deletes.json")" = '{"servers":[{"namespace":"d","status":"ready","tools":[]}]}' ] \
  || fail "the README's Host printed another listing for the DELETE server"
ok
[ "$(cat "$tmp/deletes.log" 2>/dev/null)" = 'DELETE s-1' ] || fail "the README's Host returned before its session's DELETE: $(cat "$tmp/deletes.log" 2>/dev/null)"
ok

echo "examples: $checks passed, 0 failed"
