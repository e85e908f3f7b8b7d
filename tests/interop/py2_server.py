"""Interop peer: MCP Python SDK 2.x (MCPServer), Streamable HTTP on 127.0.0.1, path /mcp.

Run with .interop/py2/bin/python (mcp>=2, pinned by .ci/interop-setup.sh):

    .interop/py2/bin/python tests/interop/py2_server.py --port 18080 [--json-response] [--growing]

Default: responses to POSTs are SSE streams; --json-response: plain application/json.
--growing declares tools.listChanged and adds two tools: grow registers the tool extra at run
time and sends notifications/tools/list_changed on its own call's stream (none in
--json-response mode); grow_more registers the tool more and sends it on the standalone GET
stream.
Nothing is printed when ready (log level WARNING): poll the port. See python-servers.md.

In --json-response mode a server->client request has no stream to ride on, so
ping_then_answer / ask_sampling fail (or give up after 10 s) and say so in their text.
"""

import argparse
import asyncio
import warnings

import mcp.types as types
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata

warnings.filterwarnings("ignore")  # sampling is deprecated as of 2026-07-28; we use it on purpose

parser = argparse.ArgumentParser()
parser.add_argument("--port", type=int, required=True)
parser.add_argument("--json-response", action="store_true")
parser.add_argument("--growing", action="store_true")
opts = parser.parse_args()

mcp = MCPServer("py2-interop", log_level="WARNING")


@mcp.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@mcp.tool()
def echo(text: str) -> str:
    """Echo the text back."""
    return text


@mcp.tool()
async def ping_then_answer(ctx: Context) -> str:
    """Ping the client (a server->client request on this call's stream), then answer."""
    try:
        await ctx.session.send_request(
            types.PingRequest(),
            types.EmptyResult,
            request_read_timeout_seconds=10,
            metadata=ServerMessageMetadata(related_request_id=ctx.request_context.request_id),
        )
    except MCPError as e:
        return f"ping failed: {e.error.code} {e.error.message}"
    except (TimeoutError, asyncio.TimeoutError):
        return "ping failed: no answer within 10 s"
    return "pong received"


@mcp.tool()
async def ask_sampling(ctx: Context) -> str:
    """Send sampling/createMessage to the client and describe the error it answers."""
    try:
        result = await asyncio.wait_for(
            ctx.session.create_message(
                messages=[types.SamplingMessage(role="user", content=types.TextContent(type="text", text="hello"))],
                max_tokens=16,
                related_request_id=ctx.request_context.request_id,
            ),
            timeout=10,
        )
    except MCPError as e:
        return f"sampling failed: {e.error.code} {e.error.message}"
    except (TimeoutError, asyncio.TimeoutError):
        return "sampling failed: no answer within 10 s"
    return f"sampling succeeded: {result.model_dump_json(exclude_none=True)}"


@mcp.tool()
async def slow(seconds: float) -> str:
    """Sleep, then answer."""
    await asyncio.sleep(seconds)
    return f"slept {seconds}"


def extra() -> str:
    """A tool added at run time."""
    return "extra works"


async def grow(ctx: Context) -> str:
    """Add the tool extra, and say so on this call's stream."""
    mcp.add_tool(extra)
    await ctx.session.send_notification(
        types.ToolListChangedNotification(method="notifications/tools/list_changed"),
        related_request_id=ctx.request_context.request_id,
    )
    return "grown"


def more() -> str:
    """Another tool added at run time."""
    return "more works"


async def grow_more(ctx: Context) -> str:
    """Add the tool more, and say so on the standalone GET stream."""
    mcp.add_tool(more)
    await ctx.session.send_tool_list_changed()
    return "grown more"


if opts.growing:
    from mcp.server.lowlevel.server import NotificationOptions

    low_level = mcp._lowlevel_server
    plain_options = low_level.create_initialization_options
    low_level.create_initialization_options = lambda *args, **kwargs: plain_options(
        NotificationOptions(tools_changed=True)
    )
    mcp.add_tool(grow)
    mcp.add_tool(grow_more)


if __name__ == "__main__":
    mcp.run(
        transport="streamable-http",
        host="127.0.0.1",
        port=opts.port,
        streamable_http_path="/mcp",
        json_response=opts.json_response,
    )
