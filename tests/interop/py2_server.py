"""Interop peer: MCP Python SDK 2.x (MCPServer), Streamable HTTP on 127.0.0.1, path /mcp.

Run with .interop/py2/bin/python (mcp>=2, pinned by .ci/interop-setup.sh):

    .interop/py2/bin/python tests/interop/py2_server.py --port 18080 [--json-response] [--growing]

The options (--json-response, --growing), the tools and what is printed are common_server.py's;
see also python-servers.md. In --json-response mode a server->client request has no stream to
ride on, so ping_then_answer / ask_sampling fail (or give up after 10 s) and say so in their text.
"""

import asyncio
import warnings

import mcp.types as types
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError

from common_server import Sdk, add_tools, parse_options, serve

warnings.filterwarnings("ignore")  # sampling is deprecated as of 2026-07-28; we use it on purpose

opts = parse_options()

mcp = MCPServer("py2-interop", log_level="WARNING")

add_tools(
    mcp,
    Sdk(
        context=Context,
        error=MCPError,
        timeouts=(TimeoutError, asyncio.TimeoutError),
        ping=types.PingRequest,
        ping_timeout=10,
        list_changed=lambda: types.ToolListChangedNotification(method="notifications/tools/list_changed"),
        request_id=lambda ctx: ctx.request_context.request_id,
        low_level=lambda mcp: mcp._lowlevel_server,
    ),
    opts.growing,
)


if __name__ == "__main__":
    serve(mcp, opts)
