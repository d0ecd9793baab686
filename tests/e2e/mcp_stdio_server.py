"""A real stdio MCP server (the official SDK's MCPServer): `python tests/e2e/mcp_stdio_server.py`."""

from __future__ import annotations

import sys
from typing import TypedDict

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

__all__ = ["announce_tools_changed", "build"]


class Weather(TypedDict):
    """The typed result, so the tool declares an outputSchema with typed fields."""

    city: str
    temp_c: int


async def announce_tools_changed(ctx: Context) -> None:
    """Tell the client its tool list changed, the way its era hears of it: a 2026-07-28 client on its
    subscriptions/listen stream, an earlier one by notifications/tools/list_changed on its session."""
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        await ctx.notify_tools_changed()
    else:
        await ctx.session.send_tool_list_changed()


def build() -> MCPServer:
    server = MCPServer("weather")

    @server.tool()
    def get_weather(city: str) -> Weather:
        """Current weather for a city."""
        return {"city": city, "temp_c": 18}

    @server.tool()
    def flaky_forecast(city: str) -> str:
        """A tool whose backend is down: the SDK turns the ToolError into a result with isError."""
        raise ToolError(f"forecast backend for {city} is down")

    @server.tool()
    async def install_plugin(ctx: Context) -> str:
        """Adds a tool, then tells the client its tool list changed (a real server-side change)."""

        def admin_reset(confirm: bool) -> str:
            """Reset everything."""
            return "reset" if confirm else "kept"

        server.add_tool(admin_reset)
        await announce_tools_changed(ctx)
        return "installed"

    return server


if __name__ == "__main__":
    print("weather server ready", file=sys.stderr, flush=True)
    build().run("stdio")
