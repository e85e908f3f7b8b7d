#!/usr/bin/env python3
"""Minimal stdlib-only MCP Streamable HTTP client, used only to prove that
.ci/conformance.sh can pass (it is not the crate's client):

    .ci/conformance.sh tests/interop/conformance_reference_client.py

Called by the suite as `<this file> <server-url>` with MCP_CONFORMANCE_SCENARIO set.
It does what the scenarios need on the wire: initialize (2025-11-25, capabilities {}),
notifications/initialized, tools/list, then tools/call of the first listed tool with
every required number argument set to 1; a POST stream that ends after an event id
but before the response is resumed after `retry` ms by GET + Last-Event-ID.
"""
import http.client
import json
import sys
import time
import urllib.parse

URL = urllib.parse.urlparse(sys.argv[-1])
state = {"sid": None, "ver": None, "last_id": None, "retry": None}


def headers(extra=None):
    h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if state["sid"]:
        h["Mcp-Session-Id"] = state["sid"]
    if state["ver"]:
        h["MCP-Protocol-Version"] = state["ver"]
    h.update(extra or {})
    return h


def conn():
    return http.client.HTTPConnection(URL.hostname, URL.port, timeout=30)


def read_sse(resp, want_id):
    """Read SSE events; return the response for want_id or None if the stream ended."""
    data, ev_id = [], None
    while True:
        raw = resp.readline()
        if not raw:
            return None
        line = raw.decode().rstrip("\r\n")
        if line == "":
            if ev_id is not None:
                state["last_id"] = ev_id
            payload = "\n".join(data)
            data, ev_id = [], None
            if payload.strip():
                msg = json.loads(payload)
                if msg.get("id") == want_id and ("result" in msg or "error" in msg):
                    return msg
            continue
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "data":
            data.append(value)
        elif field == "id":
            ev_id = value
        elif field == "retry" and value.isdigit():
            state["retry"] = int(value)


def post(msg):
    c = conn()
    c.request("POST", URL.path or "/", json.dumps(msg), headers())
    r = c.getresponse()
    if r.getheader("mcp-session-id"):
        state["sid"] = r.getheader("mcp-session-id")
    if "id" not in msg:  # notification
        r.read()
        return None
    if r.status != 200:
        raise SystemExit(f"HTTP {r.status} for {msg['method']}: {r.read()!r}")
    if (r.getheader("content-type") or "").startswith("text/event-stream"):
        state["last_id"] = None
        resp = read_sse(r, msg["id"])
        c.close()
        while resp is None:
            if state["last_id"] is None:
                raise SystemExit(f"stream for {msg['method']} ended without response or event id")
            time.sleep((state["retry"] or 1000) / 1000)
            g = conn()
            g.request("GET", URL.path or "/", headers={**headers({"Last-Event-ID": state["last_id"]}), "Accept": "text/event-stream"})
            gr = g.getresponse()
            if gr.status != 200:
                raise SystemExit(f"HTTP {gr.status} on resume GET")
            resp = read_sse(gr, msg["id"])
            g.close()
        return resp
    return json.loads(r.read())


init = post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {},
    "clientInfo": {"name": "reference-client", "version": "0.0.0"}}})
state["ver"] = init["result"]["protocolVersion"]
post({"jsonrpc": "2.0", "method": "notifications/initialized"})
tools = post({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})["result"].get("tools", [])
if tools:
    t = tools[0]
    schema = t.get("inputSchema", {})
    args = {k: 1 for k in schema.get("required", []) if schema.get("properties", {}).get(k, {}).get("type") in ("number", "integer")}
    res = post({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": t["name"], "arguments": args}})
    print(json.dumps(res))
