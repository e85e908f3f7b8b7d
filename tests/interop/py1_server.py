"""Interop peer: MCP Python SDK 1.x (FastMCP), Streamable HTTP on 127.0.0.1, path /mcp.

Run with .interop/py1/bin/python (mcp<2, pinned by .ci/interop-setup.sh):

    .interop/py1/bin/python tests/interop/py1_server.py --port 18080 [--json-response] [--growing]

The options (--json-response, --growing), the tools and what is printed are common_server.py's;
see also python-servers.md. In --json-response mode a server->client request has no stream to
ride on, so ping_then_answer / ask_sampling give up after 10 s and say so in their text.
"""

from datetime import timedelta

import mcp.types as types
from mcp.server.fastmcp import Context, FastMCP
from mcp.shared.exceptions import McpError

from common_server import Sdk, add_tools, parse_options

opts = parse_options()

mcp = FastMCP(
    "py1-interop",
    host="127.0.0.1",
    port=opts.port,
    streamable_http_path="/mcp",
    json_response=opts.json_response,
    log_level="WARNING",
)

add_tools(
    mcp,
    Sdk(
        context=Context,
        error=McpError,
        # A ping without an answer raises McpError (408) in 1.x.
        timeouts=(),
        ping=lambda: types.ServerRequest(types.PingRequest(method="ping")),
        ping_timeout=timedelta(seconds=10),
        list_changed=lambda: types.ServerNotification(
            types.ToolListChangedNotification(method="notifications/tools/list_changed")
        ),
        request_id=lambda ctx: ctx.request_id,
        low_level=lambda mcp: mcp._mcp_server,
    ),
    opts.growing,
)


if __name__ == "__main__":
    mcp.run(transport="streamable-http")
