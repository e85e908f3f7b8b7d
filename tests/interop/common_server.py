"""What py1_server.py and py2_server.py share: their options and their tools.

Each server builds its SDK's server object and passes it here with an Sdk naming the few things
the two SDK generations spell differently. Both are run as scripts, so this directory is on
sys.path and `import common_server` finds this file from any working directory.

Default: responses to POSTs are SSE streams; --json-response: plain application/json.
--growing declares tools.listChanged and adds two tools: grow registers the tool extra at run
time and sends notifications/tools/list_changed on its own call's stream (none in
--json-response mode); grow_more registers the tool more and sends it on the standalone GET
stream. Nothing is printed when ready (log level WARNING): poll the port.
"""

import argparse
import asyncio
from dataclasses import dataclass
from typing import Any, Callable

import mcp.types as types
from mcp.server.lowlevel.server import NotificationOptions
from mcp.shared.message import ServerMessageMetadata


def parse_options() -> argparse.Namespace:
    """--port PORT [--json-response] [--growing], as the module docs of both servers say."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--json-response", action="store_true")
    parser.add_argument("--growing", action="store_true")
    return parser.parse_args()


@dataclass
class Sdk:
    """What one SDK generation spells its own way."""

    # The `Context` class a tool's parameter is annotated with (the SDK injects it by type).
    context: type
    # The exception a refused request raises (it has `.error.code` and `.error.message`).
    error: type
    # Exceptions meaning a server->client request had no answer in time, beyond `error`.
    timeouts: tuple
    # The ping request as `send_request` takes it.
    ping: Callable[[], Any]
    # The read timeout of that request (10 s) as `send_request` takes it.
    ping_timeout: Any
    # The tools/list_changed notification as `send_notification` takes it.
    list_changed: Callable[[], Any]
    # The id of the request a tool call runs for.
    request_id: Callable[[Any], Any]
    # The low-level server under the high-level one.
    low_level: Callable[[Any], Any]


def add_basic_tools(mcp: Any) -> None:
    """Registers add(a, b: integer) and echo(text)."""

    @mcp.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @mcp.tool()
    def echo(text: str) -> str:
        """Echo the text back."""
        return text


def serve(mcp: Any, opts: argparse.Namespace) -> None:
    """Serves `mcp` (an SDK 2.x MCPServer) over Streamable HTTP on 127.0.0.1:opts.port at /mcp,
    answering with JSON instead of SSE under --json-response."""
    mcp.run(
        transport="streamable-http",
        host="127.0.0.1",
        port=opts.port,
        streamable_http_path="/mcp",
        json_response=opts.json_response,
    )


def add_tools(mcp: Any, sdk: Sdk, growing: bool) -> None:
    """Registers add, echo, ping_then_answer, ask_sampling and slow, and with `growing`
    grow and grow_more (and declares tools.listChanged)."""
    Context = sdk.context
    add_basic_tools(mcp)

    @mcp.tool()
    async def ping_then_answer(ctx: Context) -> str:
        """Ping the client (a server->client request on this call's stream), then answer."""
        try:
            await ctx.session.send_request(
                sdk.ping(),
                types.EmptyResult,
                request_read_timeout_seconds=sdk.ping_timeout,
                metadata=ServerMessageMetadata(related_request_id=sdk.request_id(ctx)),
            )
        except sdk.error as e:
            return f"ping failed: {e.error.code} {e.error.message}"
        except sdk.timeouts:
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
                    related_request_id=sdk.request_id(ctx),
                ),
                timeout=10,
            )
        except sdk.error as e:
            return f"sampling failed: {e.error.code} {e.error.message}"
        except (TimeoutError, asyncio.TimeoutError):
            return "sampling failed: no answer within 10 s"
        return f"sampling succeeded: {result.model_dump_json(exclude_none=True)}"

    @mcp.tool()
    async def slow(seconds: float) -> str:
        """Sleep, then answer."""
        await asyncio.sleep(seconds)
        return f"slept {seconds}"

    if not growing:
        return

    def extra() -> str:
        """A tool added at run time."""
        return "extra works"

    async def grow(ctx: Context) -> str:
        """Add the tool extra, and say so on this call's stream."""
        mcp.add_tool(extra)
        await ctx.session.send_notification(sdk.list_changed(), related_request_id=sdk.request_id(ctx))
        return "grown"

    def more() -> str:
        """Another tool added at run time."""
        return "more works"

    async def grow_more(ctx: Context) -> str:
        """Add the tool more, and say so on the standalone GET stream."""
        mcp.add_tool(more)
        await ctx.session.send_tool_list_changed()
        return "grown more"

    low_level = sdk.low_level(mcp)
    plain_options = low_level.create_initialization_options
    low_level.create_initialization_options = lambda *args, **kwargs: plain_options(
        NotificationOptions(tools_changed=True)
    )
    mcp.add_tool(grow)
    mcp.add_tool(grow_more)
