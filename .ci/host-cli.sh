#!/usr/bin/env bash
# The host CLI's login, logout and cleanup wait against small loopback servers, in the style of
# .ci/examples.sh: --wait fractions, logout's store file (with ${userHome} and ${env:NAME}), Ctrl-C during the cleanup wait, a 401
# server without OAuth, --wait after CONFIG, malformed stdin script lines, the wait for a server
# nothing listens on (and one still coming up), one that waits for a sign-in or one whose start
# failed for good (a 404, a 401 that offers no sign-in), --json's decoded "json", script answer
# lines' "line" and "id", exit codes about a call's own server, a server still booting, and a
# login to a server nothing listens on.
# Traffic goes to 127.0.0.1 only.
set -uo pipefail
cd "$(dirname "$0")/.."
cargo build -q --example host || exit 2
host="${CARGO_TARGET_DIR:-target}/debug/examples/host"
tmp=$(mktemp -d)
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; rm -rf "$tmp"; }
trap cleanup EXIT
failed=0
finding() { echo "host-cli: $*" >&2; failed=$((failed + 1)); }

# 1. `--wait` takes fractions, and the message when it runs out names them.
printf '{"mcpServers": {"down": {"url": "http://127.0.0.1:9/mcp"}}}' > "$tmp/down.json"
rc=0; err=$($host login --wait 1.5 "$tmp/down.json" down 2>&1 >/dev/null) || rc=$?
[ "$rc" = 1 ] && [ "$err" = 'host: login failed: server "down" was not ready within 1.5 seconds; last: connection refused by http://127.0.0.1:9 (no server is listening there)' ] \
  || finding "login --wait 1.5: exit $rc, $err"

# 2. `logout` names the store file as the Pack does: by the parsed `oauth.clientMetadataUrl`
# (lower-cased host, no default port).
mkdir -m 700 "$tmp/store"
printf '{"mcpServers": {"docs": {"url": "http://127.0.0.1:9/mcp", "oauth": {"clientMetadataUrl": "https://App.Example.com:443/client.json"}}}}' > "$tmp/cimd.json"
name=$(printf 'http://127.0.0.1:9/mcp\0https://app.example.com/client.json' | sha256sum | cut -c1-32)
# `logout CONFIG docs` deletes the store's only file, `$name.json`, and says so; else a finding
# named LABEL.
logout_deletes() {
  echo '{}' > "$tmp/store/$name.json"
  rc=0; out=$(PLUGIN_MCP_OAUTH_DIR="$tmp/store" $host logout "$1" docs) || rc=$?
  left=$(ls "$tmp/store")
  [ "$rc" = 0 ] && [ -z "$left" ] && [ "$out" = 'deleted the stored sign-in of "docs"' ] \
    || finding "$2: exit $rc, $out, still stored: $left"
}
logout_deletes "$tmp/cimd.json" "logout with a clientMetadataUrl"

# 2b. The same with `"clientId": ""` beside the metadata URL: an empty client id counts as none.
printf '{"mcpServers": {"docs": {"url": "http://127.0.0.1:9/mcp", "oauth": {"clientId": "", "clientMetadataUrl": "https://app.example.com/client.json"}}}}' > "$tmp/cimd-empty.json"
logout_deletes "$tmp/cimd-empty.json" "logout with an empty clientId"

# 2c. An entry whose url uses `${userHome}` (the Pack expands it; a copy of the rules once
# did not, and `logout` deleted nothing): the Pack deletes the grant and stdout says so; a second
# logout finds nothing. `${env:NAME}` likewise.
printf '{"mcpServers": {"home": {"url": "http://127.0.0.1:9/home${userHome}/mcp"}, "env": {"url": "http://${env:HOST_CLI_MCP_HOST}/mcp"}}}' > "$tmp/expanded.json"
home_name=$(printf 'http://127.0.0.1:9/home/srv/tester/mcp\0' | sha256sum | cut -c1-32)
env_name=$(printf 'http://127.0.0.1:9/mcp\0' | sha256sum | cut -c1-32)
echo '{}' > "$tmp/store/$home_name.json"
echo '{}' > "$tmp/store/$env_name.json"
for round in first second; do
  rc=0; out=$(HOME=/srv/tester PLUGIN_MCP_OAUTH_DIR="$tmp/store" $host logout "$tmp/expanded.json" home) || rc=$?
  if [ $round = first ]; then said='deleted the stored sign-in of "home"'; else said='no sign-in of "home" was stored'; fi
  [ "$rc" = 0 ] && [ "$out" = "$said" ] || finding "$round logout of a \${userHome} entry: exit $rc, $out"
done
[ ! -e "$tmp/store/$home_name.json" ] && [ -e "$tmp/store/$env_name.json" ] \
  || finding "logout of a \${userHome} entry: the store holds $(ls "$tmp/store")"
rc=0; out=$(HOST_CLI_MCP_HOST=127.0.0.1:9 PLUGIN_MCP_OAUTH_DIR="$tmp/store" $host logout "$tmp/expanded.json" env) || rc=$?
left=$(ls "$tmp/store")
[ "$rc" = 0 ] && [ "$out" = 'deleted the stored sign-in of "env"' ] && [ -z "$left" ] \
  || finding "logout of an \${env:NAME} entry: exit $rc, $out, still stored: $left"

# 3. A Ctrl-C during the cleanup wait after the last call (a DELETE the server holds for 30 s)
# exits 130, every time.
cat > "$tmp/srv.py" <<'PY'
import json, sys, time
from http.server import ThreadingHTTPServer, BaseHTTPRequestHandler
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def send(self, code, body=None, headers={}):
        data = json.dumps(body).encode() if body is not None else b""
        self.send_response(code)
        for k, v in headers.items(): self.send_header(k, v)
        if body is not None: self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data))); self.end_headers(); self.wfile.write(data)
    def do_GET(self): self.send(405)
    def do_DELETE(self): time.sleep(30); self.send(200)
    def do_POST(self):
        msg = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        if "id" not in msg: return self.send(202)
        result = {"initialize": {"protocolVersion": msg.get("params", {}).get("protocolVersion"),
                  "capabilities": {"tools": {}}, "serverInfo": {"name": "t", "version": "1"}},
                  "tools/list": {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]},
                  "tools/call": {"content": [{"type": "text", "text": "hi"}]}}.get(msg["method"], {})
        self.send(200, {"jsonrpc": "2.0", "id": msg["id"], "result": result}, {"Mcp-Session-Id": "s-1"})
ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
PY
port=18977
python3 "$tmp/srv.py" $port 2>/dev/null & pids+=($!)
sleep 0.5
printf '{"mcpServers": {"t": {"url": "http://127.0.0.1:%s/mcp"}}}' $port > "$tmp/slow-delete.json"
codes=""
for _ in 1 2 3 4 5 6 7 8; do
  $host "$tmp/slow-delete.json" mcp/call_dynamic_tool '{"namespace":"t","toolName":"echo"}' >/dev/null & hp=$!
  sleep 0.6   # the call has answered (it takes ~0.1 s); the host waits for the DELETE
  kill -INT $hp; wait $hp; codes="$codes $?"
done
[ "$codes" = " 130 130 130 130 130 130 130 130" ] || finding "Ctrl-C during the cleanup wait exits:$codes"

# 4. A server that answers 401 and publishes no OAuth metadata: `login` exits 1 at once with the
# server's own refusal.
cat > "$tmp/s401.py" <<'PY'
import sys
from http.server import ThreadingHTTPServer, BaseHTTPRequestHandler
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def reply(self):
        n = int(self.headers.get("Content-Length", 0) or 0)
        if n: self.rfile.read(n)
        code = 401 if self.path == "/mcp" else 404
        self.send_response(code); self.send_header("Content-Length", "12"); self.end_headers()
        self.wfile.write(b"unauthorized")
    do_GET = do_POST = do_DELETE = reply
ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
PY
port401=18978
python3 "$tmp/s401.py" $port401 2>/dev/null & pids+=($!)
sleep 0.5
printf '{"mcpServers": {"p": {"url": "http://127.0.0.1:%s/mcp"}}}' $port401 > "$tmp/no-oauth.json"
rc=0; err=$(PLUGIN_MCP_OAUTH_DIR="$tmp/store" $host login --wait 5 "$tmp/no-oauth.json" p 2>&1 >/dev/null) || rc=$?
[ "$rc" = 1 ] && [ "$err" = 'host: login failed: HTTP 401 Unauthorized: unauthorized; the server refuses the request and offers no sign-in this client can use: check the credentials in the entry'"'"'s "headers" (e.g. "Authorization": "Bearer ${env:TOKEN}")' ] \
  || finding "login to a 401 server without OAuth metadata: exit $rc, $err"

# 5. `login` takes `--wait` after CONFIG too, like the call form.
rc=0; err=$($host login "$tmp/down.json" --wait 1 down 2>&1 >/dev/null) || rc=$?
[ "$rc" = 1 ] && [ "$err" = 'host: login failed: server "down" was not ready within 1 seconds; last: connection refused by http://127.0.0.1:9 (no server is listening there)' ] \
  || finding "login CONFIG --wait 1 NAMESPACE: exit $rc, $(printf '%s\n' "$err" | head -n 1)"

# 6. A configured server that accepts connections and never answers (it hangs) costs the exit
# at most the 1 s an unanswered initialize gets: a one-shot call to a healthy server ends in
# under 2 s (it used to take 5 s more).
cat > "$tmp/hang.py" <<'PY'
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(16)
held = []
while True:
    c, _ = s.accept(); held.append(c)   # read nothing, answer nothing
PY
porthang=18979
python3 "$tmp/hang.py" $porthang 2>/dev/null & pids+=($!)
sleep 0.5
printf '{"mcpServers": {"t": {"url": "http://127.0.0.1:%s/mcp"}, "h": {"url": "http://127.0.0.1:%s/mcp"}}}' \
  $port $porthang > "$tmp/hanging.json"
started=$(date +%s%N)
rc=0; out=$($host "$tmp/hanging.json" mcp/call_dynamic_tool '{"namespace":"t","toolName":"echo"}' 2>/dev/null) || rc=$?
took_ms=$(( ($(date +%s%N) - started) / 1000000 ))
# The slow-DELETE server above holds each DELETE 30 s: the exit waits for it up to the bound,
# so this check uses the time from the answer on: the host ends at most ~1 s after the answer
# plus that server's bounded DELETE (5 s). Without the hanging server the same call takes as
# long; the difference is what the hanging server costs.
started=$(date +%s%N)
$host "$tmp/slow-delete.json" mcp/call_dynamic_tool '{"namespace":"t","toolName":"echo"}' >/dev/null 2>&1 || true
alone_ms=$(( ($(date +%s%N) - started) / 1000000 ))
[ "$rc" = 0 ] && [ "$out" = 'hi' ] && [ $(( took_ms - alone_ms )) -lt 1500 ] \
  || finding "a hanging server delays the host's exit: exit $rc, $out, ${took_ms} ms vs ${alone_ms} ms without it"

# 7. Script mode on stdin: a malformed line prints an invalid_arguments JSON line naming its line
# and the script goes on (exit 1: a line failed); a script file is still checked whole first.
rc=0; out=$(printf 'mcp/get_dynamic_tools {oops\nsleep forever\nmcp/call_dynamic_tool {"namespace":"files","toolName":"read"}\n' \
  | $host fixtures/local-only.json --script - 2>"$tmp/err") || rc=$?
expected='{"line":1,"ok":false,"kind":"invalid_arguments","message":"line 1: ARGUMENTS is not JSON: key must be a string at line 1 column 2"}
{"line":2,"ok":false,"kind":"invalid_arguments","message":"line 2: sleep takes seconds from 0 to 86400, not \"forever\""}
{"line":3,"ok":false,"kind":"unavailable","message":"server \"files\" is unavailable: local MCP servers (command) are not supported yet"}'
[ "$rc" = 1 ] && [ "$out" = "$expected" ] && [ ! -s "$tmp/err" ] \
  || finding "malformed stdin lines: exit $rc, $out, stderr $(cat "$tmp/err")"
printf 'mcp/get_dynamic_tools\nsleep forever\n' > "$tmp/bad-sleep.txt"
rc=0; out=$($host fixtures/local-only.json --script "$tmp/bad-sleep.txt" 2>"$tmp/err") || rc=$?
[ "$rc" = 2 ] && [ -z "$out" ] && [ "$(cat "$tmp/err")" = "host: $tmp/bad-sleep.txt line 2: sleep takes seconds from 0 to 86400, not \"forever\"" ] \
  || finding "a bad script file line: exit $rc, $out, $(cat "$tmp/err")"

# 8. A call naming a server nothing listens on stops waiting once its start was refused twice in
# a row (the listing's refusedStarts) and 5 s have passed, well before --wait 30, and says why.
started=$SECONDS
rc=0; err=$($host --wait 30 "$tmp/down.json" mcp/call_dynamic_tool '{"namespace":"down","toolName":"x"}' 2>&1 >/dev/null) || rc=$?
first=$(printf '%s\n' "$err" | head -n 1)
took=$((SECONDS - started))
case "$first" in
  'host: not waiting for down: its start was refused '[2-9]' times in a row (connection refused by http://127.0.0.1:9 (no server is listening there))') said=1 ;;
  *) said=0 ;;
esac
[ "$rc" = 1 ] && [ "$took" -ge 5 ] && [ "$took" -lt 15 ] && [ "$said" = 1 ] \
  || finding "a call to a server nothing listens on: exit $rc after $took s, $err"

# 9. A server still coming up (refused once, then answering) gets through the same wait.
cat > "$tmp/up.py" <<'PY'
import json, sys, time
from http.server import ThreadingHTTPServer, BaseHTTPRequestHandler
time.sleep(float(sys.argv[2]))
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def send(self, code, body=None, headers={}):
        data = json.dumps(body).encode() if body is not None else b""
        self.send_response(code)
        for k, v in headers.items(): self.send_header(k, v)
        if body is not None: self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data))); self.end_headers(); self.wfile.write(data)
    def do_GET(self): self.send(405)
    def do_DELETE(self): self.send(200)
    def do_POST(self):
        msg = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        if "id" not in msg: return self.send(202)
        result = {"initialize": {"protocolVersion": msg.get("params", {}).get("protocolVersion"),
                  "capabilities": {"tools": {}}, "serverInfo": {"name": "t", "version": "1"}},
                  "tools/list": {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]},
                  "tools/call": {"content": [{"type": "text", "text": "up"}]}}.get(msg["method"], {})
        self.send(200, {"jsonrpc": "2.0", "id": msg["id"], "result": result}, {"Mcp-Session-Id": "s-1"})
ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
PY
portup=18980
printf '{"mcpServers": {"up": {"url": "http://127.0.0.1:%s/mcp"}}}' $portup > "$tmp/coming-up.json"
python3 "$tmp/up.py" $portup 0.4 2>/dev/null & pids+=($!)
rc=0; out=$($host --wait 30 "$tmp/coming-up.json" mcp/call_dynamic_tool '{"namespace":"up","toolName":"echo"}' 2>"$tmp/err") || rc=$?
[ "$rc" = 0 ] && [ "$out" = 'up' ] && [ ! -s "$tmp/err" ] \
  || finding "a server coming up: exit $rc, $out, $(cat "$tmp/err")"

# 10. --json (and script lines) carry text that is itself a JSON object or array decoded as
# "json" beside "text"; other text stays text only.
rc=0; out=$($host --json "$tmp/coming-up.json" mcp/get_dynamic_tools) || rc=$?
[ "$rc" = 0 ] && [ "$out" = '{"ok":true,"text":"{\"servers\":[{\"namespace\":\"up\",\"status\":\"ready\",\"tools\":[\"echo\"]}]}","json":{"servers":[{"namespace":"up","status":"ready","tools":["echo"]}]}}' ] \
  || finding "--json with a listing: exit $rc, $out"
rc=0; out=$(printf 'mcp/call_dynamic_tool {"namespace":"up","toolName":"echo"}\n' | $host "$tmp/coming-up.json" --script -) || rc=$?
[ "$rc" = 0 ] && [ "$out" = '{"line":1,"ok":true,"text":"up"}' ] || finding "a script line with plain text: exit $rc, $out"

# 10b. Every script answer carries "line": N (the script line it answers) and gives back the
# "id" a JSON object line gave, from a file and from stdin alike.
printf '# a comment\n\n{"tool":"mcp/call_dynamic_tool","arguments":{"namespace":"up","toolName":"echo"},"id":"a-1"}\nsleep 0\nmcp/call_dynamic_tool {"namespace":"up","toolName":"nope"}\n{"tool":"mcp/call_dynamic_tool","id":7,"arguments":{"namespace":"up","toolName":"echo"}}\n' > "$tmp/ids.txt"
expected='{"line":3,"id":"a-1","ok":true,"text":"up"}
{"line":5,"ok":false,"kind":"not_found","message":"server \"up\" has no tool \"nope\"; list its tools with mcp/get_dynamic_tools {\"namespace\":\"up\"}"}
{"line":6,"id":7,"ok":true,"text":"up"}'
for source in file stdin; do
  rc=0
  if [ $source = file ]; then out=$($host "$tmp/coming-up.json" --script "$tmp/ids.txt" 2>/dev/null) || rc=$?
  else out=$($host "$tmp/coming-up.json" --script - < "$tmp/ids.txt" 2>/dev/null) || rc=$?; fi
  [ "$rc" = 1 ] && [ "$out" = "$expected" ] || finding "script lines with ids ($source): exit $rc, $out"
done
printf '{"tool": 5}\n' | { rc=0; out=$($host "$tmp/coming-up.json" --script - 2>/dev/null) || rc=$?
  [ "$rc" = 1 ] && [ "$out" = '{"line":1,"ok":false,"kind":"invalid_arguments","message":"line 1: a JSON object line needs \"tool\", a string"}' ] \
    || finding "a bad JSON object line: exit $rc, $out"; }

# 11. A call naming a server that waits for a sign-in stops waiting as soon as the listing shows
# the link, and says how to sign in (it used to wait the whole --wait in silence).
cat > "$tmp/oauth.py" <<'PY'
import json, sys
from http.server import ThreadingHTTPServer, BaseHTTPRequestHandler
port = int(sys.argv[1]); base = "http://127.0.0.1:%d" % port
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def send(self, code, body=None, headers=()):
        data = json.dumps(body).encode() if body is not None else b""
        self.send_response(code)
        for k, v in headers: self.send_header(k, v)
        if body is not None: self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data))); self.end_headers(); self.wfile.write(data)
    def do_GET(self):
        if self.path == "/.well-known/oauth-protected-resource/mcp":
            self.send(200, {"resource": base + "/mcp", "authorization_servers": [base]})
        elif self.path == "/.well-known/oauth-authorization-server":
            self.send(200, {"issuer": base, "authorization_endpoint": base + "/authorize",
                            "token_endpoint": base + "/token", "registration_endpoint": base + "/register",
                            "response_types_supported": ["code"], "code_challenge_methods_supported": ["S256"],
                            "token_endpoint_auth_methods_supported": ["none"]})
        else: self.send(404)
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0) or 0))
        if self.path == "/mcp": self.send(401, None, [("WWW-Authenticate", "Bearer")])
        elif self.path == "/register": self.send(201, {"client_id": "cli-1", "token_endpoint_auth_method": "none"})
        else: self.send(404)
ThreadingHTTPServer(("127.0.0.1", port), H).serve_forever()
PY
portauth=18983
python3 "$tmp/oauth.py" $portauth 2>/dev/null & pids+=($!)
sleep 0.5
printf '{"mcpServers": {"a": {"url": "http://127.0.0.1:%s/mcp"}}}' $portauth > "$tmp/auth.json"
mkdir -m 700 "$tmp/store-auth"
start=$(date +%s)
rc=0; PLUGIN_MCP_OAUTH_DIR="$tmp/store-auth" $host --wait 30 "$tmp/auth.json" mcp/call_dynamic_tool '{"namespace":"a","toolName":"x"}' >/dev/null 2>"$tmp/err" || rc=$?
took=$(( $(date +%s) - start ))
first=$(head -n 1 "$tmp/err")
case "$first" in
  "host: not waiting for a: it needs a sign-in; open http://127.0.0.1:$portauth/authorize?"*" in a browser, or sign in first with \`host login $tmp/auth.json a\`") ok=1 ;;
  *) ok=0 ;;
esac
[ "$rc" = 1 ] && [ "$ok" = 1 ] && [ "$took" -lt 10 ] \
  || finding "a call to a server waiting for a sign-in: exit $rc after ${took}s, $first"

# 12. A call naming a server whose start failed in a way that will not fix itself (a 404 at a url
# without /mcp) stops waiting at its first failed start, well before --wait 30, and says what to
# change.
cat > "$tmp/s404.py" <<'PY'
import sys
from http.server import ThreadingHTTPServer, BaseHTTPRequestHandler
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def reply(self):
        n = int(self.headers.get("Content-Length", 0) or 0)
        if n: self.rfile.read(n)
        self.send_response(404); self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", "22"); self.end_headers(); self.wfile.write(b"<h1>404 Not Found</h1>")
    do_GET = do_POST = do_DELETE = reply
ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
PY
port404=18984
python3 "$tmp/s404.py" $port404 2>/dev/null & pids+=($!)
sleep 0.5
printf '{"mcpServers": {"web": {"url": "http://127.0.0.1:%s/"}}}' $port404 > "$tmp/no-path.json"
started=$SECONDS
rc=0; err=$($host --wait 30 "$tmp/no-path.json" mcp/call_dynamic_tool '{"namespace":"web","toolName":"x"}' 2>&1 >/dev/null) || rc=$?
first=$(printf '%s\n' "$err" | head -n 1)
[ "$rc" = 1 ] && [ $((SECONDS - started)) -lt 15 ] \
  && [ "$first" = 'host: not waiting for web: its start failed in a way that will not fix itself (HTTP 404 Not Found (a body of type text/html, not shown); nothing serves MCP at this URL: check the path in "url" (many servers serve MCP at /mcp))' ] \
  || finding "a call to a url without /mcp: exit $rc after $((SECONDS - started)) s, $err"

# 13. Honest exit codes: a call that answered exits 3 when an entry of CONFIG was refused or a
# server's start failed (status error), also for a listing, and stderr names them; 0 when every
# server is up. (A server still loading when the wait ran out: .ci/examples.sh, the hung one.)
rc=0; out=$($host fixtures/local-only.json mcp/get_dynamic_tools 2>"$tmp/err") || rc=$?
[ "$rc" = 3 ] && [ "$(printf '%s' "$out" | head -c 12)" = '{"servers":[' ] \
  && [ "$(cat "$tmp/err")" = 'host: exit 3: not every server is up: files (error: local MCP servers (command) are not supported yet), legacy (error: the legacy HTTP+SSE transport (type "sse") is not supported; point "url" at the server'"'"'s Streamable HTTP endpoint instead)' ] \
  || finding "a listing with refused entries: exit $rc, $out, $(cat "$tmp/err")"
rc=0; $host --wait 5 "$tmp/no-path.json" mcp/get_dynamic_tools >/dev/null 2>&1 || rc=$?
[ "$rc" = 3 ] || finding "a listing with a failed server: exit $rc"
rc=0; $host "$tmp/coming-up.json" mcp/get_dynamic_tools >/dev/null 2>"$tmp/err" || rc=$?
[ "$rc" = 0 ] && [ ! -s "$tmp/err" ] || finding "a listing with every server up: exit $rc, $(cat "$tmp/err")"

# 14. A call naming a server that answers 401 with a Bearer challenge but offers no OAuth sign-in
# at all (it wants an API key) stops waiting at its first failed start, like check 12: no sign-in
# can succeed (it used to wait the whole --wait).
cat > "$tmp/keyless.py" <<'PY'
import sys
from http.server import ThreadingHTTPServer, BaseHTTPRequestHandler
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def reply(self):
        n = int(self.headers.get("Content-Length", 0) or 0)
        if n: self.rfile.read(n)
        if self.command == "POST" and self.path == "/mcp":
            self.send_response(401); self.send_header("WWW-Authenticate", "Bearer")
        else:
            self.send_response(404)
        self.send_header("Content-Type", "text/plain"); self.send_header("Content-Length", "4")
        self.end_headers(); self.wfile.write(b"nope")
    do_GET = do_POST = do_DELETE = reply
ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
PY
portkeyless=18985
python3 "$tmp/keyless.py" $portkeyless 2>/dev/null & pids+=($!)
sleep 0.5
printf '{"mcpServers": {"keyless": {"url": "http://127.0.0.1:%s/mcp"}}}' $portkeyless > "$tmp/keyless.json"
started=$SECONDS
rc=0; err=$(PLUGIN_MCP_OAUTH_DIR="$tmp/store-keyless" $host --wait 30 "$tmp/keyless.json" mcp/call_dynamic_tool '{"namespace":"keyless","toolName":"x"}' 2>&1 >/dev/null) || rc=$?
first=$(printf '%s\n' "$err" | head -n 1)
[ "$rc" = 1 ] && [ $((SECONDS - started)) -lt 15 ] \
  && [ "$first" = 'host: not waiting for keyless: its start failed in a way that will not fix itself (signing in failed: the server answered HTTP 401 but offers no OAuth sign-in (no protected resource metadata, no authorization server metadata, no registration endpoint); it probably wants an API key or token: set it in the entry'"'"'s headers)' ] \
  || finding "a call to a 401 server that offers no sign-in: exit $rc after $((SECONDS - started)) s, $err"

# 15. A call's exit code depends on that call and its own server: a call that answered exits 0
# though an unrelated entry is refused and another is down; a listing still reports every server.
printf '{"mcpServers": {"up": {"url": "http://127.0.0.1:%s/mcp"}, "files": {"command": "npx"}, "down": {"url": "http://127.0.0.1:9/mcp"}}}' $portup > "$tmp/mixed.json"
rc=0; out=$($host --wait 3 "$tmp/mixed.json" mcp/call_dynamic_tool '{"namespace":"up","toolName":"echo"}' 2>"$tmp/err") || rc=$?
[ "$rc" = 0 ] && [ "$out" = up ] && [ ! -s "$tmp/err" ] || finding "a call beside unrelated down entries: exit $rc, $out, $(cat "$tmp/err")"
rc=0; out=$(printf 'mcp/call_dynamic_tool {"namespace":"up","toolName":"echo"}\nmcp/get_dynamic_tools {"namespace":"up"}\n' | $host --wait 3 "$tmp/mixed.json" --script - 2>"$tmp/err") || rc=$?
[ "$rc" = 0 ] && [ ! -s "$tmp/err" ] || finding "a script about one server beside down entries: exit $rc, $(cat "$tmp/err")"
rc=0; $host --wait 3 "$tmp/mixed.json" mcp/get_dynamic_tools >/dev/null 2>"$tmp/err" || rc=$?
case "$(cat "$tmp/err")" in
  'host: exit 3: not every server is up: down (error: '*'files (error: local MCP servers (command) are not supported yet)') listed=1 ;;
  *) listed=0 ;;
esac
[ "$rc" = 3 ] && [ "$listed" = 1 ] || finding "a listing beside down entries: exit $rc, $(cat "$tmp/err")"

# 16. A server that starts 3 s after the host (a container, a Python server importing) is refused
# at its first starts, and the call still gets through: a refused server is waited for 5 s.
portboot=18986
printf '{"mcpServers": {"boot": {"url": "http://127.0.0.1:%s/mcp"}}}' $portboot > "$tmp/booting.json"
python3 "$tmp/up.py" $portboot 3 2>/dev/null & pids+=($!)
rc=0; out=$($host --wait 30 "$tmp/booting.json" mcp/call_dynamic_tool '{"namespace":"boot","toolName":"echo"}' 2>"$tmp/err") || rc=$?
[ "$rc" = 0 ] && [ "$out" = up ] && [ ! -s "$tmp/err" ] || finding "a server booting for 3 s: exit $rc, $out, $(cat "$tmp/err")"

# 17. At RUST_LOG=plugin_mcp=debug each request's span is printed when it closes, with its
# attributes (the OpenTelemetry MCP conventions), so a user sees the traces without an exporter.
rc=0; RUST_LOG=plugin_mcp=debug NO_COLOR=1 $host "$tmp/coming-up.json" mcp/call_dynamic_tool '{"namespace":"up","toolName":"echo","arguments":{"note":"arg-not-in-spans"}}' >/dev/null 2>"$tmp/err" || rc=$?
span=$(grep 'mcp.request{' "$tmp/err" | grep 'close' | grep 'otel.name=tools/call echo' | head -n 1)
case "$span" in
  *'mcp.method.name="tools/call"'*'gen_ai.tool.name="echo"'*'gen_ai.operation.name="execute_tool"'*'jsonrpc.request.id='*'server.address="127.0.0.1"'*'network.transport="tcp"'*) seen=1 ;;
  *) seen=0 ;;
esac
[ "$rc" = 0 ] && [ "$seen" = 1 ] && ! grep -q 'arg-not-in-spans' "$tmp/err" \
  || finding "the request spans at debug: exit $rc, $span"

# 18. `login` for a server nothing listens on stops as a call does (check 8), well before its
# --wait, and says why (it used to wait the whole --wait).
started=$SECONDS
rc=0; err=$(HOME="$tmp/home18" $host login --wait 60 "$tmp/down.json" down 2>&1 >/dev/null) || rc=$?
took=$((SECONDS - started))
case "$err" in
  'host: login failed: server "down" is not listening: its start was refused '[2-9]' times in a row (connection refused by http://127.0.0.1:9 (no server is listening there))'*) said=1 ;;
  *) said=0 ;;
esac
[ "$rc" = 1 ] && [ "$took" -ge 5 ] && [ "$took" -lt 15 ] && [ "$said" = 1 ] \
  || finding "login to a server nothing listens on: exit $rc after $took s, $err"

[ "$failed" = 0 ] && echo "host-cli: all passed" || { echo "host-cli: $failed failed" >&2; exit 1; }
