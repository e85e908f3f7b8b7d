"""Interop peer: MCP Python SDK 2.x (MCPServer) for the 2026-07-28 revision, Streamable HTTP on
127.0.0.1, path /mcp.

Run with .interop/py2/bin/python (mcp>=2, pinned by .ci/interop-setup.sh):

    .interop/py2/bin/python tests/interop/py2_modern_server.py --port 18080 [--json-response]

The SDK picks the era per request from the MCP-Protocol-Version header alone: a 2026-07-28 header
goes to its single-exchange modern path, no header (or a 2025 version) to its sessionful 2025
path. There is no modern-only mode. Tools: add(a, b: integer); echo(text); region_echo(region,
text), whose `region` carries `x-mcp-header: Region`; grow(), which registers the tool extra and
publishes notifications/tools/list_changed to open subscriptions/listen streams. Nothing is
printed when ready (log level WARNING): poll the port.
"""

from typing import Annotated

from mcp.server.mcpserver import Context, MCPServer
from pydantic import Field

from common_server import add_basic_tools, parse_options, serve

opts = parse_options()

mcp = MCPServer("py2-modern-interop", log_level="WARNING")

add_basic_tools(mcp)


@mcp.tool()
def region_echo(region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})], text: str) -> str:
    """Echo the region and the text; region is mirrored into the Mcp-Param-Region header."""
    return f"{region}: {text}"


def extra(text: str) -> str:
    """Echo, added by grow."""
    return text


@mcp.tool()
async def grow(ctx: Context) -> str:
    """Add the tool extra and announce the change to subscriptions/listen streams."""
    if "extra" not in {t.name for t in mcp._tool_manager.list_tools()}:
        mcp.add_tool(extra)
    await ctx.notify_tools_changed()
    return "grown"


if __name__ == "__main__":
    serve(mcp, opts)
